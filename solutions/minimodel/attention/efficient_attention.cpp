// Lab 07 reference: the attention of labs 00–02, tile by tile with an online softmax, written as
// the lab's steps. The tuned version that `workbook bench` and `workbook attend` run (workspaces
// kept across calls, heads in groups, threads) is workbench/fast_attention/, checked against this.
#include "minimodel/attention/efficient_attention.hpp"

#include <cblas.h>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "minimodel/shapes.hpp"
#include "simd_rows.hpp"

namespace minimodel {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

std::string shape(std::size_t rows, std::size_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

std::string tiles_text(const Tiles& tiles) {
  return std::to_string(tiles.queries) + " x " + std::to_string(tiles.keys);
}

template <class View>
void check_ld(const View& m, const char* name) {
  if (m.ld < m.cols)
    throw std::invalid_argument("tiled_attention: " + std::string(name) + " is " +
                                shape(m.rows, m.cols) + " with ld " + std::to_string(m.ld) +
                                ", below its " + std::to_string(m.cols) + " columns");
}

void check_kernel_inputs(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                         const TiledOptions& options) {
  const std::string qkv = "q " + shape(q.rows, q.cols) + ", k " + shape(k.rows, k.cols) + ", v " +
                          shape(v.rows, v.cols);
  if (q.cols != k.cols)
    throw std::invalid_argument("tiled_attention: q and k differ in width: " + qkv);
  if (k.rows != v.rows)
    throw std::invalid_argument("tiled_attention: k and v differ in length: " + qkv);
  if (out.rows != q.rows || out.cols != v.cols)
    throw std::invalid_argument("tiled_attention: out is " + shape(out.rows, out.cols) +
                                " but must be (T, d_v) = " + shape(q.rows, v.cols));
  check_ld(q, "q");
  check_ld(k, "k");
  check_ld(v, "v");
  check_ld(out, "out");
  if (options.mask && (options.mask->shape(0) != q.rows || options.mask->shape(1) != k.rows))
    throw std::invalid_argument("tiled_attention: mask is " + shape_of(*options.mask) +
                                " but must be (T, S) = " + shape(q.rows, k.rows));
  if (options.key_bias && options.key_bias->size() != k.rows)
    throw std::invalid_argument("tiled_attention: key_bias is " + shape_of(*options.key_bias) +
                                " but must be (S) = (" + std::to_string(k.rows) + ")");
  if (options.causal && q.rows != k.rows)
    throw std::invalid_argument("tiled_attention: causal needs T = S, but q is " +
                                shape(q.rows, q.cols) + " and k " + shape(k.rows, k.cols));
  if (options.tiles.queries == 0 || options.tiles.keys == 0)
    throw std::invalid_argument("tiled_attention: tiles are " + tiles_text(options.tiles) +
                                " but must be at least 1 x 1");
}

// One tile of scores and the running state of its rows: tiled_attention keeps one per thread and
// reuses it across calls, because the first write to fresh memory costs more than the arithmetic
// of a small tile.
struct TileWorkspace {
  std::vector<float> scores, row_max, row_sum;

  void fit(const Tiles& tiles) {
    scores.resize(tiles.queries * tiles.keys);
    row_max.resize(tiles.queries);
    row_sum.resize(tiles.queries);
  }
};

// c (m, n) = a (m, k) @ b (k, n), row-major views: one SGEMM, on whatever threads the process gave
// OpenBLAS.
void gemm(MatrixView a, MatrixView b, MutableMatrixView c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(c.rows), int(c.cols), int(a.cols),
              1.0f, a.data, int(a.ld), b.data, int(b.ld), 0.0f, c.data, int(c.ld));
}

}  // namespace

// ---- Block A: online softmax --------------------------------------------------------------------

float RunningSoftmax::add(float score) {
  // A removed key changes nothing; it must not reach score - max, which is -inf - -inf = NaN
  // while no finite score has been seen.
  if (score == kMinusInfinity) return 1.0f;
  if (score <= max) {
    sum += std::exp(score - max);
    return 1.0f;
  }
  // A new max: what was summed relative to the old max shrinks by exp(old max - new max), which
  // is 0 for the first finite score (max = -inf) and never overflows (the exponent is < 0).
  const float factor = std::exp(max - score);
  sum = sum * factor + 1.0f;
  max = score;
  return factor;
}

