// Lab 08: the KV cache, one decoding step, and grouped-query attention.
// Read labs/08-kv-cache.md first. The API and its shapes are in kv_cache.hpp.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/attention/kv_cache.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: what is stored --------------------------------------------------------------------

// -> keys_, values_: (batch, n_kv_heads, max_len, d_head), lengths_: (batch)
KVCache::KVCache(std::size_t batch, std::size_t n_kv_heads, std::size_t max_len,
                 std::size_t d_head) {
  // TODO(lab 08, Block A): check the sizes, then allocate zero-filled keys and values and an
  // empty length per sequence — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block A): check the sizes, then allocate zero-filled keys and values and an "
      "empty length per sequence — see labs/08-kv-cache.md");
}

// k, v: (B, H_kv, T, d_head), written at rows length(b) … length(b) + T − 1
void KVCache::append(const Tensor4& k, const Tensor4& v) {
  // TODO(lab 08, Block A): check k and v and that every sequence has room, then write each
  // sequence's new rows after the ones it holds — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block A): check k and v and that every sequence has room, then write each "
      "sequence's new rows after the ones it holds — see labs/08-kv-cache.md");
}

void KVCache::truncate(std::size_t b, std::size_t length) {
  // TODO(lab 08, Block A): check b and length, then keep only the first length tokens of
  // sequence b — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block A): check b and length, then keep only the first length tokens of "
      "sequence b — see labs/08-kv-cache.md");
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
  // TODO(lab 08, Block A): check n_heads, n_kv_heads, the four weights' shapes and rope's
  // d_head — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block A): check n_heads, n_kv_heads, the four weights' shapes and rope's "
      "d_head — see labs/08-kv-cache.md");
}

// ---- Block B: one step --------------------------------------------------------------------------

std::size_t GroupedQueryAttention::kv_head(std::size_t h) const {
  // TODO(lab 08, Block B): return the key/value head that query head h reads — see
  // labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block B): return the key/value head that query head h reads — see "
      "labs/08-kv-cache.md");
}

// x: (B, H, T, d_head), positions: (B, T) -> (B, H, T, d_head)
Tensor4 RotaryPositionalEmbedding::apply(const Tensor4& x, const BatchPositions& positions) const {
  // TODO(lab 08, Block B): check positions, then rotate sequence b with lab 05's apply at row b
  // of positions — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block B): check positions, then rotate sequence b with lab 05's apply at row "
      "b of positions — see labs/08-kv-cache.md");
}

// x: (B, T, d_model), positions: (B, T) -> (B, T, d_model); appends T tokens to every sequence
Tensor3 GroupedQueryAttention::forward_step(const Tensor3& x, const BatchPositions& positions,
                                            KVCache& cache) const {
  // TODO(lab 08, Block B): implement forward_step (check, project the new tokens, rotate q and k,
  // append k and v, attend each new token to its cached tokens, W_O) — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block B): implement forward_step (check, project the new tokens, rotate q and "
      "k, append k and v, attend each new token to its cached tokens, W_O) — see "
      "labs/08-kv-cache.md");
}

// ---- Block C: the whole sequence at once --------------------------------------------------------

// kv: (B, H_kv, S, d_head) -> (B, H_kv · n_rep, S, d_head)
Tensor4 repeat_kv(const Tensor4& kv, std::size_t n_rep) {
  // TODO(lab 08, Block C): check n_rep, then copy key/value head h / n_rep into head h — see
  // labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block C): check n_rep, then copy key/value head h / n_rep into head h — see "
      "labs/08-kv-cache.md");
}

// x: (B, T, d_model), positions: (B, T) -> (B, T, d_model)
Tensor3 GroupedQueryAttention::forward(const Tensor3& x, const BatchPositions& positions) const {
  // TODO(lab 08, Block C): implement forward (check, project, rotate, repeat_kv, causal attention
  // per head, merge heads, W_O) — see labs/08-kv-cache.md
  throw Todo(
      "TODO(lab 08, Block C): implement forward (check, project, rotate, repeat_kv, causal "
      "attention per head, merge heads, W_O) — see labs/08-kv-cache.md");
}

}  // namespace minimodel
