// Lab 00: a numerically stable softmax and one head of scaled dot-product attention.
// Read labs/00-attention-by-hand.md first. The API and its shapes are in attention.hpp.
#include <cmath>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// Block A. scores: (T, S) -> (T, S)
Tensor2 softmax(const Tensor2& scores) {
  // TODO(lab 00, Block A): implement a numerically stable softmax over each row — see
  // labs/00-attention-by-hand.md
  throw Todo(
      "TODO(lab 00, Block A): implement a numerically stable softmax over each row — see "
      "labs/00-attention-by-hand.md");
}

// Block B. q: (T, d_head), k: (S, d_head), v: (S, d_v), mask: (T, S) -> output (T, d_v)
AttentionResult single_head_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                                      const std::optional<Tensor2>& mask) {
  // TODO(lab 00, Block B): implement single_head_attention (check shapes, scores, scale, mask,
  // softmax, weighted sum) — see labs/00-attention-by-hand.md
  throw Todo(
      "TODO(lab 00, Block B): implement single_head_attention (check shapes, scores, scale, mask, "
      "softmax, weighted sum) — see labs/00-attention-by-hand.md");
}

}  // namespace minimodel
