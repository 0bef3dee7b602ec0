// The tuned rung of lab 07's ladder: what each step adds over the plain reference is listed in
// fast_attention.hpp; the kernel is tile_kernel.cpp.
#include "fast_attention/fast_attention.hpp"

#include <cblas.h>
#include <unistd.h>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fast_attention/tile_kernel.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel::fast {
namespace {

std::string tiles_text(const Tiles& tiles) {
  return std::to_string(tiles.queries) + " x " + std::to_string(tiles.keys);
}

// The tiles a call uses: the caller's, checked, or this machine's for d_head.
Tiles checked_tiles(const FastOptions& fast, std::size_t d_head) {
  if (fast.threads == 0)
    throw std::invalid_argument("fast::efficient_forward: threads is 0 but must be at least 1");
  if (!fast.tiles) return machine_tiles(d_head);
  if (fast.tiles->queries == 0 || fast.tiles->keys == 0)
    throw std::invalid_argument("efficient_forward: tiles are " + tiles_text(*fast.tiles) +
                                " but must be at least 1 x 1");
  return *fast.tiles;
}

// /sys/devices/system/cpu/cpu0/cache/index*/: the size of the level-2 data or unified cache.
std::size_t l2_from_sysfs() {
  for (int index = 0; index < 8; ++index) {
    const std::string folder = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level(folder + "/level"), type(folder + "/type"), size(folder + "/size");
    int l = 0;
    std::string kind, text;
    if (!(level >> l) || !(type >> kind) || !(size >> text)) continue;
    if (l != 2 || kind == "Instruction") continue;
    std::size_t value = std::stoul(text);  // "1024K"
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    return value;
  }
  return 0;
}

// Helper threads kept by a calling thread across calls (issue 28, two threads at small T): a
// std::thread started and joined costs about 22 us of CPU on this VM (30 to 90 us of wall time),
// and a call runs two parallel_for per group of heads: at T = 128 on two threads, where a call
// takes under 2 ms, that was up to a tenth of it. Idle helpers sleep on a condition variable.
class HelperThreads {
 public:
  HelperThreads() = default;
  HelperThreads(const HelperThreads&) = delete;
  HelperThreads& operator=(const HelperThreads&) = delete;
  ~HelperThreads() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (std::thread& helper : helpers_) helper.join();
  }

