#pragma once
// The attention API of lab 07: the attention of labs 00–02, computed tile by tile with an online
// softmax, so that no (T, S) matrix of scores or weights is ever stored. Locked by BLUEPRINT.md
// beside this file.
#include <cstddef>
#include <limits>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/cross_attention.hpp"

namespace minimodel {

// ---- Block A: online softmax --------------------------------------------------------------------

/// The running state of one row's softmax, fed one score at a time.
struct RunningSoftmax {
  float max = -std::numeric_limits<float>::infinity();  ///< largest score so far; -inf: none yet
  float sum = 0.0f;                                     ///< Σ exp(score − max) so far

  /// Block A. Takes one more score and returns the factor exp(old max − new max) by which
  /// everything accumulated so far (the sum, and a kernel's output row) must be multiplied: 1 when
  /// the max does not grow. A score of -inf is a removed key: it changes nothing and returns 1.
  float add(float score);
};

/// Block A. Softmax over the last axis of (T, S), each row in one pass with RunningSoftmax, then
/// one pass to normalise. Equals lab 00's softmax on finite rows; a row with no finite score
/// (every score -inf) becomes zeros, never NaN.
Tensor2 online_softmax(const Tensor2& scores);

// ---- Block B: the tiled kernel -----------------------------------------------------------------

/// A row-major matrix inside a larger buffer, as BLAS sees one: element (i, j) is
/// data[i * ld + j], with ld >= cols. A head's column block of a (T, d_model) projection is
/// {data + h * d_head, T, d_head, d_model}.
struct MatrixView {
  const float* data = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0;
};

/// The same for a matrix the kernel writes; it can be read as a MatrixView too.
struct MutableMatrixView {
  float* data = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0;
  operator MatrixView() const { return {data, rows, cols, ld}; }
};

/// A view of a whole tensor (ld = cols).
inline MatrixView view_of(const Tensor2& t) {
  return {t.data(), t.shape(0), t.shape(1), t.shape(1)};
}
inline MutableMatrixView view_of(Tensor2& t) {
  return {t.data(), t.shape(0), t.shape(1), t.shape(1)};
}

/// The tile sizes: a block of `queries` query rows meets a block of `keys` key rows at a time.
struct Tiles {
  std::size_t queries = 64;
  std::size_t keys = 64;
};

/// What tiled_attention did, for the lab's checks and figures.
struct TileCounts {
  std::size_t computed = 0;  ///< tiles whose scores were computed
  std::size_t skipped = 0;   ///< tiles left out: in causal mode, those entirely above the diagonal
};

/// Everything optional that tiled_attention takes.
struct TiledOptions {
  /// Additive (T, S), not owned; null: none. A value at or below kMaskedScore (-inf included)
  /// removes the key; any other value is added to the scaled score.
  const Tensor2* mask = nullptr;
  /// Additive (S), not owned; null: none. The same for every query, so key padding costs S floats,
  /// not a (T, S) table: kMaskedScore (or less) in a padded key's entry removes it; any other value
  /// is added to the scaled score, after the mask's.
  const Tensor1* key_bias = nullptr;
  /// Query i sees keys j <= i only (T = S). Tiles entirely above the diagonal are never computed.
  bool causal = false;
  Tiles tiles;
  TileCounts* counts = nullptr;  ///< if set, receives the tile counts of this call
};

/// Block B. softmax(q kᵀ / sqrt(d_head) + mask + key_bias) v for one head, tile by tile: per block
/// of query rows, a running max, a running sum and an output accumulator per row meet one block of
/// keys at a time, so memory beyond the output is O(tile), never O(T · S). A query with no key left
/// gets a zero output row.
/// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v), all views; out may not overlap the
/// inputs.
/// @throws std::invalid_argument if q and k differ in width, k and v in length, out is not
///         (T, d_v), the mask is not (T, S), the key_bias is not (S), causal has T != S, a tile
///         size is 0, or a view's ld is below its cols; the message names the shapes.
void tiled_attention(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                     const TiledOptions& options = {});

/// tiled_attention on whole tensors: q (T, d_head), k (S, d_head), v (S, d_v) -> (T, d_v).
inline Tensor2 tiled_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                               const TiledOptions& options = {}) {
  Tensor2 out = Tensor2::from_shape({q.shape(0), v.shape(1)});
  tiled_attention(view_of(q), view_of(k), view_of(v), view_of(out), options);
  return out;
}

// ---- Block C: multi-head attention that stores no weights --------------------------------------
//
// Threads: both efficient_forward run on the calling thread, and their SGEMMs (the kernel's
// included) on whatever thread count the process gave OpenBLAS; they never read or change that
// process-wide count, so two callers on two threads do not disturb each other. The reference's
// tuned twin, workbench/fast_attention/fast_attention.hpp, takes a thread count of its own.

/// Block C. Lab 01's layer on x (B, T, d_model) -> (B, T, d_model), equal to
/// layer.forward(x, causal ? causal_mask(T) : none) but computed head by head with
/// tiled_attention on views of the (T, d_model) projections: no split_heads or merge_heads
/// copies, and no (B, H, T, T) weights. Leaves layer.attention_weights() as it was.
/// @throws std::invalid_argument if x is not (·, ·, d_model) or a tile size is 0.
Tensor3 efficient_forward(const MultiHeadAttention& layer, const Tensor3& x, bool causal = false,
                          Tiles tiles = {});

/// Block C. Lab 06's layer, output only: equal to layer.forward(query, key, value,
/// options).output in evaluation mode, computed head by head with tiled_attention, with the
/// layer's biases, options.key_padding_mask, options.attn_mask and options.transform_qk. `causal`
/// is lab 02's mask, by skipping tiles (T = S). The key_padding_mask becomes a key_bias of S
/// floats per sequence, never a (T, S) table; an attn_mask becomes one additive (T, S) table, a
/// copy of its slice for the sequence (made once for the batch if the mask is shared), no larger
/// than the mask passed in. Without an attn_mask nothing of size T · S is allocated.
/// options.need_weights is not read: this function never forms the weights.
/// query (B, T, d_model), key and value (B, S, d_model) -> (B, T, d_model).
/// @throws std::invalid_argument for the inputs layer.forward rejects (an input not
///         (·, ·, d_model), batch sizes or key and value lengths that differ, a mask of another
///         shape, a transform_qk that changes a shape), and if causal has T != S, a tile size is
///         0, or the layer is in training mode with dropout (which acts on the weights); the
///         message names the shapes.
Tensor3 efficient_forward(const MultiheadCrossAttention& layer, const Tensor3& query,
                          const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& options = {}, bool causal = false,
                          Tiles tiles = {});

}  // namespace minimodel
