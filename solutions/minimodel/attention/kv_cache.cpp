// Lab 08 reference: the KV cache, one decoding step, and grouped-query attention.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/attention/kv_cache.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

std::string str(std::size_t n) { return std::to_string(n); }

// The checks forward_step and forward share: x (B, T, d_model) and positions (B, T).
void check_tokens(const std::string& where, const Tensor3& x, const BatchPositions& positions,
                  std::size_t d_model) {
  if (x.shape(2) != d_model)
    throw std::invalid_argument(where + "x is " + shape_of(x) + " but d_model is " + str(d_model));
  if (positions.shape(0) != x.shape(0) || positions.shape(1) != x.shape(1))
    throw std::invalid_argument(where + "x is " + shape_of(x) + " but positions is " +
                                shape_of(positions) + "; it must be (B, T) = (" + str(x.shape(0)) +
                                ", " + str(x.shape(1)) + ")");
}

// Steps 1-2 of forward_step and forward: x's tokens projected, split into heads, and rotated.
struct Heads {
  Tensor4 q;     // (B, H, T, d_head)
  Tensor4 k, v;  // (B, H_kv, T, d_head)
};
Heads project_heads(const GroupedQueryAttention& layer, const Tensor3& x,
                    const BatchPositions& positions) {
  // 1. Project and split heads: H query heads, H_kv key/value heads.
  Heads heads{split_heads(project(x, layer.w_q()), layer.n_heads()),
              split_heads(project(x, layer.w_k()), layer.n_kv_heads()),
              split_heads(project(x, layer.w_v()), layer.n_kv_heads())};
  // 2. Rotate q and k at their absolute positions (V stays as it is). forward_step caches rotated
  //    keys, so that no key is ever rotated twice.
  if (layer.rope()) {
    heads.q = layer.rope()->apply(heads.q, positions);
    heads.k = layer.rope()->apply(heads.k, positions);
  }
  return heads;
}

// Head h of sequence b of a contiguous (B, H, rows, d_head) tensor, as a matrix view.
MatrixView head_of(const Tensor4& heads, std::size_t b, std::size_t h, std::size_t rows) {
  const std::size_t d_head = heads.shape(3);
  const float* start = heads.data() + ((b * heads.shape(1) + h) * heads.shape(2)) * d_head;
  return {start, rows, d_head, d_head};
}

}  // namespace

// ---- Block A: what is stored --------------------------------------------------------------------

// -> keys_, values_: (batch, n_kv_heads, max_len, d_head), lengths_: (batch)
KVCache::KVCache(std::size_t batch, std::size_t n_kv_heads, std::size_t max_len,
                 std::size_t d_head) {
  for (const auto& [name, size] : {std::pair{"batch", batch},
                                   {"n_kv_heads", n_kv_heads},
                                   {"max_len", max_len},
                                   {"d_head", d_head}})
    if (size == 0)
      throw std::invalid_argument(std::string("KVCache: ") + name + " must be at least 1");
  // Allocated once, at its largest: a decoding step never allocates cache memory.
  keys_ = xt::zeros<float>({batch, n_kv_heads, max_len, d_head});
  values_ = xt::zeros<float>({batch, n_kv_heads, max_len, d_head});
  lengths_.assign(batch, 0);
}

// k, v: (B, H_kv, T, d_head), written at rows length(b) … length(b) + T − 1
void KVCache::append(const Tensor4& k, const Tensor4& v) {
  const std::string where = "KVCache::append: ";
  const std::size_t T = k.shape(2);
  const std::string expected =
      "(" + str(batch()) + ", " + str(n_kv_heads()) + ", T, " + str(d_head()) + ")";
  if (k.shape(0) != batch() || k.shape(1) != n_kv_heads() || k.shape(3) != d_head())
    throw std::invalid_argument(where + "k is " + shape_of(k) + " but the cache holds " + expected +
                                " = (batch, n_kv_heads, T, d_head)");
  if (v.shape() != k.shape())
    throw std::invalid_argument(where + "k is " + shape_of(k) + " but v is " + shape_of(v));
  // 1. Every sequence must have room before anything is written: a half-done append would leave
  //    the sequences out of step.
  for (std::size_t b = 0; b < batch(); ++b)
    if (lengths_[b] + T > max_len())
      throw std::invalid_argument(where + "sequence " + str(b) + " has length " + str(lengths_[b]) +
                                  "; " + str(T) + " more tokens would make " +
                                  str(lengths_[b] + T) + ", past max_len " + str(max_len()));
  // 2. Write each sequence's new rows after the ones it holds.
  for (std::size_t b = 0; b < batch(); ++b) {
    auto rows = xt::range(lengths_[b], lengths_[b] + T);
    xt::view(keys_, b, xt::all(), rows) = xt::view(k, b);
    xt::view(values_, b, xt::all(), rows) = xt::view(v, b);
    lengths_[b] += T;
  }
}

