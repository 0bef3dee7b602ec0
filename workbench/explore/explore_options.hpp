#pragma once
// The options of `workbook explore --checkpoint`, shared by the workbook command (which documents
// and checks them) and the explore-learner / explore-reference engines (which run them).
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct ExploreOptions {
  std::filesystem::path checkpoint;  // a folder written by workbench::save_checkpoint
  std::string text;                  // the text to run, for a model with a tokenizer
  std::filesystem::path text_file;   // the same, from a file
  std::string tokens;                // token ids, separated by spaces or commas
  std::filesystem::path out;         // the page; its data goes beside it as .json
  // Which of the three was given, even as an empty string (which is refused with a reason).
  bool has_text = false, has_text_file = false, has_tokens = false;
};

/// Adds every explore option except --impl, --serve and --port, which only the workbook command
/// has. `out_required`: the engine needs --out; the workbook command chooses a default.
inline void add_explore_options(CLI::App& app, ExploreOptions& o, bool out_required) {
  app.add_option("--checkpoint", o.checkpoint,
                 "A checkpoint folder of lab 10's model or lab 13's GPT (its config.json says "
                 "which)");
  CLI::Option* text = app.add_option("--text", o.text, "The text to run through the model")
                          ->each([&o](const std::string&) { o.has_text = true; });
  CLI::Option* file =
      app.add_option("--text-file", o.text_file, "A file holding the text (UTF-8, at most 1 MiB)")
          ->each([&o](const std::string&) { o.has_text_file = true; });
  CLI::Option* tokens =
      app.add_option("--tokens", o.tokens,
                     "Token ids instead of text, separated by spaces or commas, e.g. \"3 17 4 9\"")
          ->each([&o](const std::string&) { o.has_tokens = true; });
  text->excludes(file)->excludes(tokens);
  file->excludes(tokens);
  CLI::Option* out = app.add_option(
      "--out", o.out,
      "The HTML file to write (its data goes beside it as .json); default: explore-checkpoint.html "
      "beside the checkpoint folder");
  if (out_required) out->required();
}

/// The engine's command line for these options.
inline std::vector<std::string> explore_arguments(const ExploreOptions& o) {
  std::vector<std::string> args = {"--checkpoint", o.checkpoint.string(), "--out", o.out.string()};
  if (o.has_text) args.insert(args.end(), {"--text", o.text});
  if (o.has_text_file) args.insert(args.end(), {"--text-file", o.text_file.string()});
  if (o.has_tokens) args.insert(args.end(), {"--tokens", o.tokens});
  return args;
}

}  // namespace workbench
