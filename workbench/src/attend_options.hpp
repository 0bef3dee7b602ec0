#pragma once
// The options of `workbook attend`, shared by the workbook command (which documents and checks
// them) and the attend-learner / attend-reference engines (which run them).
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace workbench {

struct AttendOptions {
  std::filesystem::path x, w_q, w_k, w_v, w_o;  // inputs, float32 .npy
  std::size_t heads = 0;
  bool causal = false;
  std::filesystem::path out, attn_out;  // outputs; attn_out is optional
};

/// Adds every attend option except --impl, which only the workbook command has.
inline void add_attend_options(CLI::App& app, AttendOptions& o) {
  app.add_option("--x", o.x, "Tokens X, float32 .npy of shape (T, d) or (B, T, d)")->required();
  app.add_option("--wq", o.w_q, "Query weights W_Q, float32 .npy (d, d), applied as X @ W_Q")->required();
  app.add_option("--wk", o.w_k, "Key weights W_K, float32 .npy (d, d)")->required();
  app.add_option("--wv", o.w_v, "Value weights W_V, float32 .npy (d, d)")->required();
  app.add_option("--wo", o.w_o, "Output weights W_O, float32 .npy (d, d)")->required();
  app.add_option("--heads", o.heads, "Number of heads H; must divide d")->required()->check(CLI::PositiveNumber);
  app.add_flag("--causal", o.causal, "Apply the causal mask: position i attends to j <= i only");
  app.add_option("--out", o.out, "Where to write Y, float32 .npy with X's shape")->required();
  app.add_option("--attn-out", o.attn_out,
                 "Where to write the attention weights, float32 .npy (H, T, T) or (B, H, T, T)");
}

/// The engine's command line for these options.
inline std::vector<std::string> attend_arguments(const AttendOptions& o) {
  std::vector<std::string> args = {"--x",  o.x.string(),  "--wq", o.w_q.string(), "--wk",
                                   o.w_k.string(), "--wv", o.w_v.string(), "--wo", o.w_o.string(),
                                   "--heads", std::to_string(o.heads), "--out", o.out.string()};
  if (o.causal) args.push_back("--causal");
  if (!o.attn_out.empty()) args.insert(args.end(), {"--attn-out", o.attn_out.string()});
  return args;
}

}  // namespace workbench
