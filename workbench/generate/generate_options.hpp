#pragma once
// The options of `workbook generate`, shared by the workbook command (which documents and checks
// them) and the generate-learner / generate-reference engines (which run them).
#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct GenerateOptions {
  std::filesystem::path checkpoint;  // a folder written by workbench::save_checkpoint
  std::vector<std::string> prompt;   // token ids, separated by spaces or commas, in one or more
                                     // arguments
  std::size_t tokens = 0;            // how many to generate; 0: until the sequence has max_len
};

/// The token ids in `pieces`, each of which holds ids separated by spaces or commas: {"3 17,42"}
/// and {"3", "17", "42"} both give 3, 17, 42.
/// @throws std::invalid_argument naming the first piece of text that is not a token id.
inline std::vector<std::size_t> parse_prompt(const std::vector<std::string>& pieces) {
  std::vector<std::size_t> tokens;
  for (const std::string& piece : pieces) {
    std::size_t start = 0;
    while (start < piece.size()) {
      const std::size_t end = piece.find_first_of(" ,\t\n", start);
      const std::string id = piece.substr(start, end - start);
      start = end == std::string::npos ? piece.size() : end + 1;
      if (id.empty()) continue;
      // At most 9 digits: no overflow, and far above any vocabulary, which is checked later.
      if (id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("'" + id +
                                    "' is not a token id; give whole numbers from 0 to vocab-1 "
                                    "separated by spaces or commas, e.g. --prompt \"3 17 42\"");
      tokens.push_back(std::stoul(id));
    }
  }
  return tokens;
}

/// Adds every generate option except --impl, which only the workbook command has.
inline void add_generate_options(CLI::App& app, GenerateOptions& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "A checkpoint folder of lab 10's model: config.json and one .npy per tensor")
      ->required();
  const CLI::Validator token_ids(
      [](std::string& text) -> std::string {
        try {
          if (parse_prompt({text}).empty())
            return "'" + text + "' holds no token id; give e.g. --prompt \"3 17 42\"";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        return "";
      },
      "TOKEN IDS");
  app.add_option("--prompt", o.prompt,
                 "The tokens to continue: ids from 0 to vocab-1, separated by spaces or commas, "
                 "e.g. --prompt \"3 17 42 3\"; at most max_len-1 of them")
      ->required()
      ->check(token_ids);
  app.add_option("--tokens", o.tokens,
                 "How many tokens to generate (default: until the sequence holds the checkpoint's "
                 "max_len tokens)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
}

/// The engine's command line for these options.
inline std::vector<std::string> generate_arguments(const GenerateOptions& o) {
  std::string prompt;
  for (const std::string& piece : o.prompt) prompt += (prompt.empty() ? "" : " ") + piece;
  std::vector<std::string> args = {"--checkpoint", o.checkpoint.string(), "--prompt", prompt};
  if (o.tokens > 0) args.insert(args.end(), {"--tokens", std::to_string(o.tokens)});
  return args;
}

}  // namespace workbench