  // work(0) on this thread and work(1) ... work(helpers) on helper threads; returns when all have.
  void run(std::size_t helpers, const std::function<void(std::size_t)>& work) {
    if (helpers == 0) return work(0);
    while (helpers_.size() < helpers) {
      const std::size_t id = helpers_.size() + 1;
      helpers_.emplace_back([this, id, seen = generation_] { serve(id, seen); });
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      work_ = &work;
      active_ = pending_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    work_ = nullptr;
  }

 private:
  void serve(std::size_t id, std::size_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      if (id > active_) continue;  // not needed this time
      const std::function<void(std::size_t)>& work = *work_;
      lock.unlock();
      work(id);  // catches its own exceptions (parallel_for)
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> helpers_;
  const std::function<void(std::size_t)>* work_ = nullptr;
  std::size_t active_ = 0, pending_ = 0, generation_ = 0;
  bool stop_ = false;
};

// Runs task(i, worker) for every i in [0, n) on up to `threads` threads, this one included (and
// the calling thread's helpers); worker < threads names the thread, so that each can use its own
// slot of a workspace. Rethrows the first exception a task threw.
void parallel_for(std::size_t n, std::size_t threads,
                  const std::function<void(std::size_t, std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const std::function<void(std::size_t)> work = [&](std::size_t worker) {
    for (std::size_t i; (i = next++) < n;) {
      try {
        task(i, worker);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  thread_local HelperThreads helpers;
  helpers.run(std::min(threads, n) - std::min<std::size_t>(1, n), work);
  if (failure) std::rethrow_exception(failure);
}

// c (m, n) = alpha · a (m, k) @ b (k, n) + beta · c, row-major views.
void gemm(MatrixView a, MatrixView b, MutableMatrixView c, float alpha = 1.0f, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(c.rows), int(c.cols), int(a.cols),
              alpha, a.data, int(a.ld), b.data, int(b.ld), beta, c.data, int(c.ld));
}

// out (cols, rows) = a (rows, cols)ᵀ, in squares of 32 x 32 that stay in L1.
void transpose(MatrixView a, MutableMatrixView out) {
  constexpr std::size_t kSquare = 32;
  for (std::size_t r0 = 0; r0 < a.rows; r0 += kSquare)
    for (std::size_t c0 = 0; c0 < a.cols; c0 += kSquare) {
      const std::size_t r1 = std::min(a.rows, r0 + kSquare), c1 = std::min(a.cols, c0 + kSquare);
      for (std::size_t c = c0; c < c1; ++c)
        for (std::size_t r = r0; r < r1; ++r) out.data[c * out.ld + r] = a.data[r * a.ld + c];
    }
}

// The scratch of efficient_forward, kept by the calling thread and reused across calls. Each
// worker thread has its own slot of the per-block buffers and its own tile.
struct LayerWorkspace {
  std::vector<float> keys, values;      // the group's keys transposed (width, T), values (T, width)
  std::vector<float> queries, context;  // per worker, (block, group width)
  std::vector<TileWorkspace> tiles;     // per worker
};

// Query rows per task: whole tiles, at most 512 rows, so that a block's buffers stay small. One
// thread takes the largest blocks (the fewer, the larger its GEMMs); several take about four
// blocks each, so that the causal blocks, whose cost grows with their position, even out.
// A T too short for one tile per thread (T = 128 with 128-query tiles) is split in as many blocks
// as threads, each less than a tile: a thread left idle would cost half the machine.
std::size_t rows_per_task(std::size_t T, std::size_t threads, std::size_t tile) {
  const std::size_t most = std::max<std::size_t>(1, 512 / tile);  // tiles per task
  if (threads == 1) return tile * most;
  const std::size_t block = tile * std::clamp<std::size_t>(T / (4 * threads * tile), 1, most);
  if ((T + block - 1) / block >= threads) return block;
  return std::max<std::size_t>(1, (T + threads - 1) / threads);
}

}  // namespace

std::size_t l2_cache_bytes() {
  static const std::size_t bytes = [] {
    const long reported = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc reads it with cpuid
    return reported > 0 ? std::size_t(reported) : l2_from_sysfs();
  }();
  return bytes;
}

Tiles machine_tiles(std::size_t d_head) {
  const std::size_t l2 = l2_cache_bytes();
  if (l2 == 0) return Tiles{};  // the machine does not say: lab 07's 64 x 64
  const auto working_set = [d_head](std::size_t queries, std::size_t keys) {
    return sizeof(float) * (2 * queries * d_head + 2 * keys * d_head + queries * keys);
  };
  Tiles best{32, 32};
  for (const std::size_t queries : {32, 64, 128})
    for (const std::size_t keys : {32, 64, 128})
      if (working_set(queries, keys) <= l2 / 4 &&
          (queries * keys > best.queries * best.keys ||
           (queries * keys == best.queries * best.keys && keys > best.keys)))
        best = {queries, keys};
  return best;
}

// x (B, T, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiHeadAttention& layer, const Tensor3& x, bool causal,
                          const FastOptions& fast) {
  const std::size_t d_model = layer.d_model();
  if (x.shape(2) != d_model)
    throw std::invalid_argument("efficient_forward: x is " + shape_of(x) +
                                " but must be (B, T, d_model) with d_model " +
                                std::to_string(d_model));
  const Tiles tiles = checked_tiles(fast, layer.d_head());
  const bool projections = fast.part != FastOptions::Part::core,
             core = fast.part != FastOptions::Part::projections;
  const std::size_t B = x.shape(0), T = x.shape(1), H = layer.n_heads(), d_head = layer.d_head();
  Tensor3 y = Tensor3::from_shape({B, T, d_model});
  if (T == 0) return y;

  // Heads in groups whose keys and values fit key_value_bytes (idea 2): all of them at once for the
  // shapes of `workbook bench`, so that each projection is one wide GEMM.
  const std::size_t group =
      std::clamp<std::size_t>(fast.key_value_bytes / (2 * T * d_head * sizeof(float)), 1, H);
  const std::size_t width = group * d_head;  // columns of a group, at most d_model
  const std::size_t threads = fast.threads;
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
      // 1. The group's keys and values, K = x_b W_K[:, group], V = x_b W_V[:, group], (T, cols)
      //    each, a block of rows per task.
      const MutableMatrixView keys_t{shared.keys.data(), cols, T, T},
          values{shared.values.data(), T, cols, width};
      if (projections)
        parallel_for(n_blocks, threads, [&, cols, first](std::size_t task, std::size_t worker) {
          const std::size_t r0 = task * block, rows = std::min(block, T - r0);
          const MatrixView x_rows{x_b + r0 * d_model, rows, d_model, d_model};
          // K[rows] = x_rows W_K[:, group] into this worker's query buffer (free until step 2),
          // then stored transposed, Kᵀ[:, rows] of (cols, T): the kernel reads each tile's panel
          // of kᵀ where it lies, packed once per layer call, not per block of queries
          // (tile_kernel.hpp). The GEMM is step 1's as before: the keys are the same to the bit.
          float* k_rows = shared.queries.data() + worker * block * width;
          gemm(x_rows, columns(layer.w_k(), first, cols), {k_rows, rows, cols, width});
          transpose({k_rows, rows, cols, width}, {keys_t.data + r0, cols, rows, T});
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
            if (projections)
              gemm({x_b + r0 * d_model, rows, d_model, d_model}, columns(layer.w_q(), first, cols),
                   queries);
            // 2b. Each head reads its columns of queries, keys and values in place: no split_heads.
            //     Causal: the block's last query sees keys up to r0 + rows - 1, no further.
            const std::size_t visible = causal ? r0 + rows : T;
            TiledOptions options;
            options.causal = causal;
            options.tiles = tiles;
            for (std::size_t h = 0; core && h < heads; ++h) {
              const std::size_t c = h * d_head;
              attend_tiles_transposed_keys({queries.data + c, rows, d_head, width},
                                           {keys_t.data + c * T, d_head, visible, T},
                                           {values.data + c, visible, d_head, width},
                                           {context.data + c, rows, d_head, width}, options, r0,
                                           shared.tiles[worker]);
            }
            // 2c. y_b[rows] (+)= context W_O[group's rows, :], no merge_heads; the first group
            //     sets y, the others add to it.
            if (projections)
              gemm(context, {layer.w_o().data() + first * d_model, cols, d_model, d_model},
                   {y_b + r0 * d_model, rows, d_model, d_model}, 1.0f, h0 == 0 ? 0.0f : 1.0f);
          });
    }
  }
  return y;
}

// ---- Lab 06's layer, output only ---------------------------------------------------------------

// query (B, T, d_model), key and value (B, S, d_model) -> (B, T, d_model)
Tensor3 efficient_forward(const MultiheadCrossAttention& layer, const Tensor3& query,
                          const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& masks, bool causal,
                          const FastOptions& fast) {
  detail::check_cross_attention_inputs("efficient_forward", query, key, value, layer.d_model(),
                                       masks);
  const Tiles tiles = checked_tiles(fast, layer.d_head());
  const std::size_t B = query.shape(0), T = query.shape(1), S = key.shape(1);
  if (causal && T != S)
    throw std::invalid_argument("efficient_forward: causal needs T = S, but query is " +
                                shape_of(query) + " and key " + shape_of(key));
  if (layer.training() && layer.dropout() > 0.0f)
    throw std::invalid_argument("efficient_forward: the layer is in training mode with dropout " +
                                std::to_string(layer.dropout()) +
                                ", which needs the weights; call forward, or train(false)");
  const std::size_t H = layer.n_heads(), d_model = layer.d_model(), d_head = layer.d_head();

  // 1. Project each role with its own input and bias, as lab 06 does.
  const Tensor3 q = project(query, layer.w_q(), layer.b_q());  // (B, T, d_model)
  const Tensor3 k = project(key, layer.w_k(), layer.b_k());    // (B, S, d_model)
  const Tensor3 v = project(value, layer.w_v(), layer.b_v());  // (B, S, d_model)

  // 2. transform_qk on split heads, (B, H, T or S, d_head); otherwise heads are read in place.
  std::optional<Tensor4> q_heads, k_heads;
  if (masks.transform_qk) {
    q_heads = split_heads(q, H);
    k_heads = split_heads(k, H);
    detail::apply_transform_qk("efficient_forward", masks, *q_heads, *k_heads);
  }
  const auto head = [&](const Tensor3& projected, const std::optional<Tensor4>& split,
                        std::size_t b, std::size_t h) -> MatrixView {
    const std::size_t rows = projected.shape(1);
    if (split) return {split->data() + (b * H + h) * rows * d_head, rows, d_head, d_head};
    return {projected.data() + b * rows * d_model + h * d_head, rows, d_head, d_model};
  };

  Tensor3 context = Tensor3::from_shape({B, T, d_model});  // heads side by side: merged already
  const auto& attn_mask = masks.attn_mask;
  const auto& padding = masks.key_padding_mask;
  Tensor2 additive;  // (T, S), the attn_mask's values for a sequence: once if the batch shares it
  if (attn_mask && attn_mask->shape(0) == 1) additive = xt::view(*attn_mask, 0, 0);
  Tensor1 key_bias;  // (S), a sequence's key padding: 0, or kMaskedScore for a padded key
  TiledOptions tiled;
  tiled.mask = attn_mask ? &additive : nullptr;
  tiled.key_bias = padding ? &key_bias : nullptr;
  tiled.causal = causal;
  tiled.tiles = tiles;
  // A tile workspace per worker thread, kept across calls (fast_attention.hpp, idea 1).
  thread_local std::vector<TileWorkspace> workspaces;
  workspaces.resize(fast.threads);
  for (TileWorkspace& ws : workspaces) ws.fit(tiles);
  std::vector<TileWorkspace>& shared = workspaces;  // the helpers' own thread_local is empty
  for (std::size_t b = 0; b < B; ++b) {
    // 3. This sequence's masks, as in the plain reference.
    if (attn_mask && attn_mask->shape(0) != 1) additive = xt::view(*attn_mask, b, 0);
    if (padding) key_bias = xt::where(xt::view(*padding, b), kMaskedScore, 0.0f);
    // 4. Each head with the kernel, writing its columns of the context; heads on the threads.
    //    Its tile products stay OpenBLAS's: with libxsmm's, which sum in another order, this
    //    layer's outputs in tests/fast_attention_test.cpp (|y| up to 4.6, with biases and masks)
    //    differ from the plain reference's by up to 1.3e-6, past the test's 1e-6 (lab 01's layer
    //    there: 7e-7). Against the same layer in float64 (issue 28, measured once on its four
    //    mask cases without transform_qk), neither is the closer: OpenBLAS's 7.3e-7 to 8.9e-7,
    //    libxsmm's 8.6e-7 to 9.5e-7, on opposite sides. A test of libxsmm's against float64 at
    //    1e-6 would pass at 95 % of its tolerance: not worth the switch for this layer.
    parallel_for(H, fast.threads, [&](std::size_t h, std::size_t worker) {
      attend_tiles(head(q, q_heads, b, h), head(k, k_heads, b, h), head(v, std::nullopt, b, h),
                   {context.data() + b * T * d_model + h * d_head, T, d_head, d_model}, tiled, 0,
                   shared[worker], Products::openblas);
    });
  }
  // 5. Mix the heads with W_O (+ b_o).
  return project(context, layer.w_o(), layer.b_o());
}

}  // namespace minimodel::fast
