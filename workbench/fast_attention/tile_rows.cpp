// One instruction set's copy of step 5 on a tile without masks (tile_rows.hpp): CMake compiles
// this file once per set of simd::Archs, with MINIMODEL_SIMD_ARCH naming it, its compiler flag,
// and -ffp-contract=off so that s · scale - max stays two roundings, as in the reference.
#include "fast_attention/tile_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace minimodel::fast {

template <class Arch>
void OnlineSoftmaxRows::operator()(Arch, const TileRows& tile, float scale) const {
  using Batch = xsimd::batch<float, Arch>;
  constexpr std::size_t W = Batch::size;
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  const std::size_t n = tile.keys;
  for (std::size_t i = 0; i < tile.rows; ++i) {
    float* row = tile.scores + i * tile.ld_scores;
    // The row's largest raw score, then scaled: fl(scale · max s) = max fl(scale · s).
    std::size_t j = 0;
    float raw_max = kMinusInfinity;
    if (n >= W) {
      Batch maxima = Batch::load_unaligned(row);
      for (j = W; j + W <= n; j += W) maxima = xsimd::max(maxima, Batch::load_unaligned(row + j));
      alignas(Arch::alignment()) float lanes[W];
      maxima.store_aligned(lanes);
      raw_max = *std::max_element(lanes, lanes + W);
    }
    for (; j < n; ++j) raw_max = std::max(raw_max, row[j]);
    const float new_max = std::max(tile.row_max[i], raw_max * scale);
    if (new_max == kMinusInfinity) {  // no key of this row so far: -inf - -inf would be NaN
      std::fill_n(row, n, 0.0f);
      continue;
    }
    const float factor = std::exp(tile.row_max[i] - new_max);  // 0 for the row's first key
    if (factor != 1.0f) {
      float* out_row = tile.out + i * tile.ld_out;
      const Batch f(factor);
      std::size_t c = 0;
      for (; c + W <= tile.d_v; c += W)
        (Batch::load_unaligned(out_row + c) * f).store_unaligned(out_row + c);
      for (; c < tile.d_v; ++c) out_row[c] *= factor;
    }
    // exp(s · scale - new max) in place, summed lane by lane as simd::exponentiate_row sums.
    const Batch shift(new_max), scales(scale);
    Batch sums(0.0f);
    for (j = 0; j + W <= n; j += W) {
      const Batch e = xsimd::exp(Batch::load_unaligned(row + j) * scales - shift);
      e.store_unaligned(row + j);
      sums += e;
    }
    alignas(Arch::alignment()) float lanes[W];
    sums.store_aligned(lanes);
    float sum = std::accumulate(lanes, lanes + W, 0.0f);
    for (; j < n; ++j) sum += row[j] = std::exp(row[j] * scale - new_max);
    tile.row_sum[i] = tile.row_sum[i] * factor + sum;
    tile.row_max[i] = new_max;
  }
}

template void OnlineSoftmaxRows::operator()(MINIMODEL_SIMD_ARCH, const TileRows&, float) const;

}  // namespace minimodel::fast
