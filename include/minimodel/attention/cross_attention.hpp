#pragma once
// The cross-attention API of lab 06: the torch-like module. Locked by BLUEPRINT.md beside this
// file ("Lab 06"): the learner's src/ and the reference solutions/ implement these declarations.
//
// Shape names: B batch, T query length, S key / value length, H heads, d_model model width,
// d_head = d_model / H. Projections are applied as x @ W (+ b). Every tensor is float32; masks of
// keys are bool.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>

#include <xtensor/xtensor.hpp>

#include "minimodel/attention/attention.hpp"

namespace minimodel {

using BoolTensor2 = xt::xtensor<bool, 2>;
using BoolTensor3 = xt::xtensor<bool, 3>;

/// What MultiheadCrossAttention::forward returns. `weights` is empty unless need_weights.
struct AttentionOutput {
  Tensor3 output;                  ///< (B, T, d_model)
  std::optional<Tensor4> weights;  ///< (B, H, T, S), per head, after dropout (as torch does)
};

/// Everything optional that MultiheadCrossAttention::forward takes.
struct CrossAttentionOptions {
  /// (B, S); true = ignore that key, as in PyTorch. Shared by every head and query.
  std::optional<BoolTensor2> key_padding_mask;
  /// Additive, broadcastable: (B or 1, 1, T, S). A value at or below kMaskedScore (including
  /// -inf) removes the key; any other value is added to the scaled score. A (T, S) mask is
  /// as_attn_mask(mask).
  std::optional<Tensor4> attn_mask;
  /// Whether forward returns the attention weights.
  bool need_weights = true;
  /// Applied to the per-head queries (B, H, T, d_head) and keys (B, H, S, d_head) after
  /// projection and biases, before the scores (so a rotated b_k no longer cancels). Empty: none.
  /// This is how a position scheme such as lab 05's RoPE plugs in without this lab depending on
  /// it. It must not change the shapes.
  std::function<void(Tensor4& q, Tensor4& k)> transform_qk;
};

/// Block B. (T, S) -> (1, 1, T, S): a mask shared by every batch element and head. Never throws.
Tensor4 as_attn_mask(const Tensor2& mask);

/// Block B. Which keys each query may not see, read from the masks alone (never from scores):
/// -> (B, T, S), true where key s is removed for query t of sequence b, because
/// key_padding_mask[b, s] is true or attn_mask[b or 0, 0, t, s] <= kMaskedScore (including -inf).
/// All false without masks. A row that is true everywhere is a fully masked query.
/// @throws std::invalid_argument if the key_padding_mask is not (B, S) or the attn_mask is not
///         (B or 1, 1, T, S); the message names the mask's shape and the one it must have.
BoolTensor3 removed_keys(const CrossAttentionOptions& options, std::size_t B, std::size_t T,
                         std::size_t S);

/// Multi-head attention with separate query, key and value inputs (T queries, S keys), optional
/// biases, key-padding and additive masks, and dropout on the attention weights: the workbook's
/// twin of torch.nn.MultiheadAttention(d_model, H, bias, batch_first=True). Its weights are per
/// head, (B, H, T, S), as torch returns them with average_attn_weights=False; torch's default
/// (true) averages them over the heads to (B, T, S).
///
/// A query whose keys are all removed gets zero weights and a zero context vector, so its output
/// is b_o. torch 1.13's nn.MultiheadAttention returns NaN there; F.scaled_dot_product_attention
/// returns zeros from torch 2.5 on.
class MultiheadCrossAttention {
 public:
  /// Block A. Xavier-uniform: W_Q, W_K, W_V, W_O, each (d_model, d_model), drawn in that order,
  /// row-major, from std::uniform_real_distribution<float>(-a, a) with
  /// a = std::sqrt(6.0f / float(d_model + d_model)), all from one std::mt19937_64(seed), which then
  /// goes on to drive dropout. Zero biases (d_model) if `bias`, none otherwise. Starts in
  /// evaluation mode.
  /// @throws std::invalid_argument if n_heads is 0 or does not divide d_model, or dropout is not
  ///         in [0, 1).
  MultiheadCrossAttention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed,
                          bool bias = true, float dropout = 0.0f);