// (T, S) -> (T, S)
Tensor2 online_softmax(const Tensor2& scores) {
  Tensor2 weights = Tensor2::from_shape(scores.shape());
  const std::size_t S = scores.shape(1);
  for (std::size_t t = 0; t < scores.shape(0); ++t) {
    const float* row = scores.data() + t * S;
    // 1. One pass: the running max and the sum of exp(score - max) relative to it.
    RunningSoftmax running;
    for (std::size_t s = 0; s < S; ++s) running.add(row[s]);
    // 2. Normalise. A row with no finite score has sum 0: zeros, not 0/0.
    for (std::size_t s = 0; s < S; ++s)
      weights(t, s) = running.sum > 0.0f ? std::exp(row[s] - running.max) / running.sum : 0.0f;
  }
  return weights;
}

// ---- Block B: the tiled kernel -----------------------------------------------------------------

// q (T, d_head), k (S, d_head), v (S, d_v) -> out (T, d_v)
void tiled_attention(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                     const TiledOptions& options) {
  check_kernel_inputs(q, k, v, out, options);
  thread_local TileWorkspace ws;
  ws.fit(options.tiles);
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
      if (options.causal && k0 > q0 + nq - 1) {
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
          if (options.causal && k0 + j > q0 + i) {
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

// ---- Block C: multi-head attention that stores no weights --------------------------------------

// x (B, T, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiHeadAttention& layer, const Tensor3& x, bool causal,
                          Tiles tiles) {
  const std::size_t d_model = layer.d_model();
  if (x.shape(2) != d_model)
    throw std::invalid_argument("efficient_forward: x is " + shape_of(x) +
                                " but must be (B, T, d_model) with d_model " +
                                std::to_string(d_model));
  if (tiles.queries == 0 || tiles.keys == 0)
    throw std::invalid_argument("efficient_forward: tiles are " + tiles_text(tiles) +
                                " but must be at least 1 x 1");
  const std::size_t B = x.shape(0), T = x.shape(1), H = layer.n_heads(), d_head = layer.d_head();
  Tensor3 y = Tensor3::from_shape({B, T, d_model});
  if (T == 0) return y;

  // One sequence's projections and context, (T, d_model) each, reused by every sequence.
  Tensor2 q = Tensor2::from_shape({T, d_model}), k = Tensor2::from_shape({T, d_model}),
          v = Tensor2::from_shape({T, d_model}), context = Tensor2::from_shape({T, d_model});
  TiledOptions options;
  options.causal = causal;
  options.tiles = tiles;
  for (std::size_t b = 0; b < B; ++b) {
    const MatrixView x_b{x.data() + b * T * d_model, T, d_model, d_model};
    // 1. Project: q, k, v = x_b W_Q, x_b W_K, x_b W_V, (T, d_model) each.
    gemm(x_b, view_of(layer.w_q()), view_of(q));
    gemm(x_b, view_of(layer.w_k()), view_of(k));
    gemm(x_b, view_of(layer.w_v()), view_of(v));
    // 2. Heads in place: head h is the column block h · d_head of each, rows d_model apart; the
    //    kernel writes its columns of the context, which is then merge_heads's layout already.
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t column = h * d_head;
      tiled_attention({q.data() + column, T, d_head, d_model},
                      {k.data() + column, T, d_head, d_model},
                      {v.data() + column, T, d_head, d_model},
                      {context.data() + column, T, d_head, d_model}, options);
    }
    // 3. Output projection: y_b = context W_O, straight into y's rows of sequence b.
    gemm(view_of(context), view_of(layer.w_o()), {y.data() + b * T * d_model, T, d_model, d_model});
  }
  return y;
}

// ---- Block C: lab 06's layer, output only ---------------------------------------------------

namespace {

void check_cross_inputs(const MultiheadCrossAttention& layer, const Tensor3& query,
                        const Tensor3& key, const Tensor3& value,
                        const CrossAttentionOptions& options, bool causal, const Tiles& tiles) {
  // Lab 06's checks of the inputs and masks, under this function's name; then lab 07's own.
  detail::check_cross_attention_inputs("efficient_forward", query, key, value, layer.d_model(),
                                       options);
  const std::string where = "efficient_forward: ";
  const std::size_t T = query.shape(1), S = key.shape(1);
  if (causal && T != S)
    throw std::invalid_argument(where + "causal needs T = S, but query is " + shape_of(query) +
                                " and key " + shape_of(key));
  if (tiles.queries == 0 || tiles.keys == 0)
    throw std::invalid_argument(where + "tiles are " + tiles_text(tiles) +
                                " but must be at least 1 x 1");
  if (layer.training() && layer.dropout() > 0.0f)
    throw std::invalid_argument(where + "the layer is in training mode with dropout " +
                                std::to_string(layer.dropout()) +
                                ", which needs the weights; call forward, or train(false)");
}

}  // namespace

// query (B, T, d_model), key and value (B, S, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiheadCrossAttention& layer, const Tensor3& query,
                          const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& options, bool causal, Tiles tiles) {
  check_cross_inputs(layer, query, key, value, options, causal, tiles);
  const std::size_t B = query.shape(0), T = query.shape(1);
  const std::size_t H = layer.n_heads(), d_model = layer.d_model(), d_head = layer.d_head();

  // 1. Project each role with its own input and bias, as lab 06 does.
  const Tensor3 q = project(query, layer.w_q(), layer.b_q());  // (B, T, d_model)
  const Tensor3 k = project(key, layer.w_k(), layer.b_k());    // (B, S, d_model)
  const Tensor3 v = project(value, layer.w_v(), layer.b_v());  // (B, S, d_model)

  // 2. A position scheme acts on per-head queries and keys, so only then are they split into
  //    heads, (B, H, T or S, d_head); otherwise each head reads its columns in place.
  std::optional<Tensor4> q_heads, k_heads;
  if (options.transform_qk) {
    q_heads = split_heads(q, H);
    k_heads = split_heads(k, H);
    detail::apply_transform_qk("efficient_forward", options, *q_heads, *k_heads);
  }
  // Head h of sequence b: a (rows, d_head) view of the split heads, or of the projection's columns.
  const auto head = [&](const Tensor3& projected, const std::optional<Tensor4>& split,
                        std::size_t b, std::size_t h) -> MatrixView {
    const std::size_t rows = projected.shape(1);
    if (split) return {split->data() + (b * H + h) * rows * d_head, rows, d_head, d_head};
    return {projected.data() + b * rows * d_model + h * d_head, rows, d_head, d_model};
  };

  Tensor3 context = Tensor3::from_shape({B, T, d_model});  // heads side by side: merged already
  const auto& attn_mask = options.attn_mask;
  const auto& padding = options.key_padding_mask;
  Tensor2 additive;  // (T, S), the attn_mask's values for a sequence: once if the batch shares it
  if (attn_mask && attn_mask->shape(0) == 1) additive = xt::view(*attn_mask, 0, 0);
  Tensor1 key_bias;  // (S), a sequence's key padding: 0, or kMaskedScore for a padded key
  TiledOptions tiled;
  tiled.mask = attn_mask ? &additive : nullptr;
  tiled.key_bias = padding ? &key_bias : nullptr;
  tiled.causal = causal;
  tiled.tiles = tiles;
  for (std::size_t b = 0; b < B; ++b) {
    // 3. This sequence's masks: the attn_mask's values as a (T, S) table, and the padded keys as a
    //    per-key bias, never a table. The kernel removes the keys at kMaskedScore in either.
    if (attn_mask && attn_mask->shape(0) != 1) additive = xt::view(*attn_mask, b, 0);
    if (padding) key_bias = xt::where(xt::view(*padding, b), kMaskedScore, 0.0f);
    // 4. Each head with the kernel, writing its columns of the context.
    for (std::size_t h = 0; h < H; ++h)
      tiled_attention(head(q, q_heads, b, h), head(k, k_heads, b, h), head(v, std::nullopt, b, h),
                      {context.data() + b * T * d_model + h * d_head, T, d_head, d_model}, tiled);
  }
  // 5. Mix the heads with W_O (+ b_o).
  return project(context, layer.w_o(), layer.b_o());
}

}  // namespace minimodel
