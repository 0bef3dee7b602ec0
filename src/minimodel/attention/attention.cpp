// Lab 01: multi-head attention with one big projection matrix per role.
// Read labs/01-multi-head-attention.md first. The API and its shapes are in attention.hpp.
#include <cmath>
#include <random>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: the weights ----------------------------------------------------------------------

MultiHeadAttention::MultiHeadAttention(std::size_t d_model, std::size_t n_heads,
                                       std::uint64_t seed) {
  // TODO(lab 01, Block A): check that n_heads divides d_model, then draw W_Q, W_K, W_V, W_O from
  // the seeded generator — see labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block A): check that n_heads divides d_model, then draw W_Q, W_K, W_V, W_O "
      "from the "
      "seeded generator — see labs/01-multi-head-attention.md");
}

MultiHeadAttention::MultiHeadAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                                       std::size_t n_heads) {
  // TODO(lab 01, Block A): check the four weights and n_heads, then keep them — see
  // labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block A): check the four weights and n_heads, then keep them — see "
      "labs/01-multi-head-attention.md");
}

// ---- Block B: split and merge heads ------------------------------------------------------------

// x: (B, T, d_model) -> (B, H, T, d_head)
Tensor4 split_heads(const Tensor3& x, std::size_t n_heads) {
  // TODO(lab 01, Block B): implement split_heads by reshaping, then transposing — see
  // labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block B): implement split_heads by reshaping, then transposing — see "
      "labs/01-multi-head-attention.md");
}

// heads: (B, H, T, d_head) -> (B, T, H * d_head)
Tensor3 merge_heads(const Tensor4& heads) {
  // TODO(lab 01, Block B): implement merge_heads, the inverse of split_heads — see
  // labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block B): implement merge_heads, the inverse of split_heads — see "
      "labs/01-multi-head-attention.md");
}

// ---- Block C: project and forward --------------------------------------------------------------

// x: (B, T, d_in) @ w: (d_in, d_out) -> (B, T, d_out)
Tensor3 project(const Tensor3& x, const Tensor2& w) {
  // TODO(lab 01, Block C): implement project (check the shapes, one GEMM over all B*T tokens, a
  // GEMV for a single token) — see labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block C): implement project (check the shapes, one GEMM over all B*T tokens, "
      "a GEMV for a single token) — see labs/01-multi-head-attention.md");
}

// x: (B, T, d_in) @ w: (d_in, d_out) + bias: (d_out) -> (B, T, d_out)
Tensor3 project(const Tensor3& x, const Tensor2& w, const Tensor1& bias) {
  // TODO(lab 01, Block C): implement project with a bias (check its shape, project, add it to
  // every token) — see labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block C): implement project with a bias (check its shape, project, add it to "
      "every token) — see labs/01-multi-head-attention.md");
}

// x: (B, T, d_model) -> (B, T, d_model); weights_: (B, H, T, T)
Tensor3 MultiHeadAttention::forward(const Tensor3& x, const std::optional<Tensor2>& mask) {
  // TODO(lab 01, Block C): implement MultiHeadAttention::forward (project, split heads, attend per
  // head, merge, W_O) — see labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block C): implement MultiHeadAttention::forward (project, split heads, attend "
      "per head, merge, W_O) — see labs/01-multi-head-attention.md");
}

// x: (T, d_model) -> (T, d_model); weights_: (1, H, T, T)
Tensor2 MultiHeadAttention::forward(const Tensor2& x, const std::optional<Tensor2>& mask) {
  // TODO(lab 01, Block C): implement the 2-D forward as a batch of one — see
  // labs/01-multi-head-attention.md
  throw Todo(
      "TODO(lab 01, Block C): implement the 2-D forward as a batch of one — see "
      "labs/01-multi-head-attention.md");
}

}  // namespace minimodel
