#pragma once
// The options of `workbook evaluate`, shared by the workbook command (which documents and checks
// them) and the engines that run them (evaluate-gpt-learner, evaluate-gpt-reference): a checkpoint
// of lab 13's GPT scored on the held-out books, with some heads ablated (head_ablation.hpp).
#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct EvaluateOptions {
  std::filesystem::path checkpoint;    // a folder written by save_gpt_checkpoint
  std::string ablate;                  // "L.H[,L.H…]", e.g. "3.2,0.2"; empty: none
  std::optional<std::size_t> windows;  // unset: kDefaultEvaluateWindows
};

/// Windows of the checkpoint's T + 1 tokens scored when --windows is not given: more than the
/// held-out books hold (885 of 128 tokens for lab 13's default model), so all of them: 3.9 s of
/// CPU a pass in Release on one thread for that model (measured on a busy machine).
inline constexpr std::size_t kDefaultEvaluateWindows = 100000;

/// A head by its layer and its index in that layer, as `workbook explore` names it ("L3 H2").
struct HeadRef {
  std::size_t layer = 0, head = 0;
};
inline bool operator==(const HeadRef& a, const HeadRef& b) {
  return a.layer == b.layer && a.head == b.head;
}

/// The heads of "L.H[,L.H…]" ("3.2", "3.2,0.2"; an "L" before a layer is allowed: "L3.2").
/// @throws std::invalid_argument, one line saying what --ablate takes, for anything else.
inline std::vector<HeadRef> parse_heads(const std::string& text) {
  const auto malformed = [&](const std::string& piece) {
    return std::invalid_argument("--ablate: '" + piece +
                                 "' is not a head; give LAYER.HEAD[,LAYER.HEAD...] counted from "
                                 "0, e.g. --ablate 3.2 or --ablate 3.2,0.2");
  };
  // A number of at most 4 digits: no overflow, far above any model's layers or heads.
  const auto number = [](const std::string& digits) -> std::optional<std::size_t> {
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoul(digits);
  };
  std::vector<HeadRef> heads;
  std::size_t start = 0;
  do {
    const std::size_t end = text.find(',', start);
    const std::string piece = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() + 1 : end + 1;
    std::string body = piece;
    if (!body.empty() && (body[0] == 'L' || body[0] == 'l')) body.erase(0, 1);
    const std::size_t dot = body.find('.');
    if (dot == std::string::npos) throw malformed(piece);
    const auto layer = number(body.substr(0, dot)), head = number(body.substr(dot + 1));
    if (!layer || !head) throw malformed(piece);
    heads.push_back({*layer, *head});
  } while (start <= text.size());
  return heads;
}

/// `heads` as the output names them: "L3.2, L0.2".
inline std::string head_names(const std::vector<HeadRef>& heads) {
  std::string names;
  for (const HeadRef& h : heads)
    names += (names.empty() ? "L" : ", L") + std::to_string(h.layer) + "." + std::to_string(h.head);
  return names;
}

/// --windows: a whole number of at least 1.
inline CLI::Validator positive_windows() {
  return CLI::Validator(
      [](std::string& input) {
        std::size_t value = 0;
        if (input.empty() || input.find_first_not_of("0123456789") != std::string::npos ||
            !CLI::detail::lexical_cast(input, value))
          return "'" + input + "' is not a number of windows: give a whole number, e.g. 200";
        return value >= 1 ? std::string()
                          : "0 windows would score nothing: give 1 or more, or leave --windows "
                            "out to score every window of the held-out books";
      },
      "at least 1");
}

/// Adds every evaluate option except --impl, which only the workbook command has. --ablate is
/// checked here as text; its heads against the model by the engine.
inline void add_evaluate_options(CLI::App& app, EvaluateOptions& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "A checkpoint folder of lab 13's GPT (`workbook verify 13` writes "
                 "experiments/13-gpt/checkpoint)")
      ->required();
  app.add_option("--ablate", o.ablate,
                 "Heads to switch off together, LAYER.HEAD counted from 0 as `workbook explore` "
                 "names them (L3 H2 is 3.2), separated by commas: e.g. --ablate 3.2,0.2. Each "
                 "head's rows of its layer's attn.w_o are zeroed in memory (never on disk), and "
                 "the loss is printed beside the unablated one")
      ->check(CLI::Validator(
          [](std::string& input) {
            try {
              parse_heads(input);
              return std::string();
            } catch (const std::invalid_argument& e) {
              return std::string(e.what()).substr(std::string("--ablate: ").size());
            }
          },
          "L.H[,L.H...]"));
  app.add_option("--windows", o.windows,
                 "Score only the first N windows of the checkpoint's context length (default: "
                 "every window of the held-out books, about 113k tokens)")
      ->check(positive_windows());
}

/// The engine's command line for these options.
inline std::vector<std::string> evaluate_arguments(const EvaluateOptions& o) {
  std::vector<std::string> args = {"--checkpoint", o.checkpoint.string()};
  if (!o.ablate.empty()) args.insert(args.end(), {"--ablate", o.ablate});
  if (o.windows) args.insert(args.end(), {"--windows", std::to_string(*o.windows)});
  return args;
}

}  // namespace workbench
