#pragma once
// Running another program as a child process: with its output passed through (run_process), or
// captured for parsing (run_captured).
#include <filesystem>
#include <string>
#include <vector>

namespace workbench {

/// How a child process ended.
struct ProcessStatus {
  bool exited = false;  ///< false: it was killed by a signal (it crashed)
  int code = 0;         ///< exit status if exited, signal number otherwise
  std::string describe() const;  ///< "exit status 2" or "signal 11 (Segmentation fault)"
};

/// Runs `program` with `args`, sharing this process's stdin, stdout and stderr, and waits.
/// @throws std::runtime_error if it cannot be started.
ProcessStatus run_process(const std::filesystem::path& program, const std::vector<std::string>& args);

/// A finished child process and everything it wrote to stdout and stderr, interleaved.
struct CapturedRun {
  ProcessStatus status;
  std::string output;
};

/// Runs `program` with `args`, stdin from /dev/null, stdout and stderr captured into one string,
/// and waits. A `program` without a '/' is searched on PATH, as a shell would (cmake, ctest, git).
/// @throws std::runtime_error if it cannot be started.
CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args);

/// The folder of the running executable (build/bin), where its sibling programs are.
std::filesystem::path executable_dir();

}  // namespace workbench
