#pragma once
// The API of lab 05: rotary position embeddings (RoPE) and causal self-attention with RoPE on the
// queries and keys. Locked by the "Lab 05" section of BLUEPRINT.md beside this file.
//
// Shape names: B batch, T query length, H heads, d_model model width, d_head = d_model / H.
// Pairs are interleaved: features (2k, 2k + 1) of a head are rotated together, as in RoFormer and
// Meta's LLaMA reference code (not GPT-NeoX's "rotate-half" pairs (k, k + d_head / 2)).
#include <cstddef>
#include <cstdint>

#include <xtensor/xtensor.hpp>

#include "minimodel/attention/attention.hpp"

namespace minimodel {

using Positions = xt::xtensor<std::int64_t, 1>;       ///< token positions, 0-indexed
using BatchPositions = xt::xtensor<std::int64_t, 2>;  ///< (B, T): each sequence's own positions

// ---- Lab 05: rotary position embeddings ---------------------------------------------------------

/// Rotates each pair (2k, 2k + 1) of a head's features by the angle
/// angle(pos, k) = pos · theta^(−2k / d_head), k = 0 … d_head / 2 − 1.
class RotaryPositionalEmbedding {
 public:
  /// Block A. Precomputes the cos and sin tables, each (max_seq_len, d_head / 2), of
  /// angle(pos, k) for pos = 0 … max_seq_len − 1; the angles are computed in double, the tables
  /// stored as float.
  /// @throws std::invalid_argument if d_head is 0 or odd, theta <= 0 (or not finite), or
  ///         max_seq_len is 0 or so large that the tables' byte count overflows std::size_t;
  ///         the message names the value.
  RotaryPositionalEmbedding(float theta, std::size_t d_head, std::size_t max_seq_len);

  /// Block B. x: (T, d_head), positions: (T) -> (T, d_head). Row t's pair (2k, 2k + 1) becomes
  /// (x₀ cos − x₁ sin, x₀ sin + x₁ cos) with the angle(positions[t], k) of the tables.
  /// @throws std::invalid_argument if x is not (T, d_head) with T = positions.size(), or a
  ///         position is negative or >= max_seq_len (the message names it and max_seq_len).
  Tensor2 apply(const Tensor2& x, const Positions& positions) const;

  /// Block B. x: (B, H, T, d_head), positions: (T) -> (B, H, T, d_head): every batch element and
  /// head is rotated at the same positions.
  /// @throws std::invalid_argument as the 2-D overload, naming x's 4-D shape.
  Tensor4 apply(const Tensor4& x, const Positions& positions) const;

  /// Lab 08, Block B (defined in kv_cache.cpp: lab 08 is the first to need it). x: (B, H, T,
  /// d_head), positions: (B, T) -> (B, H, T, d_head): sequence b is rotated at row b of
  /// positions, so that one batch can hold sequences at different offsets.
  /// @throws std::invalid_argument if positions is not (B, T) for x's B and T, or as the 2-D
  ///         overload; the message names both shapes.
  Tensor4 apply(const Tensor4& x, const BatchPositions& positions) const;

  /// cos(angle(pos, k)): (max_seq_len, d_head / 2).
  const Tensor2& cos_table() const { return cos_; }
  /// sin(angle(pos, k)): (max_seq_len, d_head / 2).
  const Tensor2& sin_table() const { return sin_; }

  float theta() const { return theta_; }
  std::size_t d_head() const { return d_head_; }
  std::size_t max_seq_len() const { return max_seq_len_; }

 private:
  float theta_ = 0.0f;
  std::size_t d_head_ = 0;
  std::size_t max_seq_len_ = 0;
  Tensor2 cos_, sin_;  // (max_seq_len, d_head / 2)
};

/// What the multi-head functions of labs 05+ return.
struct MultiHeadResult {
  Tensor3 output;   ///< (B, T, d_model)
  Tensor4 weights;  ///< (B, H, T, T), every row sums to 1, zero above the diagonal
};

/// Block C. Causal self-attention with RoPE on Q and K (never V).
/// x: (B, T, d_model); w_q, w_k, w_v, w_o: (d_model, d_model), applied as x @ W; positions: (T).
/// Projects, splits heads (lab 01), rotates q and k with rope.apply, runs lab 00's
/// single_head_attention per head with lab 02's causal_mask(T), merges heads, applies W_O.
/// -> output (B, T, d_model), weights (B, H, T, T).
/// @throws std::invalid_argument if a weight is not (d_model, d_model) with d_model = x.shape(2),
///         n_heads is 0 or does not divide d_model, rope.d_head() is not d_model / n_heads, or
///         positions is not (T); from rope.apply for a position outside [0, max_seq_len).
MultiHeadResult rope_self_attention(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k,
                                    const Tensor2& w_v, const Tensor2& w_o, std::size_t n_heads,
                                    const RotaryPositionalEmbedding& rope,
                                    const Positions& positions);

}  // namespace minimodel
