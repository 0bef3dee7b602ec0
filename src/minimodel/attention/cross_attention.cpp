// Lab 06: cross-attention with key-padding and additive masks, biases, dropout on the attention
// weights and Xavier-uniform initialisation.
// Read labs/06-cross-attention.md first. The API and its shapes are in cross_attention.hpp.
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: the weights ----------------------------------------------------------------------

MultiheadCrossAttention::MultiheadCrossAttention(std::size_t d_model, std::size_t n_heads,
                                                 std::uint64_t seed, bool bias, float dropout) {
  // TODO(lab 06, Block A): check n_heads and dropout, draw W_Q, W_K, W_V, W_O Xavier-uniform from
  // the seeded generator, zero the biases — see labs/06-cross-attention.md
  throw Todo(
      "TODO(lab 06, Block A): check n_heads and dropout, draw W_Q, W_K, W_V, W_O Xavier-uniform "
      "from the seeded generator, zero the biases — see labs/06-cross-attention.md");
}

MultiheadCrossAttention::MultiheadCrossAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                                                 std::optional<Tensor1> b_q,
                                                 std::optional<Tensor1> b_k,
                                                 std::optional<Tensor1> b_v,
                                                 std::optional<Tensor1> b_o, std::size_t n_heads,
                                                 float dropout, std::uint64_t dropout_seed) {
  // TODO(lab 06, Block A): check the weights, biases, n_heads and dropout, then keep them — see
  // labs/06-cross-attention.md
  throw Todo(
      "TODO(lab 06, Block A): check the weights, biases, n_heads and dropout, then keep them — see "
      "labs/06-cross-attention.md");
}

// ---- Block B: the masks ------------------------------------------------------------------------

// (T, S) -> (1, 1, T, S)
Tensor4 as_attn_mask(const Tensor2& mask) {
  // TODO(lab 06, Block B): view the (T, S) mask as (1, 1, T, S) — see labs/06-cross-attention.md
  throw Todo(
      "TODO(lab 06, Block B): view the (T, S) mask as (1, 1, T, S) — see "
      "labs/06-cross-attention.md");
}

// -> (B, T, S): true where key s is removed for query t of sequence b
BoolTensor3 removed_keys(const CrossAttentionOptions& options, std::size_t B, std::size_t T,
                         std::size_t S) {
  // TODO(lab 06, Block B): check the mask shapes, then mark the keys removed by padding or by an
  // attn_mask value <= kMaskedScore — see labs/06-cross-attention.md
  throw Todo(
      "TODO(lab 06, Block B): check the mask shapes, then mark the keys removed by padding or by "
      "an attn_mask value <= kMaskedScore — see labs/06-cross-attention.md");
}

// ---- Block C: forward --------------------------------------------------------------------------

// query: (B, T, d_model), key and value: (B, S, d_model) -> output (B, T, d_model),
// weights (B, H, T, S)
AttentionOutput MultiheadCrossAttention::forward(const Tensor3& query, const Tensor3& key,
                                                 const Tensor3& value,
                                                 const CrossAttentionOptions& options) {
  // TODO(lab 06, Block C): implement forward (check, project with biases, split heads,
  // transform_qk, mask, softmax, zero fully masked rows, dropout, merge, W_O) — see
  // labs/06-cross-attention.md
  throw Todo(
      "TODO(lab 06, Block C): implement forward (check, project with biases, split heads, "
      "transform_qk, mask, softmax, zero fully masked rows, dropout, merge, W_O) — see "
      "labs/06-cross-attention.md");
}

}  // namespace minimodel