void KVCache::truncate(std::size_t b, std::size_t length) {
  if (b >= batch())
    throw std::invalid_argument("KVCache::truncate: sequence " + str(b) + " but batch is " +
                                str(batch()));
  if (length > lengths_[b])
    throw std::invalid_argument("KVCache::truncate: length " + str(length) +
                                " is more than sequence " + str(b) + "'s length " +
                                str(lengths_[b]));
  lengths_[b] = length;  // the rows past it are stale, and the next append overwrites them
}

// w_q, w_o: (d_model, d_model); w_k, w_v: (d_model, n_kv_heads · d_head)
GroupedQueryAttention::GroupedQueryAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                                             std::size_t n_heads, std::size_t n_kv_heads,
                                             std::optional<RotaryPositionalEmbedding> rope)
    : w_q_(std::move(w_q)),
      w_k_(std::move(w_k)),
      w_v_(std::move(w_v)),
      w_o_(std::move(w_o)),
      n_heads_(n_heads),
      n_kv_heads_(n_kv_heads),
      rope_(std::move(rope)) {
  const std::string where = "GroupedQueryAttention: ";
  const std::size_t d_model = w_q_.shape(0);
  if (w_q_.shape(1) != d_model)
    throw std::invalid_argument(where + "w_q is " + shape_of(w_q_) + " but must be square");
  if (n_heads == 0 || d_model % n_heads != 0)
    throw std::invalid_argument(where + "n_heads " + str(n_heads) +
                                " must be at least 1 and divide d_model " + str(d_model));
  if (n_kv_heads == 0 || n_heads % n_kv_heads != 0)
    throw std::invalid_argument(where + "n_kv_heads " + str(n_kv_heads) +
                                " must be at least 1 and divide n_heads " + str(n_heads));
  const std::size_t d_head = d_model / n_heads, kv_width = n_kv_heads * d_head;
  for (const auto& [name, w, cols] :
       {std::tuple{"w_k", &w_k_, kv_width}, {"w_v", &w_v_, kv_width}, {"w_o", &w_o_, d_model}})
    if (w->shape(0) != d_model || w->shape(1) != cols)
      throw std::invalid_argument(where + name + " is " + shape_of(*w) + " but must be (" +
                                  str(d_model) + ", " + str(cols) + ") for d_model " +
                                  str(d_model) + ", " + str(n_kv_heads) + " kv heads of width " +
                                  str(d_head));
  if (rope_ && rope_->d_head() != d_head)
    throw std::invalid_argument(where + "rope.d_head() is " + str(rope_->d_head()) +
                                " but d_model / n_heads is " + str(d_head));
}

// ---- Block B: one step --------------------------------------------------------------------------

std::size_t GroupedQueryAttention::kv_head(std::size_t h) const {
  return h / (n_heads_ / n_kv_heads_);  // consecutive query heads share, as repeat_interleave
}

// x: (B, H, T, d_head), positions: (B, T) -> (B, H, T, d_head)
Tensor4 RotaryPositionalEmbedding::apply(const Tensor4& x, const BatchPositions& positions) const {
  if (positions.shape(0) != x.shape(0) || positions.shape(1) != x.shape(2))
    throw std::invalid_argument("RotaryPositionalEmbedding::apply: x is " + shape_of(x) +
                                " but positions is " + shape_of(positions) +
                                "; it must be (B, T) = (" + str(x.shape(0)) + ", " +
                                str(x.shape(2)) + ")");
  Tensor4 rotated(x.shape());
  // Sequence b, every head, at row b of the positions: the 4-D case of lab 05 per sequence.
  for (std::size_t b = 0; b < x.shape(0); ++b) {
    const Positions row = xt::view(positions, b);
    xt::view(rotated, xt::range(b, b + 1)) = apply(Tensor4(xt::view(x, xt::range(b, b + 1))), row);
  }
  return rotated;
}

