// Lab 07: efficient attention: an online softmax, a tiled single-head kernel and multi-head
// attention that stores no weights.
// Read labs/07-efficient-attention.md first. The API and its shapes are in
// efficient_attention.hpp.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: online softmax --------------------------------------------------------------------

float RunningSoftmax::add(float score) {
  // TODO(lab 07, Block A): take one score into the running max and sum, return the rescale
  // factor — see labs/07-efficient-attention.md
  throw Todo(
      "TODO(lab 07, Block A): take one score into the running max and sum, return the rescale "
      "factor — see labs/07-efficient-attention.md");
}

// (T, S) -> (T, S)
Tensor2 online_softmax(const Tensor2& scores) {
  // TODO(lab 07, Block A): one RunningSoftmax pass per row, then normalise — see
  // labs/07-efficient-attention.md
  throw Todo(
      "TODO(lab 07, Block A): one RunningSoftmax pass per row, then normalise — see "
      "labs/07-efficient-attention.md");
}

// ---- Block B: the tiled kernel -----------------------------------------------------------------

// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void tiled_attention(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                     const TiledOptions& options) {
  // TODO(lab 07, Block B): check the views, then per query block and key block: scores, masks,
  // online softmax, accumulate; normalise — see labs/07-efficient-attention.md
  throw Todo(
      "TODO(lab 07, Block B): check the views, then per query block and key block: scores, "
      "masks, online softmax, accumulate; normalise — see labs/07-efficient-attention.md");
}

// ---- Block C: multi-head attention that stores no weights --------------------------------------

// x (B, T, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiHeadAttention& layer, const Tensor3& x, bool causal,
                          Tiles tiles) {
  // TODO(lab 07, Block C): project, run tiled_attention on each head's columns in place, apply
  // W_O — see labs/07-efficient-attention.md
  throw Todo(
      "TODO(lab 07, Block C): project, run tiled_attention on each head's columns in place, "
      "apply W_O — see labs/07-efficient-attention.md");
}

// query (B, T, d_model), key and value (B, S, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiheadCrossAttention& layer, const Tensor3& query,
                          const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& options, bool causal, Tiles tiles) {
  // TODO(lab 07, Block C): lab 06's layer: check, project with biases, transform_qk, padding as
  // a key_bias, tiled_attention per head, W_O — see labs/07-efficient-attention.md
  throw Todo(
      "TODO(lab 07, Block C): lab 06's layer: check, project with biases, transform_qk, padding "
      "as a key_bias, tiled_attention per head, W_O — see labs/07-efficient-attention.md");
}

}  // namespace minimodel
