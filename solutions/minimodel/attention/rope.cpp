// Lab 05 reference: rotary position embeddings (RoPE) and causal self-attention with RoPE.
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

// x is given as its shape string, so the 4-D overload reports the caller's 4-D x.
void check_apply_inputs(const std::string& x_shape, std::size_t T, std::size_t width,
                        std::size_t d_head, std::size_t max_seq_len, const Positions& positions) {
  const std::string where = "RotaryPositionalEmbedding::apply: ";
  if (width != d_head)
    throw std::invalid_argument(where + "x is " + x_shape + " but d_head is " +
                                std::to_string(d_head));
  if (positions.size() != T)
    throw std::invalid_argument(
        where + "x is " + x_shape + " but positions is " + shape_of(positions) +
        "; there must be one position per token (T = " + std::to_string(T) + ")");
  for (std::size_t t = 0; t < T; ++t) {
    const std::int64_t p = positions(t);
    if (p < 0 || static_cast<std::uint64_t>(p) >= max_seq_len)
      throw std::invalid_argument(
          where + "positions[" + std::to_string(t) + "] is " + std::to_string(p) +
          " but must be in [0, max_seq_len) with max_seq_len " + std::to_string(max_seq_len));
  }
}

}  // namespace

// ---- Block A: the frequency tables --------------------------------------------------------------

// -> cos_, sin_: (max_seq_len, d_head / 2)
RotaryPositionalEmbedding::RotaryPositionalEmbedding(float theta, std::size_t d_head,
                                                     std::size_t max_seq_len)
    : theta_(theta), d_head_(d_head), max_seq_len_(max_seq_len) {
  if (d_head == 0 || d_head % 2 != 0)
    throw std::invalid_argument("RotaryPositionalEmbedding: d_head " + std::to_string(d_head) +
                                " must be even and at least 2: features are rotated in pairs");
  if (!(theta > 0.0f) || !std::isfinite(theta)) {
    std::ostringstream value;
    value << theta;
    throw std::invalid_argument("RotaryPositionalEmbedding: theta " + value.str() +
                                " must be a positive, finite number");
  }
  if (max_seq_len == 0)
    throw std::invalid_argument("RotaryPositionalEmbedding: max_seq_len must be at least 1");
  const std::size_t half = d_head / 2;
  // max_seq_len · half floats must not overflow std::size_t: a wrapped count allocates a small
  // table, and the loop below would write far past it.
  if (max_seq_len > std::numeric_limits<std::size_t>::max() / (half * sizeof(float)))
    throw std::invalid_argument("RotaryPositionalEmbedding: max_seq_len " +
                                std::to_string(max_seq_len) + " with d_head " +
                                std::to_string(d_head) + " makes tables too large to allocate");

  cos_ = Tensor2({max_seq_len, half});
  sin_ = Tensor2({max_seq_len, half});
  for (std::size_t k = 0; k < half; ++k) {
    // 1. The frequency ladder: pair 0 turns 1 radian per position, the last pair almost not at all.
    const double frequency =
        std::pow(static_cast<double>(theta), -2.0 * double(k) / double(d_head));
    for (std::size_t pos = 0; pos < max_seq_len; ++pos) {
      // 2. In double, rounded once at the end: a float angle near 63 rad is already uncertain by
      //    half an ulp, 1.9e-6, and cos and sin would pass that on.
      const double angle = double(pos) * frequency;
      cos_(pos, k) = static_cast<float>(std::cos(angle));
      sin_(pos, k) = static_cast<float>(std::sin(angle));
    }
  }
}

// ---- Block B: rotate ----------------------------------------------------------------------------
// x: (T, d_head), positions: (T) -> (T, d_head)
Tensor2 RotaryPositionalEmbedding::apply(const Tensor2& x, const Positions& positions) const {
  check_apply_inputs(shape_of(x), x.shape(0), x.shape(1), d_head_, max_seq_len_, positions);
  Tensor2 rotated(x.shape());
  for (std::size_t t = 0; t < x.shape(0); ++t) {
    const auto p = static_cast<std::size_t>(positions(t));  // a row of the tables, not t itself
    for (std::size_t k = 0; k < d_head_ / 2; ++k) {
      // Interleaved pairs (2k, 2k + 1): a 2-D rotation by angle(p, k).
      const float c = cos_(p, k), s = sin_(p, k);
      const float x0 = x(t, 2 * k), x1 = x(t, 2 * k + 1);
      rotated(t, 2 * k) = x0 * c - x1 * s;
      rotated(t, 2 * k + 1) = x0 * s + x1 * c;
    }
  }
  return rotated;
}

