#pragma once
// The options of `workbook tokenize train|encode|decode`, shared by the workbook command (which
// documents and checks them) and the tokenize-learner / tokenize-reference engines (which run
// them with lab 12's code).
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct TokenizeOptions {
  std::filesystem::path input;              // train: the text to train on
  std::size_t vocab_size = 0;               // train: tokens in all, bytes and specials included
  std::vector<std::string> special_tokens;  // train: e.g. <|endoftext|>
  std::filesystem::path out;                // train: the folder for vocab.json and merges.txt
  std::filesystem::path tokenizer;          // encode, decode: a folder `train` wrote
};

/// The files of a tokenizer folder: GPT-2's two, and the special tokens as a JSON list (GPT-2's
/// files do not say which vocabulary entries are special).
inline constexpr const char* kVocabFile = "vocab.json";
inline constexpr const char* kMergesFile = "merges.txt";
inline constexpr const char* kSpecialTokensFile = "special_tokens.json";

/// The three subcommands of `app` (train, encode, decode) with their options; --impl is the
/// workbook command's own.
struct TokenizeCommands {
  CLI::App* train = nullptr;
  CLI::App* encode = nullptr;
  CLI::App* decode = nullptr;
};

inline TokenizeCommands add_tokenize_commands(CLI::App& app, TokenizeOptions& o) {
  app.require_subcommand(1);
  TokenizeCommands c;
  c.train = app.add_subcommand(
      "train",
      "Train byte-level BPE on a text file; write vocab.json and merges.txt (GPT-2's formats) and "
      "special_tokens.json into --out, all or nothing, and print the time taken");
  c.train->add_option("--input", o.input, "The text to train on (UTF-8)")
      ->required()
      ->check(CLI::ExistingFile);
  c.train
      ->add_option("--vocab-size", o.vocab_size,
                   "Tokens in all: 256 bytes, the merges and the special tokens")
      ->required()
      ->check(CLI::Range(std::size_t{256}, std::size_t{1} << 20));
  c.train->add_option("--special", o.special_tokens,
                      "A special token, never split or merged (repeat for more), e.g. "
                      "--special \"<|endoftext|>\"");
  c.train->add_option("--out", o.out, "The folder to write the tokenizer into")->required();
  c.encode = app.add_subcommand(
      "encode", "Read text on stdin, print its token ids on stdout, separated by spaces");
  c.decode = app.add_subcommand(
      "decode",
      "Read token ids on stdin (separated by spaces, commas or newlines), print the text; bytes "
      "that are not UTF-8 become U+FFFD");
  for (CLI::App* sub : {c.encode, c.decode})
    sub->add_option("--tokenizer", o.tokenizer, "A folder written by `workbook tokenize train`")
        ->required()
        ->check(CLI::ExistingDirectory);
  return c;
}

/// The engine's command line for these options and the chosen subcommand.
inline std::vector<std::string> tokenize_arguments(const TokenizeCommands& c,
                                                   const TokenizeOptions& o) {
  if (*c.train) {
    std::vector<std::string> args = {
        "train", "--input",     o.input.string(), "--vocab-size", std::to_string(o.vocab_size),
        "--out", o.out.string()};
    for (const std::string& token : o.special_tokens) args.insert(args.end(), {"--special", token});
    return args;
  }
  return {*c.encode ? "encode" : "decode", "--tokenizer", o.tokenizer.string()};
}

}  // namespace workbench
