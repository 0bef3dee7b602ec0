// Lab 00 reference: a numerically stable softmax and one head of scaled dot-product attention.
#include <cmath>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {

// Block A. scores: (T, S) -> (T, S)
Tensor2 softmax(const Tensor2& scores) {
  // softmax(z) = softmax(z - c) for any constant c per row; c = max keeps every exp() <= 1.
  Tensor2 row_max = xt::amax(scores, {1}, xt::keep_dims);  // (T, 1)
  Tensor2 e = xt::exp(scores - row_max);                   // (T, S), each in (0, 1]
  Tensor2 row_sum = xt::sum(e, {1}, xt::keep_dims);        // (T, 1), each >= 1
  return e / row_sum;
}

// Block B. q: (T, d_head), k: (S, d_head), v: (S, d_v), mask: (T, S) -> output (T, d_v)
AttentionResult single_head_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                                      const std::optional<Tensor2>& mask) {
  if (q.shape(1) != k.shape(1))
    throw std::invalid_argument("single_head_attention: q is " + shape_of(q) + " but k is " +
                                shape_of(k) + "; their widths must match");
  if (k.shape(0) != v.shape(0))
    throw std::invalid_argument("single_head_attention: k is " + shape_of(k) + " but v is " +
                                shape_of(v) + "; they need one row per key");
  const std::size_t T = q.shape(0), S = k.shape(0);
  if (mask && (mask->shape(0) != T || mask->shape(1) != S))
    throw std::invalid_argument("single_head_attention: mask is " + shape_of(*mask) +
                                " but the scores are (" + std::to_string(T) + ", " +
                                std::to_string(S) + ")");

  // 1. Scores: how well each query matches each key, scaled so their variance stays ~1.
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.shape(1)));
  Tensor2 scores = xt::linalg::dot(q, xt::transpose(k)) * scale;  // (T, S)
  // 2. Mask: add 0 to keep a score, a large negative value to remove it.
  if (mask) scores += *mask;
  // 3. Weights: one distribution over the keys per query.
  Tensor2 weights = softmax(scores);  // (T, S)
  // 4. Output: the weighted average of the values.
  Tensor2 output = xt::linalg::dot(weights, v);  // (T, d_v)
  return {std::move(output), std::move(weights)};
}

}  // namespace minimodel