// x: (B, H, T, d_head), positions: (T) -> (B, H, T, d_head)
Tensor4 RotaryPositionalEmbedding::apply(const Tensor4& x, const Positions& positions) const {
  check_apply_inputs(shape_of(x), x.shape(2), x.shape(3), d_head_, max_seq_len_, positions);
  Tensor4 rotated(x.shape());
  // Every sequence and head sees the same positions, so each (b, h) slice is the 2-D case.
  for (std::size_t b = 0; b < x.shape(0); ++b)
    for (std::size_t h = 0; h < x.shape(1); ++h)
      xt::view(rotated, b, h) = apply(Tensor2(xt::view(x, b, h)), positions);
  return rotated;
}

// ---- Block C: causal self-attention with RoPE ---------------------------------------------------
// x: (B, T, d_model) -> output (B, T, d_model), weights (B, H, T, T)
MultiHeadResult rope_self_attention(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k,
                                    const Tensor2& w_v, const Tensor2& w_o, std::size_t n_heads,
                                    const RotaryPositionalEmbedding& rope,
                                    const Positions& positions) {
  const std::string where = "rope_self_attention: ";
  const std::size_t B = x.shape(0), T = x.shape(1), d_model = x.shape(2);
  for (const auto& [name, w] :
       {std::pair{"w_q", &w_q}, {"w_k", &w_k}, {"w_v", &w_v}, {"w_o", &w_o}})
    if (w->shape(0) != d_model || w->shape(1) != d_model)
      throw std::invalid_argument(where + "x is " + shape_of(x) + " but " + name + " is " +
                                  shape_of(*w) + "; every weight must be (d_model, d_model) = (" +
                                  std::to_string(d_model) + ", " + std::to_string(d_model) + ")");
  if (n_heads == 0) throw std::invalid_argument(where + "n_heads must be at least 1");
  if (d_model % n_heads != 0)
    throw std::invalid_argument(where + "d_model " + std::to_string(d_model) +
                                " is not divisible by n_heads " + std::to_string(n_heads));
  const std::size_t d_head = d_model / n_heads;
  if (rope.d_head() != d_head)
    throw std::invalid_argument(where + "rope.d_head() is " + std::to_string(rope.d_head()) +
                                " but d_model / n_heads is " + std::to_string(d_model) + " / " +
                                std::to_string(n_heads) + " = " + std::to_string(d_head));
  if (positions.size() != T)
    throw std::invalid_argument(
        where + "x is " + shape_of(x) + " but positions is " + shape_of(positions) +
        "; there must be one position per token (T = " + std::to_string(T) + ")");

  // 1. Project and split heads, as in lab 01.
  Tensor4 q = split_heads(project(x, w_q), n_heads);  // (B, H, T, d_head)
  Tensor4 k = split_heads(project(x, w_k), n_heads);  // (B, H, T, d_head)
  Tensor4 v = split_heads(project(x, w_v), n_heads);  // (B, H, T, d_head)

  // 2. Rotate queries and keys only: position should change *where* a token looks, not *what* it
  //    brings, so V stays as it is.
  q = rope.apply(q, positions);  // (B, H, T, d_head)
  k = rope.apply(k, positions);  // (B, H, T, d_head)

  // 3. Causal attention per head: lab 00's single_head_attention with lab 02's mask.
  const Tensor2 mask = causal_mask(T);  // (T, T)
  Tensor4 context({B, n_heads, T, d_head});
  MultiHeadResult result;
  result.weights = Tensor4({B, n_heads, T, T});
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < n_heads; ++h) {
      AttentionResult head =
          single_head_attention(xt::view(q, b, h), xt::view(k, b, h), xt::view(v, b, h), mask);
      xt::view(context, b, h) = head.output;          // (T, d_head)
      xt::view(result.weights, b, h) = head.weights;  // (T, T)
    }
  }

  // 4. Merge heads and 5. mix them with W_O.
  result.output = project(merge_heads(context), w_o);  // (B, T, d_model)
  return result;
}

}  // namespace minimodel
