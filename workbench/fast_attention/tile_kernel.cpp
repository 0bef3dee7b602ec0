// The tuned path's kernel: lab 07's Block B, step for step as in the plain reference (the step
// numbers are the lab's), with the causal diagonal offset by first_query.
#include "fast_attention/tile_kernel.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "simd_rows.hpp"

namespace minimodel::fast {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

}  // namespace

// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void attend_tiles(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                  const TiledOptions& options, std::size_t first_query, TileWorkspace& ws) {
  const std::size_t T = q.rows, S = k.rows, d_head = q.cols, d_v = v.cols;
  const std::size_t bq = options.tiles.queries, bk = options.tiles.keys;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_head));
  TileCounts counts;

  for (std::size_t q0 = 0; q0 < T; q0 += bq) {
    const std::size_t nq = std::min(bq, T - q0);
    float* out_block = out.data + q0 * out.ld;
    // 1. This block of queries has seen no key yet: max -inf, sum 0, output rows 0.
    std::fill_n(ws.row_max.begin(), nq, kMinusInfinity);
    std::fill_n(ws.row_sum.begin(), nq, 0.0f);
    for (std::size_t i = 0; i < nq; ++i) std::fill_n(out_block + i * out.ld, d_v, 0.0f);

    for (std::size_t k0 = 0; k0 < S; k0 += bk) {
      // 2. Causal: a tile whose first key comes after the block's last query is never computed,
      //    nor is any tile after it.
      if (options.causal && k0 > first_query + q0 + nq - 1) {
        counts.skipped += (S - k0 + bk - 1) / bk;
        break;
      }
      ++counts.computed;
      const std::size_t nk = std::min(bk, S - k0);
      float* scores = ws.scores.data();  // (nq, nk), rows bk apart

      // 3. The tile's scores, scale · q_block k_blockᵀ: one SGEMM on the views, in cache.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(nq), int(nk), int(d_head), scale,
                  q.data + q0 * q.ld, int(q.ld), k.data + k0 * k.ld, int(k.ld), 0.0f, scores,
                  int(bk));

      for (std::size_t i = 0; i < nq; ++i) {
        float* row = scores + i * bk;
        // 4. Masks: a removed key's score becomes -inf; another mask or key_bias value is added.
        for (std::size_t j = 0; j < nk; ++j) {
          if (options.causal && k0 + j > first_query + q0 + i) {
            row[j] = kMinusInfinity;
          } else if (options.mask || options.key_bias) {
            const float m = options.mask ? (*options.mask)(q0 + i, k0 + j) : 0.0f;
            const float b = options.key_bias ? (*options.key_bias)(k0 + j) : 0.0f;
            row[j] = m <= kMaskedScore || b <= kMaskedScore ? kMinusInfinity : row[j] + m + b;
          }
        }
        // 5. Online softmax, a tile row at a time: the new max, the rescale of what the row has
        //    summed and accumulated so far, then exp(score - max) in place of the scores.
        const float tile_max = simd::row_max(row, nk);
        const float new_max = std::max(ws.row_max[i], tile_max);
        if (new_max == kMinusInfinity) {  // no key of this row so far: -inf - -inf would be NaN
          std::fill_n(row, nk, 0.0f);
          continue;
        }
        const float factor = std::exp(ws.row_max[i] - new_max);  // 0 for the row's first key
        if (factor != 1.0f) {
          float* out_row = out_block + i * out.ld;
          for (std::size_t c = 0; c < d_v; ++c) out_row[c] *= factor;
        }
        ws.row_sum[i] = ws.row_sum[i] * factor + simd::exponentiate_row(row, nk, new_max);
        ws.row_max[i] = new_max;
      }

      // 6. Accumulate the tile's weighted values, out_block += P v_block: one SGEMM.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(nq), int(d_v), int(nk), 1.0f,
                  scores, int(bk), v.data + k0 * v.ld, int(v.ld), 1.0f, out_block, int(out.ld));
    }

    // 7. Normalise each row by its sum; a row with no key left has sum 0 and stays zero.
    for (std::size_t i = 0; i < nq; ++i) {
      if (ws.row_sum[i] == 0.0f) continue;
      const float inverse = 1.0f / ws.row_sum[i];
      float* out_row = out_block + i * out.ld;
      for (std::size_t c = 0; c < d_v; ++c) out_row[c] *= inverse;
    }
  }
  if (options.counts) *options.counts = counts;
}

}  // namespace minimodel::fast
