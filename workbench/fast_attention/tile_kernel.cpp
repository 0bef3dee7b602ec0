// The tuned path's kernel: lab 07's Block B, step for step as in the plain reference (the step
// numbers are the lab's), with the causal diagonal offset by first_query. What it adds (issue 28):
// its two tile products no longer go through cblas_sgemm, which repacks both operands into its own
// panels on every call (at (4096, 512, 8), its packing took 30 % of the time on issue 28's Zen 3,
// 13 to 14 % on a Zen 4). Instead:
//   - The score product reads kᵀ, a panel of (d_head, bk) per key tile: attend_tiles packs K so
//     once per call; attend_tiles_transposed_keys reads the panels in place from a kᵀ its caller
//     stored once for every block of queries (fast::efficient_forward does). The softmax scale
//     stays on the scores, as in the plain reference (scale · (q · k), not q · (scale · k), which
//     rounds differently); tile_rows.cpp applies it in the pass that exponentiates them.
//   - Each product is one call of a small-GEMM kernel that libxsmm generates for its exact sizes
//     (JIT, for the instruction set this CPU has) and that reads its operands in place: q, the
//     packed panel, the scores and v all stay in the layout they are in (SmallGemm,
//     solutions/minimodel/simd/small_gemm.hpp, which lab 13's reference uses too).
#include "fast_attention/tile_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fast_attention/tile_rows.hpp"
#include "simd_rows.hpp"

namespace minimodel::fast {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// keys: k[k0 : k0 + bk]ᵀ for each key tile, panels of (d_head, bk) one after the other;
// the last tile's panel keeps the row length bk, its columns past the last key unused.
void pack_keys(MatrixView k, std::size_t bk, std::vector<float>& keys) {
  const std::size_t S = k.rows, d_head = k.cols, panel = d_head * bk;
  keys.resize((S + bk - 1) / bk * panel);
  for (std::size_t k0 = 0; k0 < S; k0 += bk) {
    float* out = keys.data() + k0 / bk * panel;
    const std::size_t nk = std::min(bk, S - k0);
    for (std::size_t j = 0; j < nk; ++j) {
      const float* key = k.data + (k0 + j) * k.ld;
      for (std::size_t c = 0; c < d_head; ++c) out[c * bk + j] = key[c];
    }
  }
}

// kᵀ in panels of (d_head, bk), one per key tile: panel t starts at data + t · step, its rows ld
// apart. Packed by pack_keys (ld bk, step d_head · bk), or kᵀ as it lies (ld its row stride, step
// bk).
struct KeyPanels {
  const float* data;
  std::size_t ld, step;
};

// q (T, d_head), the key panels of S keys, v (S, d_v) -> out (T, d_v)
void attend_panels(MatrixView q, KeyPanels keys_t, std::size_t S, MatrixView v,
                   MutableMatrixView out, const TiledOptions& options, std::size_t first_query,
                   TileWorkspace& ws, Products products);

}  // namespace

// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void attend_tiles(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                  const TiledOptions& options, std::size_t first_query, TileWorkspace& ws,
                  Products products) {
  // K packed once for every block of queries: S · d_head floats (256 KiB at S = 1024, d_head 64),
  // read again by each block of queries from L2 (and by the score product from L1, a panel at a
  // time).
  const std::size_t bk = options.tiles.keys;
  pack_keys(k, bk, ws.keys);
  attend_panels(q, {ws.keys.data(), bk, k.cols * bk}, k.rows, v, out, options, first_query, ws,
                products);
}

// q (T, d_head), kᵀ (d_head, S), v (S, d_v) -> out (T, d_v)
void attend_tiles_transposed_keys(MatrixView q, MatrixView keys_t, MatrixView v,
                                  MutableMatrixView out, const TiledOptions& options,
                                  std::size_t first_query, TileWorkspace& ws) {
  attend_panels(q, {keys_t.data, keys_t.ld, options.tiles.keys}, keys_t.cols, v, out, options,
                first_query, ws, Products::small_gemm);
}

namespace {

void attend_panels(MatrixView q, KeyPanels keys_t, std::size_t S, MatrixView v,
                   MutableMatrixView out, const TiledOptions& options, std::size_t first_query,
                   TileWorkspace& ws, Products products) {
  const std::size_t T = q.rows, d_head = q.cols, d_v = v.cols;
  const std::size_t bq = options.tiles.queries, bk = options.tiles.keys;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_head));
  TileCounts counts;

  // The kernels of a whole tile, generated (or looked up) once per call; the edge tiles' below.
  const SmallGemm full_scores(false, bq, bk, d_head, q.ld, keys_t.ld, bk, false, products);
  const SmallGemm full_values(false, bq, d_v, bk, bk, v.ld, out.ld, true, products);

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
      const bool whole = nq == bq && nk == bk;

      // 3. The tile's scores, q_block k_blockᵀ from the packed panel, no repacking (scaled below).
      //    In cache while the tile lasts: the query block (bq, d_head), the panel (d_head, bk),
      //    the scores.
      const float* keys = keys_t.data + k0 / bk * keys_t.step;
      const float* queries = q.data + q0 * q.ld;
      if (whole) {
        full_scores(queries, keys, scores);
      } else {
        SmallGemm(false, nq, nk, d_head, q.ld, keys_t.ld, bk, false, products)(queries, keys,
                                                                               scores);
      }

      // Only a tile that crosses the causal diagonal, or with a mask, has masks to apply.
      const bool diagonal = options.causal && k0 + nk - 1 > first_query + q0;
      const bool masked = options.mask || options.key_bias;
      // 4 and 5 without a mask or key_bias (every tile of lab 01's layer): a diagonal tile's keys
      //    past each row's query become -inf (as step 4 below makes them: -inf stays -inf once
      //    scaled, and its exp is 0), then scale, max, rescale and exponentiate in one pass per
      //    row, vectorised for this CPU (tile_rows.hpp), with the roundings of the steps below.
      if (!masked) {
        for (std::size_t i = 0; diagonal && i < nq; ++i) {
          const std::size_t query = first_query + q0 + i;  // sees keys <= query
          const std::size_t visible = query + 1 > k0 ? std::min(nk, query + 1 - k0) : 0;
          std::fill(scores + i * bk + visible, scores + i * bk + nk, kMinusInfinity);
        }
        online_softmax_rows(
            {scores, nq, nk, bk, ws.row_max.data(), ws.row_sum.data(), out_block, d_v, out.ld},
            scale);
      }
      for (std::size_t i = 0; masked && i < nq; ++i) {
        float* row = scores + i * bk;
        for (std::size_t j = 0; j < nk; ++j) row[j] *= scale;
        // 4. Masks: a removed key's score becomes -inf; another mask or key_bias value is added.
        for (std::size_t j = 0; j < nk; ++j) {
          if (diagonal && k0 + j > first_query + q0 + i) {
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

      // 6. Accumulate the tile's weighted values, out_block += P v_block, v read in place: in
      //    cache, the scores (bq, bk), the value rows (bk, d_v) and the output block (bq, d_v).
      const float* values = v.data + k0 * v.ld;
      if (whole) {
        full_values(scores, values, out_block);
      } else {
        SmallGemm(false, nq, d_v, nk, bk, v.ld, out.ld, true, products)(scores, values, out_block);
      }
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

}  // namespace
}  // namespace minimodel::fast
