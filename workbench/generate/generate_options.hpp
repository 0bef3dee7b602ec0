#pragma once
// The options of `workbook generate`, shared by the workbook command (which documents and checks
// them) and the engines that run them: generate-learner / generate-reference for a checkpoint of
// lab 10's model (token ids, greedy), generate-gpt-learner / generate-gpt-reference for one of
// lab 13's GPT (text, sampled). The command picks the engine by the checkpoint's config.json.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct GenerateOptions {
  std::filesystem::path checkpoint;  // a folder written by save_checkpoint or save_gpt_checkpoint
  std::vector<std::string> prompt;   // lab 10: token ids, separated by spaces or commas, in one or
                                    // more arguments; lab 13: text (the arguments joined by spaces)
  std::size_t tokens = 0;  // lab 10: how many to generate; 0: until max_len
  // Lab 13's sampling; unset, the GPT engine's defaults (kGptSamplingDefaults). Lab 10's greedy
  // engine refuses them.
  std::optional<double> temperature, top_p;
  std::optional<std::size_t> top_k, max_new;
  std::optional<std::uint64_t> seed;
};

/// The GPT engine's defaults: what `workbook generate --help` says.
struct GptSamplingDefaults {
  double temperature = 0.8;
  std::size_t top_k = 0;  // 0: every token
  double top_p = 0.95;
  std::size_t max_new = 200;
  std::uint64_t seed = 1;
};
inline constexpr GptSamplingDefaults kGptSamplingDefaults{};

/// Whether `dir`/config.json names lab 13's checkpoint format ("minimodel gpt checkpoint 1"):
/// which engine runs it. A cheap look for the command (a regular file of at most 1 MiB, its text
/// searched); the engine reads the whole checkpoint and names what is wrong.
inline bool names_gpt_checkpoint(const std::filesystem::path& dir) {
  const std::filesystem::path config = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config, ec) ||
      std::filesystem::file_size(config, ec) > (std::size_t{1} << 20) || ec)
    return false;
  std::ifstream in(config, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str().find("\"minimodel gpt checkpoint 1\"") != std::string::npos;
}

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

/// A sampling knob's check: a number from `lo` to `hi` (above `lo` if `lo_open`), saying what to
/// `give` otherwise. Unlike CLI::Range it refuses NaN, which compares false with both bounds: the
/// GPT engine would find it only once sampling, after printing the prompt.
inline CLI::Validator knob_in(double lo, double hi, bool lo_open, const std::string& give) {
  const std::string range = std::string(lo_open ? "(" : "[") + CLI::detail::to_string(lo) + ", " +
                            CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& input) {
        double value = 0.0;
        const bool ok = CLI::detail::lexical_cast(input, value) &&
                        (lo_open ? value > lo : value >= lo) && value <= hi;
        return ok ? std::string() : input + " is not in " + range + ": give " + give;
      },
      "in " + range);
}

/// Adds every generate option except --impl, which only the workbook command has.
inline void add_generate_options(CLI::App& app, GenerateOptions& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "A checkpoint folder: of lab 10's model (config.json and one .npy per tensor; "
                 "greedy decoding of token ids) or of lab 13's GPT (with its tokenizer; text, "
                 "sampled)")
      ->required();
  app.add_option("--prompt", o.prompt,
                 "What to continue. Lab 10: token ids from 0 to vocab-1, separated by spaces or "
                 "commas, e.g. --prompt \"3 17 42 3\", at most max_len-1 of them. Lab 13: text, "
                 "e.g. --prompt \"In the beginning\", encoded with the checkpoint's tokenizer")
      ->required();
  app.add_option("--tokens", o.tokens,
                 "Lab 10: how many tokens to generate (default: until the sequence holds the "
                 "checkpoint's max_len tokens)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  const GptSamplingDefaults d = kGptSamplingDefaults;
  app.add_option("--temperature", o.temperature,
                 "Lab 13: divide the logits by T before the softmax; 0 picks the most likely "
                 "token (default " +
                     CLI::detail::to_string(d.temperature) + ")")
      ->check(knob_in(0.0, 100.0, false, "e.g. 0.8, or 0 for the most likely token"));
  app.add_option("--top-k", o.top_k,
                 "Lab 13: sample among the K most likely tokens only; 0: all (default " +
                     std::to_string(d.top_k) + ")")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 24));
  app.add_option("--top-p", o.top_p,
                 "Lab 13: then among the smallest set of most likely tokens whose probability "
                 "reaches P, in (0, 1] (default " +
                     CLI::detail::to_string(d.top_p) + ")")
      ->check(knob_in(0.0, 1.0, true, "e.g. 0.95 (0 would keep no token, 1 keeps every one)"));
  app.add_option("--max-new", o.max_new,
                 "Lab 13: how many tokens to generate (default " + std::to_string(d.max_new) +
                     "); past the context the model keeps its last max_len/2 tokens")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--seed", o.seed,
                 "Lab 13: the sampler's std::mt19937_64 seed; the same seed, prompt and knobs give "
                 "the same text (default " +
                     std::to_string(d.seed) + ")");
}

/// The engine's command line for these options.
inline std::vector<std::string> generate_arguments(const GenerateOptions& o) {
  std::string prompt;
  for (const std::string& piece : o.prompt) prompt += (prompt.empty() ? "" : " ") + piece;
  std::vector<std::string> args = {"--checkpoint", o.checkpoint.string(), "--prompt", prompt};
  if (o.tokens > 0) args.insert(args.end(), {"--tokens", std::to_string(o.tokens)});
  // Numbers as the user gave them would be best; these print every digit a double needs.
  const auto number = [](double value) {
    std::ostringstream text;
    text.precision(17);
    text << value;
    return text.str();
  };
  if (o.temperature) args.insert(args.end(), {"--temperature", number(*o.temperature)});
  if (o.top_k) args.insert(args.end(), {"--top-k", std::to_string(*o.top_k)});
  if (o.top_p) args.insert(args.end(), {"--top-p", number(*o.top_p)});
  if (o.max_new) args.insert(args.end(), {"--max-new", std::to_string(*o.max_new)});
  if (o.seed) args.insert(args.end(), {"--seed", std::to_string(*o.seed)});
  return args;
}

}  // namespace workbench
