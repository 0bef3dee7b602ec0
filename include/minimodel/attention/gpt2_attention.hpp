#pragma once
// The attention API of lab 03: GPT-2's fused QKV projection. Locked by BLUEPRINT.md beside this
// file ("Lab 03"): the learner's src/ and the reference solutions/ implement these declarations.
//
// GPT-2's names and its Conv1D layout: a weight is (in, out) and applied as y = x @ W + b, the
// same x @ W convention as the rest of the workbook (and the transpose of nn.Linear.weight).
//   c_attn: d_model -> 3 d_model; its output's column blocks are Q | K | V.
//   c_proj: d_model -> d_model, the output projection (lab 01's W_O, plus a bias).
// Shape names: B batch, T tokens, H heads, d_model model width, d_head = d_model / H.
#include <cstddef>
#include <cstdint>

#include "minimodel/attention/attention.hpp"

namespace minimodel {

/// The three roles of a fused projection, each (B, T, d_model).
struct QKV {
  Tensor3 q, k, v;  ///< each (B, T, d_model)
};

/// Block B. fused: (B, T, 3 d_model) -> q, k, v, each (B, T, d_model): the column blocks
/// 0 … d_model-1, d_model … 2 d_model-1 and 2 d_model … 3 d_model-1 of the last axis.
/// @throws std::invalid_argument if the width of fused is not a multiple of 3; the message
///         names fused's shape.
QKV split_qkv(const Tensor3& fused);

/// Causal multi-head self-attention as GPT-2 writes it: one fused projection c_attn for Q, K
/// and V, with biases, and c_proj for the output, both in GPT-2's Conv1D layout (x @ W + b).
class GPT2Attention {
 public:
  /// Block A. GPT-2's initializer_range, 0.02, for both weights (GPT-2 also divides c_proj's
  /// standard deviation by sqrt(2 n_layer); this does not): draws c_attn_weight
  /// (d_model, 3 d_model), then c_proj_weight (d_model, d_model), each row-major element by
  /// element, from std::normal_distribution<float>(0, 1) times 0.02f with one
  /// std::mt19937_64(seed); both biases are zero.
  /// @throws std::invalid_argument if n_heads is 0 or does not divide d_model.
  GPT2Attention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed);

  /// Block A. Uses the given Conv1D weights: c_attn_weight (d_model, 3 d_model),
  /// c_attn_bias (3 d_model), c_proj_weight (d_model, d_model), c_proj_bias (d_model).
  /// @throws std::invalid_argument naming both shapes if c_attn_weight is not (d, 3 d) or another
  ///         tensor does not match it; if n_heads is 0 or does not divide d_model.
  GPT2Attention(Tensor2 c_attn_weight, Tensor1 c_attn_bias, Tensor2 c_proj_weight,
                Tensor1 c_proj_bias, std::size_t n_heads);

  /// Block C. x: (B, T, d_model) -> (B, T, d_model). Causal unless `causal` is false. Keeps the
  /// per-head attention weights (B, H, T, T) of this call.
  /// @throws std::invalid_argument if x is not (·, ·, d_model); the message names x's shape.
  Tensor3 forward(const Tensor3& x, bool causal = true);

  /// Block C. x: (T, d_model) -> (T, d_model): the same as forward on a batch of one; keeps the
  /// weights as (1, H, T, T).
  /// @throws std::invalid_argument if x is not (·, d_model); the message names x's shape.
  Tensor2 forward(const Tensor2& x, bool causal = true);

  /// The attention weights of the last forward call: (B, H, T, T); (1, H, T, T) after a 2-D call.
  const Tensor4& attention_weights() const { return weights_; }

  /// Block D. The number of parameters, counted from the four tensors held:
  /// 4 d_model² + 4 d_model (2,362,368 for d_model = 768).
  std::size_t parameter_count() const;

  const Tensor2& c_attn_weight() const { return c_attn_weight_; }  ///< (d_model, 3 d_model)
  const Tensor1& c_attn_bias() const { return c_attn_bias_; }      ///< (3 d_model)
  const Tensor2& c_proj_weight() const { return c_proj_weight_; }  ///< (d_model, d_model)
  const Tensor1& c_proj_bias() const { return c_proj_bias_; }      ///< (d_model)
  std::size_t n_heads() const { return n_heads_; }
  std::size_t d_model() const { return c_proj_weight_.shape(0); }

 private:
  Tensor2 c_attn_weight_;  // (d_model, 3 d_model), applied as x @ W + b
  Tensor1 c_attn_bias_;    // (3 d_model)
  Tensor2 c_proj_weight_;  // (d_model, d_model)
  Tensor1 c_proj_bias_;    // (d_model)
  std::size_t n_heads_ = 0;
  Tensor4 weights_;  // (B, H, T, T) of the last forward call
};

}  // namespace minimodel
