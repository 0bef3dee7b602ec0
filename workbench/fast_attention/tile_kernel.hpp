#pragma once
// The tuned path's kernel: lab 07's Block B (tiled_attention) without its checks, with a workspace
// the caller keeps and a causal offset, so that a block of queries can be handed to it alone.
// Issue 28 makes this faster (packing K and V once per key block, a micro-kernel); its contract
// stays the one below.
#include <cstddef>
#include <vector>

#include "minimodel/attention/efficient_attention.hpp"

namespace minimodel::fast {

/// One tile of scores and the running max and sum of its rows, kept by the caller across calls.
struct TileWorkspace {
  std::vector<float> scores, row_max, row_sum;

  void fit(const Tiles& tiles) {
    scores.resize(tiles.queries * tiles.keys);
    row_max.resize(tiles.queries);
    row_sum.resize(tiles.queries);
  }
};

/// softmax(q kᵀ / sqrt(d_head) + options' masks) v, as minimodel::tiled_attention, whose checks
/// the caller has made (shapes, ld, mask and key_bias sizes, tiles). In causal mode, q's row i is
/// query first_query + i and sees keys j <= first_query + i; k and v may stop after the last key
/// any row sees. ws must have been fit to options.tiles.
/// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void attend_tiles(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                  const TiledOptions& options, std::size_t first_query, TileWorkspace& ws);

}  // namespace minimodel::fast