// x: (B, T, d_model), positions: (B, T) -> (B, T, d_model); appends T tokens to every sequence
Tensor3 GroupedQueryAttention::forward_step(const Tensor3& x, const BatchPositions& positions,
                                            KVCache& cache) const {
  const std::string where = "GroupedQueryAttention::forward_step: ";
  check_tokens(where, x, positions, d_model());
  if (cache.batch() != x.shape(0) || cache.n_kv_heads() != n_kv_heads_ ||
      cache.d_head() != d_head())
    throw std::invalid_argument(
        where + "x is " + shape_of(x) + " but the cache is " + shape_of(cache.keys()) +
        "; it must be (B, n_kv_heads, max_len, d_head) = (" + str(x.shape(0)) + ", " +
        str(n_kv_heads_) + ", max_len, " + str(d_head()) + ")");
  const std::size_t B = x.shape(0), T = x.shape(1);

  // 1-2. Project only the new tokens, split heads, rotate q and k at their positions.
  const auto [q, k, v] = project_heads(*this, x, positions);

  // 3. Append to the cache (which checks that every sequence has room).
  const std::vector<std::size_t> before = cache.lengths();
  cache.append(k, v);

  // 4. Attend: new token t of sequence b sees cache rows 0 … before[b] + t, with lab 07's kernel
  //    on views of the cache, so that nothing is copied per step.
  Tensor3 context = Tensor3::from_shape({B, T, d_model()});  // heads merged, as merge_heads does
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t S = before[b] + T;  // the keys sequence b sees
    TiledOptions options;
    Tensor2 mask;  // (T, S), only for a chunk that follows cached tokens
    if (T > 1 && before[b] == 0) {
      options.causal = true;  // a prompt: plain causal attention, tiles above the diagonal skipped
    } else if (T > 1) {
      mask = xt::zeros<float>({T, S});
      for (std::size_t t = 0; t < T; ++t)
        std::fill(mask.data() + t * S + before[b] + t + 1, mask.data() + (t + 1) * S,
                  kMaskedScore);  // row t: the keys after its own position
      options.mask = &mask;
    }  // T = 1: a single new token sees every cached token, itself included
    for (std::size_t h = 0; h < n_heads_; ++h) {
      const std::size_t g = kv_head(h);
      float* out = context.data() + b * T * d_model() + h * d_head();
      tiled_attention(head_of(q, b, h, T), head_of(cache.keys(), b, g, S),
                      head_of(cache.values(), b, g, S), {out, T, d_head(), d_model()}, options);
    }
  }

  // 5. Mix the heads with W_O.
  return project(context, w_o_);  // (B, T, d_model)
}

// ---- Block C: the whole sequence at once --------------------------------------------------------

// kv: (B, H_kv, S, d_head) -> (B, H_kv · n_rep, S, d_head)
Tensor4 repeat_kv(const Tensor4& kv, std::size_t n_rep) {
  if (n_rep == 0) throw std::invalid_argument("repeat_kv: n_rep must be at least 1");
  const std::size_t B = kv.shape(0), H_kv = kv.shape(1);
  Tensor4 repeated = Tensor4::from_shape({B, H_kv * n_rep, kv.shape(2), kv.shape(3)});
  for (std::size_t h = 0; h < H_kv * n_rep; ++h)
    xt::view(repeated, xt::all(), h) = xt::view(kv, xt::all(), h / n_rep);
  return repeated;
}

// x: (B, T, d_model), positions: (B, T) -> (B, T, d_model)
Tensor3 GroupedQueryAttention::forward(const Tensor3& x, const BatchPositions& positions) const {
  check_tokens("GroupedQueryAttention::forward: ", x, positions, d_model());
  const std::size_t B = x.shape(0), T = x.shape(1);

  // 1-2. Project every token, split heads, rotate q and k.
  const auto [q, kv_k, kv_v] = project_heads(*this, x, positions);

  // 3. Give every query head its own copy of its key/value head: now it is lab 01's layout.
  const std::size_t n_rep = n_heads_ / n_kv_heads_;
  const Tensor4 k = repeat_kv(kv_k, n_rep);  // (B, H, T, d_head)
  const Tensor4 v = repeat_kv(kv_v, n_rep);  // (B, H, T, d_head)

  // 4. Causal attention per head (lab 07's kernel), 5. merge heads, 6. W_O.
  Tensor4 context = Tensor4::from_shape({B, n_heads_, T, d_head()});
  TiledOptions causal;
  causal.causal = true;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < n_heads_; ++h) {
      float* out = context.data() + (b * n_heads_ + h) * T * d_head();
      tiled_attention(head_of(q, b, h, T), head_of(k, b, h, T), head_of(v, b, h, T),
                      {out, T, d_head(), d_head()}, causal);
    }
  return project(merge_heads(context), w_o_);  // (B, T, d_model)
}

}  // namespace minimodel