  /// Block A. The given weights, (d_model, d_model) each, applied as x @ W, and optional biases,
  /// (d_model) each, added after each projection. Dropout draws from std::mt19937_64(dropout_seed).
  /// @throws std::invalid_argument if w_q is not square, another weight differs from it in shape,
  ///         a bias is not (d_model), n_heads is 0 or does not divide d_model, or dropout is not
  ///         in [0, 1); the message names the shapes.
  MultiheadCrossAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                          std::optional<Tensor1> b_q, std::optional<Tensor1> b_k,
                          std::optional<Tensor1> b_v, std::optional<Tensor1> b_o,
                          std::size_t n_heads, float dropout = 0.0f,
                          std::uint64_t dropout_seed = 0);

  /// Block C (calls Block B's removed_keys): project, attend, dropout, weights.
  /// query (B, T, d_model), key (B, S, d_model), value (B, S, d_model) -> output (B, T, d_model)
  /// and, if options.need_weights, weights (B, H, T, S).
  /// @throws std::invalid_argument if an input is not (·, ·, d_model), the batch sizes differ, key
  ///         and value differ in length, the key_padding_mask is not (B, S), the attn_mask is not
  ///         (B or 1, 1, T, S), or transform_qk changes a shape; the message names both shapes.
  AttentionOutput forward(const Tensor3& query, const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& options = {});

  /// Dropout on the attention weights is active only in training mode; it is seeded, so
  /// reproducible. Never throws.
  void train(bool training = true) { training_ = training; }
  bool training() const { return training_; }

  std::size_t d_model() const { return w_q_.shape(0); }
  std::size_t n_heads() const { return n_heads_; }
  std::size_t d_head() const { return d_model() / n_heads_; }
  float dropout() const { return dropout_; }
  const Tensor2& w_q() const { return w_q_; }
  const Tensor2& w_k() const { return w_k_; }
  const Tensor2& w_v() const { return w_v_; }
  const Tensor2& w_o() const { return w_o_; }
  const std::optional<Tensor1>& b_q() const { return b_q_; }
  const std::optional<Tensor1>& b_k() const { return b_k_; }
  const std::optional<Tensor1>& b_v() const { return b_v_; }
  const std::optional<Tensor1>& b_o() const { return b_o_; }

 private:
  Tensor2 w_q_, w_k_, w_v_, w_o_;                 // (d_model, d_model), applied as x @ W
  std::optional<Tensor1> b_q_, b_k_, b_v_, b_o_;  // (d_model), added after each projection
  std::size_t n_heads_ = 0;
  float dropout_ = 0.0f;       // probability that a weight is zeroed in training mode
  bool training_ = false;      // starts in evaluation mode
  std::mt19937_64 generator_;  // drives dropout; advances with every training-mode forward
};

/// Lab 01's project with a bias the layer may not have (bias=False leaves them empty): given, not
/// a TODO. x (B, N, d_in) @ w (d_in, d_out) [+ b (d_out)] -> (B, N, d_out).
inline Tensor3 project(const Tensor3& x, const Tensor2& w, const std::optional<Tensor1>& b) {
  return b ? project(x, w, *b) : project(x, w);
}

namespace detail {

/// Not part of lab 06's API, and a learner's lab 06 need not define it: the reference's checks of
/// forward's inputs (widths, batch sizes, key and value lengths, the masks' shapes), with the
/// messages of forward's @throws above under the name `where`. Lab 07's reference and its tuned
/// twin (workbench/fast_attention) call it, so that their efficient_forward rejects what forward
/// rejects with the same words.
void check_cross_attention_inputs(const char* where, const Tensor3& query, const Tensor3& key,
                                  const Tensor3& value, std::size_t d_model,
                                  const CrossAttentionOptions& options);

/// Not part of lab 06's API either: options.transform_qk applied to the split heads q (B, H, T,
/// d_head) and k (B, H, S, d_head), and forward's error under the name `where` if it changed a
/// shape. Shared, as the checks above, by lab 06's reference and lab 07's two.
void apply_transform_qk(const char* where, const CrossAttentionOptions& options, Tensor4& q,
                        Tensor4& k);

}  // namespace detail

}  // namespace minimodel
