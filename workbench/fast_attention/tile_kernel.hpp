#pragma once
// The tuned path's kernel: lab 07's Block B (tiled_attention) without its checks, with a workspace
// the caller keeps and a causal offset, so that a block of queries can be handed to it alone.
// Issue 28: it packs K once per call and computes its two tile products with small-GEMM kernels
// that read their operands where they lie (tile_kernel.cpp); its contract stays the one below.
#include <cstddef>
#include <vector>

#include "minimodel/attention/efficient_attention.hpp"
#include "small_gemm.hpp"

namespace minimodel::fast {

/// One tile of scores and the running max and sum of its rows, and the packed keys, kept by the
/// caller across calls.
struct TileWorkspace {
  std::vector<float> scores, row_max, row_sum;
  std::vector<float> keys;  ///< kᵀ in panels of (d_head, tiles.keys): attend_tiles fits it

  void fit(const Tiles& tiles) {
    scores.resize(tiles.queries * tiles.keys);
    row_max.resize(tiles.queries);
    row_sum.resize(tiles.queries);
  }
};

/// softmax(q kᵀ / sqrt(d_head) + options' masks) v, as minimodel::tiled_attention, whose checks
/// the caller has made (shapes, ld, mask and key_bias sizes, tiles). In causal mode, q's row i is
/// query first_query + i and sees keys j <= first_query + i; k and v may stop after the last key
/// any row sees. ws must have been fit to options.tiles. With Products::openblas the tile products
/// sum in the plain reference's order (lab 06's layer keeps it: fast_attention.cpp says why).
/// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void attend_tiles(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                  const TiledOptions& options, std::size_t first_query, TileWorkspace& ws,
                  Products products = Products::small_gemm);

/// The same with the keys given transposed, kᵀ (d_head, S) with rows keys_t.ld apart, as
/// fast::efficient_forward's key projection writes them: each tile's panel is read where it lies,
/// nothing is packed. Tile products by libxsmm.
/// q (T, d_head), kᵀ (d_head, S), v (S, d_v) -> out (T, d_v)
void attend_tiles_transposed_keys(MatrixView q, MatrixView keys_t, MatrixView v,
                                  MutableMatrixView out, const TiledOptions& options,
                                  std::size_t first_query, TileWorkspace& ws);

}  // namespace minimodel::fast
