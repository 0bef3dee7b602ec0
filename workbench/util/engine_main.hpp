#pragma once
// The main() of every engine the workbook command runs as a child (generate-*, generate-gpt-*,
// explore-*, explore-gpt-*): its command line read with CLI11, then its work run, and whatever
// goes wrong told in one line a learner can act on, with the exit status the command maps.
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace workbench {

/// How an engine's one-line errors read.
struct EngineErrors {
  std::string command;  ///< the workbook command it serves, first on each line: "workbook generate"
  std::string impl;     ///< the implementation it links, named on a TODO line: "learner"
  /// After "out of memory (std::bad_alloc)": what is most likely too large, or "".
  std::string out_of_memory;
};

/// Parses `argc`/`argv` with `app` (which holds the engine's options), then runs `run`. Exit
/// status: --help 0; a bad command line 2, CLI11's message on one line; otherwise `run`'s, or what
/// it throws as one line on stderr: a TODO stub (minimodel::Todo) 1, naming --impl; bad input
/// (std::invalid_argument, std::runtime_error, anything else) and std::bad_alloc 2.
int engine_main(CLI::App& app, int argc, char** argv, const EngineErrors& errors,
                const std::function<int()>& run);

}  // namespace workbench
