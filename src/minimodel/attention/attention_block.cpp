// Lab 04: the attention block, a residual connection and a LayerNorm around an attention sublayer.
// Read labs/04-attention-block.md first. The API and its shapes are in attention_block.hpp.
#include <cmath>
#include <stdexcept>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention_block.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: LayerNorm ------------------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model), every row (x - mean) / sqrt(var + eps)
Tensor3 layer_norm(const Tensor3& x, float eps) {
  // TODO(lab 04, Block A): implement layer_norm over the last axis (mean, biased variance, eps) —
  // see labs/04-attention-block.md
  throw Todo(
      "TODO(lab 04, Block A): implement layer_norm over the last axis (mean, biased variance, eps) "
      "— see labs/04-attention-block.md");
}

// ---- Block B: the residual block ---------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); sublayer keeps the shape
Tensor3 attention_block(const Tensor3& x, Norm norm,
                        const std::function<Tensor3(const Tensor3&)>& sublayer) {
  // TODO(lab 04, Block B): implement attention_block, post-LN and pre-LN around the sublayer — see
  // labs/04-attention-block.md
  throw Todo(
      "TODO(lab 04, Block B): implement attention_block, post-LN and pre-LN around the sublayer — "
      "see labs/04-attention-block.md");
}

// ---- Block C: the block with multi-head attention ----------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); weights (d_model, d_model); mask (T, T)
Tensor3 mha_block(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k, const Tensor2& w_v,
                  const Tensor2& w_o, std::size_t n_heads, Norm norm,
                  const std::optional<Tensor2>& mask) {
  // TODO(lab 04, Block C): implement mha_block, attention_block around lab 01's MultiHeadAttention
  // — see labs/04-attention-block.md
  throw Todo(
      "TODO(lab 04, Block C): implement mha_block, attention_block around lab 01's "
      "MultiHeadAttention — see labs/04-attention-block.md");
}

}  // namespace minimodel
