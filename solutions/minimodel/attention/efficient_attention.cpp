// Lab 07 reference: the attention of labs 00–02, tile by tile with an online softmax.
#include "minimodel/attention/efficient_attention.hpp"

#include <cblas.h>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
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

// One tile of scores and the running state of its rows. Reused across calls: the first write to
// fresh memory costs more than the arithmetic of a small tile.
struct TileWorkspace {
  std::vector<float> scores, row_max, row_sum;

  void fit(const Tiles& tiles) {
    scores.resize(tiles.queries * tiles.keys);
    row_max.resize(tiles.queries);
    row_sum.resize(tiles.queries);
  }
};

// Runs task(i, worker) for every i in [0, n) on up to `threads` threads, this one included;
// worker < threads names the thread, so that each can use its own slot of a workspace. Rethrows
// the first exception a task threw.
void parallel_for(std::size_t n, std::size_t threads,
                  const std::function<void(std::size_t, std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const auto work = [&](std::size_t worker) {
    for (std::size_t i; (i = next++) < n;) {
      try {
        task(i, worker);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < std::min(threads, n); ++t) helpers.emplace_back(work, t);
  work(0);
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
}

// Sets OpenBLAS's process-wide thread count for as long as it lives.
class BlasThreads {
 public:
  explicit BlasThreads(int threads) : saved_(openblas_get_num_threads()) {
    openblas_set_num_threads(threads);
  }
  ~BlasThreads() { openblas_set_num_threads(saved_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

// c (m, n) = alpha · a (m, k) @ b (k, n) + beta · c, row-major views.
void gemm(MatrixView a, MatrixView b, MutableMatrixView c, float alpha = 1.0f, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(c.rows), int(c.cols), int(a.cols),
              alpha, a.data, int(a.ld), b.data, int(b.ld), beta, c.data, int(c.ld));
}

// The kernel behind tiled_attention. In causal mode, q's row i is query first_query + i of the
// sequence and sees keys j <= first_query + i: efficient_forward hands it one block of queries
// at a time. (tiled_attention itself has first_query = 0.)
void attend_tiles(MatrixView q, MatrixView k, MatrixView v, MutableMatrixView out,
                  const TiledOptions& options, std::size_t first_query, TileWorkspace& ws);

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
  thread_local TileWorkspace workspace;
  workspace.fit(options.tiles);
  attend_tiles(q, k, v, out, options, 0, workspace);
}

namespace {

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

}  // namespace

// ---- Block C: multi-head attention that stores no weights --------------------------------------

namespace {

// The scratch of efficient_forward, kept by the calling thread and reused across calls. Each
// worker thread has its own slot of the per-block buffers and its own tile.
struct LayerWorkspace {
  std::vector<float> keys, values;      // (T, group width): the group's keys and values
  std::vector<float> queries, context;  // per worker, (block, group width)
  std::vector<TileWorkspace> tiles;     // per worker
};

// Keys and values of a group of heads take at most this many bytes: at T = 16384, d_head = 64,
// two heads at a time. The rest of the layer's scratch is O(block · d_model) per thread.
constexpr std::size_t kKeyValueBytes = std::size_t{16} << 20;

// Query rows per task: whole tiles, at most 512 rows, so that a block's buffers stay small. One
// thread takes the largest blocks (the fewer, the larger its GEMMs); several take about four
// blocks each, so that the causal blocks, whose cost grows with their position, even out.
std::size_t rows_per_task(std::size_t T, std::size_t threads, std::size_t tile) {
  const std::size_t most = std::max<std::size_t>(1, 512 / tile);  // tiles per task
  if (threads == 1) return tile * most;
  return tile * std::clamp<std::size_t>(T / (4 * threads * tile), 1, most);
}

}  // namespace

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

  // Heads go in groups whose keys and values fit kKeyValueBytes: all of them at once for the
  // shapes of `workbook bench`, so that each projection is one wide GEMM.
  const std::size_t group =
      std::clamp<std::size_t>(kKeyValueBytes / (2 * T * d_head * sizeof(float)), 1, H);
  const std::size_t width = group * d_head;  // columns of a group, at most d_model
  const std::size_t threads = std::size_t(std::max(1, openblas_get_num_threads()));
  const std::size_t block = rows_per_task(T, threads, tiles.queries);
  const std::size_t n_blocks = (T + block - 1) / block;

  thread_local LayerWorkspace ws;
  ws.keys.resize(T * width);
  ws.values.resize(T * width);
  ws.queries.resize(threads * block * width);
  ws.context.resize(threads * block * width);
  ws.tiles.resize(threads);
  for (TileWorkspace& tile : ws.tiles) tile.fit(tiles);
  // Inside the other threads, `ws` would name those threads' own, empty workspace.
  LayerWorkspace& shared = ws;

  // Columns [first, first + cols) of a (d_model, d_model) weight: the W[:, group] of a group.
  const auto columns = [d_model](const Tensor2& w, std::size_t first, std::size_t cols) {
    return MatrixView{w.data() + first, d_model, cols, d_model};
  };
  for (std::size_t b = 0; b < B; ++b) {
    const float* x_b = x.data() + b * T * d_model;
    float* y_b = y.data() + b * T * d_model;
    for (std::size_t h0 = 0; h0 < H; h0 += group) {
      const std::size_t first = h0 * d_head;  // the group's first column
      const std::size_t heads = std::min(group, H - h0);
      const std::size_t cols = heads * d_head;
      // Every GEMM below runs single-threaded on this function's threads: OpenBLAS's own would
      // keep spinning after their GEMM, taking a core from the attention that follows.
      const BlasThreads one_blas_thread(1);
      // 1. The group's keys and values, K = x_b W_K[:, group], V = x_b W_V[:, group], (T, cols)
      //    each, a block of rows per task.
      const MutableMatrixView keys{shared.keys.data(), T, cols, width},
          values{shared.values.data(), T, cols, width};
      parallel_for(n_blocks, threads, [&, cols, first](std::size_t task, std::size_t) {
        const std::size_t r0 = task * block, rows = std::min(block, T - r0);
        const MatrixView x_rows{x_b + r0 * d_model, rows, d_model, d_model};
        gemm(x_rows, columns(layer.w_k(), first, cols),
             {keys.data + r0 * width, rows, cols, width});
        gemm(x_rows, columns(layer.w_v(), first, cols),
             {values.data + r0 * width, rows, cols, width});
      });

      // 2. Per block of query rows, on the threads: the block's queries, each head's attention
      //    over the keys it may see, and the block's share of y. Blocks run last-first: in causal
      //    mode the last block costs the most.
      parallel_for(
          n_blocks, threads, [&, cols, first, heads](std::size_t task, std::size_t worker) {
            const std::size_t r0 = (n_blocks - 1 - task) * block, rows = std::min(block, T - r0);
            const MutableMatrixView queries{shared.queries.data() + worker * block * width, rows,
                                            cols, width},
                context{shared.context.data() + worker * block * width, rows, cols, width};
            // 2a. queries = x_b[rows] W_Q[:, group], (rows, cols).
            gemm({x_b + r0 * d_model, rows, d_model, d_model}, columns(layer.w_q(), first, cols),
                 queries);
            // 2b. Each head reads its columns of queries, keys and values in place: no split_heads.
            //     Causal: the block's last query sees keys up to r0 + rows - 1, no further.
            const std::size_t visible = causal ? r0 + rows : T;
            TiledOptions options;
            options.causal = causal;
            options.tiles = tiles;
            for (std::size_t h = 0; h < heads; ++h) {
              const std::size_t c = h * d_head;
              attend_tiles(
                  {queries.data + c, rows, d_head, width}, {keys.data + c, visible, d_head, width},
                  {values.data + c, visible, d_head, width},
                  {context.data + c, rows, d_head, width}, options, r0, shared.tiles[worker]);
            }
            // 2c. y_b[rows] (+)= context W_O[group's rows, :], no merge_heads; the first group
            //     sets y, the others add to it.
            gemm(context, {layer.w_o().data() + first * d_model, cols, d_model, d_model},
                 {y_b + r0 * d_model, rows, d_model, d_model}, 1.0f, h0 == 0 ? 0.0f : 1.0f);
          });
    }
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

// x (B, N, d_in) @ w (d_in, d_out) + b (d_out) -> (B, N, d_out): one GEMM over all B·N rows.
Tensor3 project(const Tensor3& x, const Tensor2& w, const std::optional<Tensor1>& b) {
  Tensor3 out = Tensor3::from_shape({x.shape(0), x.shape(1), w.shape(1)});
  const std::size_t rows = x.shape(0) * x.shape(1);
  gemm({x.data(), rows, x.shape(2), x.shape(2)}, view_of(w),
       {out.data(), rows, w.shape(1), w.shape(1)});
  if (b) out += *b;  // the bias broadcasts over the rows
  return out;
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
    const auto q_shape = q_heads->shape(), k_shape = k_heads->shape();
    const std::string before = shape_of(*q_heads) + " and " + shape_of(*k_heads);
    options.transform_qk(*q_heads, *k_heads);
    if (q_heads->shape() != q_shape || k_heads->shape() != k_shape)
      throw std::invalid_argument("efficient_forward: transform_qk changed q and k from " + before +
                                  " to " + shape_of(*q_heads) + " and " + shape_of(*k_heads) +
                                  "; it must keep their shapes");
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
  const std::size_t threads = std::size_t(std::max(1, openblas_get_num_threads()));
  for (std::size_t b = 0; b < B; ++b) {
    // 3. This sequence's masks: the attn_mask's values as a (T, S) table, and the padded keys as a
    //    per-key bias, never a table. The kernel removes the keys at kMaskedScore in either.
    if (attn_mask && attn_mask->shape(0) != 1) additive = xt::view(*attn_mask, b, 0);
    if (padding) key_bias = xt::where(xt::view(*padding, b), kMaskedScore, 0.0f);
    // 4. Each head with the kernel, writing its columns of the context; heads on the threads.
    const BlasThreads one_blas_thread(1);
    parallel_for(H, threads, [&](std::size_t h, std::size_t) {
      TiledOptions tiled;
      tiled.mask = attn_mask ? &additive : nullptr;
      tiled.key_bias = padding ? &key_bias : nullptr;
      tiled.causal = causal;
      tiled.tiles = tiles;
      tiled_attention(head(q, q_heads, b, h), head(k, k_heads, b, h), head(v, std::nullopt, b, h),
                      {context.data() + b * T * d_model + h * d_head, T, d_head, d_model}, tiled);
    });
  }
  // 5. Mix the heads with W_O (+ b_o).
  return project(context, layer.w_o(), layer.b_o());
}

}  // namespace minimodel
