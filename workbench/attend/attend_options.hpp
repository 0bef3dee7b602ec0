#pragma once
// The options of `workbook attend`, shared by the workbook command (which documents and checks
// them) and the attend-learner / attend-reference engines (which run them).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct AttendOptions {
  std::filesystem::path x, w_q, w_k, w_v, w_o;  // inputs, float32 .npy
  std::size_t heads = 0;
  std::size_t kv_heads = 0;  // 0: one per head; else lab 08's grouped-query layer
  bool causal = false;
  std::filesystem::path b_q, b_k, b_v, b_o;  // optional biases (d), lab 06
  std::filesystem::path kv;                  // optional keys/values source, lab 06
  std::filesystem::path key_padding_mask;    // optional (S) or (B, S) bool, lab 06
  float rope_theta = std::numeric_limits<float>::quiet_NaN();  // NaN: no RoPE, lab 05
  std::filesystem::path positions;      // optional (T) or (B, T) int64, with --rope-theta
  std::string block;                    // "", "post-ln" or "pre-ln", lab 04
  std::filesystem::path out, attn_out;  // outputs; attn_out is optional
  std::size_t threads = 0;              // 0: one per core
};

/// Why `text` is no RoPE base, or "" when it is one: a positive number that float32 holds as a
/// normal number. The workbook command and the engine both check --rope-theta with this, so that a
/// value one of them accepts reaches the other as the same float (1e-50 would arrive as "0"). As
/// float: CLI::PositiveNumber would let "nan" through, and a float32 overflow arrives as "inf".
inline std::string rope_theta_error(const std::string& text) {
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);  // as float, as the option is stored
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) ||
      !(value >= std::numeric_limits<float>::min()))
    return "must be a positive number from 1.2e-38 to 3.4e38 (float32), got " + text;
  return "";
}

/// Adds every attend option except --impl, which only the workbook command has.
inline void add_attend_options(CLI::App& app, AttendOptions& o) {
  app.add_option("--x", o.x, "Tokens X, float32 .npy of shape (T, d) or (B, T, d)")->required();
  app.add_option("--wq", o.w_q, "Query weights W_Q, float32 .npy (d, d), applied as X @ W_Q")
      ->required();
  app.add_option("--wk", o.w_k, "Key weights W_K, float32 .npy (d, d); see --kv-heads")->required();
  app.add_option("--wv", o.w_v, "Value weights W_V, float32 .npy (d, d); see --kv-heads")
      ->required();
  app.add_option("--wo", o.w_o, "Output weights W_O, float32 .npy (d, d)")->required();
  app.add_option("--heads", o.heads, "Number of heads H; must divide d")
      ->required()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--kv-heads", o.kv_heads,
                 "Key/value heads N of grouped-query attention (lab 08): N divides H, and W_K, "
                 "W_V are (d, N * d / H). Runs lab 08's causal decoder layer: needs --causal")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_flag("--causal", o.causal,
               "Apply the causal mask: position i attends to j <= i only (lab 02)");
  app.add_option("--bq", o.b_q, "Query bias, float32 .npy (d), added after X @ W_Q (lab 06)");
  app.add_option("--bk", o.b_k, "Key bias, float32 .npy (d) (lab 06)");
  app.add_option("--bv", o.b_v, "Value bias, float32 .npy (d) (lab 06)");
  app.add_option("--bo", o.b_o, "Output bias, float32 .npy (d) (lab 06)");
  app.add_option(
      "--kv", o.kv,
      "Project keys and values from KV instead of X (cross-attention, lab 06): float32 .npy "
      "(S, d) or (B, S, d), the rank of X; A then has S columns");
  app.add_option(
      "--key-padding-mask", o.key_padding_mask,
      "Keys to ignore (lab 06): numpy bool or uint8 .npy, (S) or (B, S); true = ignored");
  const CLI::Validator positive_float(
      [](std::string& text) -> std::string { return rope_theta_error(text); }, "POSITIVE FLOAT");
  app.add_option("--rope-theta", o.rope_theta,
                 "Rotary position embeddings on Q and K with this base, e.g. 10000 (lab 05)")
      ->check(positive_float);
  app.add_option("--positions", o.positions,
                 "Token positions for --rope-theta: int64 .npy (T), shared by every sequence, or "
                 "(B, T), one row per sequence; default 0 … T-1");
  app.add_option(
         "--block", o.block,
         "Wrap the attention in the residual + LayerNorm block of lab 04: post-ln or pre-ln")
      ->check(CLI::IsMember({"post-ln", "pre-ln"}));
  app.add_option("--out", o.out, "Where to write Y, float32 .npy with X's shape")->required();
  app.add_option("--attn-out", o.attn_out,
                 "Where to write the attention weights, float32 .npy (H, T, S) or (B, H, T, S)");
  app.add_option("--threads", o.threads,
                 "Threads for the attention and for OpenBLAS (default: one per core)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
}

/// Every input file option, flag and path (empty when not given).
inline std::vector<std::pair<const char*, const std::filesystem::path*>> input_paths(
    const AttendOptions& o) {
  return {{"--x", &o.x},
          {"--wq", &o.w_q},
          {"--wk", &o.w_k},
          {"--wv", &o.w_v},
          {"--wo", &o.w_o},
          {"--bq", &o.b_q},
          {"--bk", &o.b_k},
          {"--bv", &o.b_v},
          {"--bo", &o.b_o},
          {"--kv", &o.kv},
          {"--key-padding-mask", &o.key_padding_mask},
          {"--positions", &o.positions}};
}

/// The engine's command line for these options.
inline std::vector<std::string> attend_arguments(const AttendOptions& o) {
  std::vector<std::string> args = {"--heads", std::to_string(o.heads), "--out", o.out.string()};
  if (o.kv_heads > 0) args.insert(args.end(), {"--kv-heads", std::to_string(o.kv_heads)});
  if (o.causal) args.push_back("--causal");
  for (const auto& [flag, path] : input_paths(o))
    if (!path->empty()) args.insert(args.end(), {flag, path->string()});
  if (!o.attn_out.empty()) args.insert(args.end(), {"--attn-out", o.attn_out.string()});
  if (!std::isnan(o.rope_theta)) {
    std::ostringstream theta;
    theta << std::setprecision(9) << o.rope_theta;
    args.insert(args.end(), {"--rope-theta", theta.str()});
  }
  if (!o.block.empty()) args.insert(args.end(), {"--block", o.block});
  if (o.threads > 0) args.insert(args.end(), {"--threads", std::to_string(o.threads)});
  return args;
}

}  // namespace workbench
