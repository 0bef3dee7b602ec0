#pragma once
// The attention API of labs 00–02. Locked by BLUEPRINT.md beside this file: the learner's
// src/ and the reference solutions/ implement exactly these declarations.
//
// Shape names: B batch, T query length, S key length, H heads, d_model model width,
// d_head = d_model / H. Projections are applied as x @ W. Every tensor is float32.
#include <cstddef>
#include <cstdint>
#include <optional>

#include <xtensor/xtensor.hpp>

namespace minimodel {

using Tensor1 = xt::xtensor<float, 1>;
using Tensor2 = xt::xtensor<float, 2>;
using Tensor3 = xt::xtensor<float, 3>;
using Tensor4 = xt::xtensor<float, 4>;

// ---- Lab 00: attention by hand ----------------------------------------------------------------

/// Numerically stable softmax over the last axis: each row of (T, S) becomes a distribution.
/// Subtracts the row maximum before exp so that large logits cannot overflow.
Tensor2 softmax(const Tensor2& scores);

/// What single_head_attention returns: the output and the weights that produced it.
struct AttentionResult {
  Tensor2 output;   ///< (T, d_v)
  Tensor2 weights;  ///< (T, S), every row sums to 1
};

/// softmax(Q Kᵀ / sqrt(d_head) + mask) V for one head.
/// @param q (T, d_head)   @param k (S, d_head)   @param v (S, d_v)
/// @param mask optional additive mask (T, S): 0 keeps a score, a large negative value removes it.
/// @throws std::invalid_argument if q and k differ in width, k and v in length, or the mask is
///         not (T, S); the message names both shapes.
AttentionResult single_head_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                                      const std::optional<Tensor2>& mask = std::nullopt);

// ---- Lab 01: multi-head attention --------------------------------------------------------------

/// x @ w for every token: (B, T, d_in) @ (d_in, d_out) -> (B, T, d_out). One GEMM over all B·T
/// tokens; a single token (B·T = 1) is one GEMV, which reads W once where a one-row GEMM would
/// first copy all of W into BLAS's packed layout. Labs 05, 06 and 08 project with it too.
/// @throws std::invalid_argument if x's width d_in is not w's row count; the message names both
///         shapes.
Tensor3 project(const Tensor3& x, const Tensor2& w);

/// x @ w + bias: the same, then bias (d_out) added to every token.
/// @throws std::invalid_argument as above, or if bias is not (d_out); the message names both
///         shapes.
Tensor3 project(const Tensor3& x, const Tensor2& w, const Tensor1& bias);

/// (B, T, d_model) -> (B, H, T, d_head): column block h of the last axis becomes head h.
/// @throws std::invalid_argument if d_model is not divisible by n_heads.
Tensor4 split_heads(const Tensor3& x, std::size_t n_heads);

/// (B, H, T, d_head) -> (B, T, H * d_head): the inverse of split_heads.
Tensor3 merge_heads(const Tensor4& heads);

/// Multi-head self-attention with one big projection matrix per role (W_Q, W_K, W_V, W_O, each
/// d_model × d_model), split into H heads at runtime.
class MultiHeadAttention {
 public:
  /// Draws W_Q, W_K, W_V, W_O from a standard normal with std::mt19937_64(seed), in that order,
  /// each scaled by 1/sqrt(d_model).
  /// @throws std::invalid_argument if n_heads is 0 or does not divide d_model.
  MultiHeadAttention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed);

  /// Uses the given weights, each (d_model, d_model).
  /// @throws std::invalid_argument if a weight is not square, the four differ in shape, or
  ///         n_heads is 0 or does not divide d_model.
  MultiHeadAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o, std::size_t n_heads);

  /// x: (B, T, d_model) -> (B, T, d_model). The optional additive mask (T, T) is shared by every
  /// batch element and head. Keeps the per-head attention weights (B, H, T, T) of this call.
  /// @throws std::invalid_argument if x is not (·, ·, d_model) or the mask is not (T, T).
  Tensor3 forward(const Tensor3& x, const std::optional<Tensor2>& mask = std::nullopt);

  /// x: (T, d_model) -> (T, d_model); the same as forward on a batch of one.
  Tensor2 forward(const Tensor2& x, const std::optional<Tensor2>& mask = std::nullopt);

  /// The attention weights of the last forward call: (B, H, T, T); (1, H, T, T) after a 2-D call.
  const Tensor4& attention_weights() const { return weights_; }

  std::size_t d_model() const { return w_q_.shape(0); }
  std::size_t n_heads() const { return n_heads_; }
  std::size_t d_head() const { return d_model() / n_heads_; }
  const Tensor2& w_q() const { return w_q_; }
  const Tensor2& w_k() const { return w_k_; }
  const Tensor2& w_v() const { return w_v_; }
  const Tensor2& w_o() const { return w_o_; }

 private:
  Tensor2 w_q_, w_k_, w_v_, w_o_;  // (d_model, d_model), applied as x @ W
  std::size_t n_heads_ = 0;
  Tensor4 weights_;  // (B, H, T, T) of the last forward call
};

// ---- Lab 02: causal mask -----------------------------------------------------------------------

/// The additive value that removes a score. Finite, so a fully masked row never becomes NaN.
inline constexpr float kMaskedScore = -1e9f;

/// (T, T) additive mask: 0 on and below the diagonal (position i may attend to j <= i) and
/// kMaskedScore above it.
Tensor2 causal_mask(std::size_t T);

}  // namespace minimodel
