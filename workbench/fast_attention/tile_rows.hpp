#pragma once
// Step 5 of the tuned kernel (tile_kernel.cpp) on a whole tile without masks, in one pass per row
// where the plain reference makes three (scale, max, exponentiate): tile_rows.cpp is compiled once
// per instruction set of simd::Archs (as the reference's simd_rows.cpp), and the widest one this
// CPU has is chosen when the program starts.
#include <cstddef>

#include "simd_rows.hpp"

namespace minimodel::fast {

/// A tile's scores and the running statistics of its rows: row i of the scores holds nk floats
/// at scores + i · ld_scores; row i of the output d_v floats at out + i · ld_out.
struct TileRows {
  float* scores;
  std::size_t rows, keys, ld_scores;
  float* row_max;  ///< the largest scaled score each row has seen, -inf before its first key
  float* row_sum;  ///< Σ exp(scaled score - row_max) over the keys each row has seen
  float* out;
  std::size_t d_v, ld_out;
};

/// For each row: new max m' = max(m, scale · max_j s_j); the output row and the sum rescaled by
/// exp(m - m'); s_j = exp(s_j · scale - m') in place, and added to the sum. Equal bit for bit to
/// the reference's steps (scale the row, simd::row_max, simd::exponentiate_row): scale > 0 and
/// rounding is monotone, so the max of the scaled scores is the scaled max, and s_j · scale is
/// rounded once before the subtraction (this file is compiled without contraction into FMA).
/// A row whose max stays -inf (no key so far) gets zeros, as in the reference.
void online_softmax_rows(const TileRows& tile, float scale);

// ---- What it dispatches to ---------------------------------------------------------------------

/// online_softmax_rows for one instruction set.
struct OnlineSoftmaxRows {
  template <class Arch>
  void operator()(Arch, const TileRows& tile, float scale) const;
};

}  // namespace minimodel::fast
