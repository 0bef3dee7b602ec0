#pragma once
// The API of lab 08: generating one token at a time. A KV cache keeps the keys and values of every
// token a sequence has seen; forward_step projects only the new tokens and attends to the cache;
// grouped-query attention lets n_heads / n_kv_heads query heads share one key/value head, which
// shrinks the cache by that factor. Locked by the "Lab 08" section of BLUEPRINT.md beside this
// file.
//
// Shape names: B batch, T new tokens in a step, S tokens a sequence has cached, T_max the cache's
// capacity, H query heads, H_kv key/value heads, d_model model width, d_head = d_model / H.
#include <cstddef>
#include <optional>
#include <vector>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"

namespace minimodel {

// ---- Block A: what is stored --------------------------------------------------------------------

/// The keys (after RoPE) and values of every token each sequence has seen, for one layer.
class KVCache {
 public:
  /// Block A. Allocates zero-filled keys and values, each (batch, n_kv_heads, max_len, d_head),
  /// once; every sequence starts empty.
  /// @throws std::invalid_argument if a size is 0, naming it.
  KVCache(std::size_t batch, std::size_t n_kv_heads, std::size_t max_len, std::size_t d_head);

  /// Block A. k, v: (B, H_kv, T, d_head). Writes token t of sequence b at row length(b) + t, then
  /// advances every sequence's length by T.
  /// @throws std::invalid_argument if k or v is not (batch, n_kv_heads, T, d_head) with the same
  ///         T, or a sequence would hold more than max_len tokens (the message names the sequence,
  ///         its length, T and max_len); nothing is written then.
  void append(const Tensor4& k, const Tensor4& v);

  /// Block A. Keeps only the first `length` tokens of sequence b: a rollback, and with 0 a free
  /// slot for a new sequence. The rows past `length` are overwritten by the next append.
  /// @throws std::invalid_argument if b >= batch or length > length(b).
  void truncate(std::size_t b, std::size_t length);

  /// The number of tokens sequence b holds; rows 0 … length(b) − 1 of its keys and values.
  std::size_t length(std::size_t b) const { return lengths_.at(b); }
  const std::vector<std::size_t>& lengths() const { return lengths_; }

  /// (batch, n_kv_heads, max_len, d_head); rows at and past length(b) of sequence b are unused.
  const Tensor4& keys() const { return keys_; }
  const Tensor4& values() const { return values_; }

  std::size_t batch() const { return keys_.shape(0); }
  std::size_t n_kv_heads() const { return keys_.shape(1); }
  std::size_t max_len() const { return keys_.shape(2); }
  std::size_t d_head() const { return keys_.shape(3); }
  /// What the keys and values occupy: 2 · batch · n_kv_heads · max_len · d_head · sizeof(float).
  std::size_t bytes() const { return 2 * keys_.size() * sizeof(float); }

 private:
  Tensor4 keys_, values_;             // (batch, n_kv_heads, max_len, d_head)
  std::vector<std::size_t> lengths_;  // (batch): tokens held per sequence
};

/// Block A. A decoder's causal self-attention with n_kv_heads key/value heads shared by n_heads
/// query heads, and RoPE (lab 05) on queries and keys if given. n_kv_heads = n_heads is lab 01's
/// layer with lab 02's mask; n_kv_heads = 1 is multi-query attention.
class GroupedQueryAttention {
 public:
  /// Block A. w_q, w_o: (d_model, d_model); w_k, w_v: (d_model, n_kv_heads · d_head), applied as
  /// x @ W: column block g of w_k and w_v is key/value head g.
  /// @throws std::invalid_argument if w_q is not square, n_heads is 0 or does not divide d_model,
  ///         n_kv_heads is 0 or does not divide n_heads, another weight has the wrong shape (the
  ///         message names it and the shape expected), or rope's d_head is not d_head.
  GroupedQueryAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o, std::size_t n_heads,
                        std::size_t n_kv_heads,
                        std::optional<RotaryPositionalEmbedding> rope = std::nullopt);

  /// Block B. The key/value head that query head h reads: h / (n_heads / n_kv_heads).
  std::size_t kv_head(std::size_t h) const;

  /// Block B. One step for every sequence of the batch. x: (B, T, d_model) holds each sequence's
  /// T new tokens (the prompt when prefilling, one token when generating), positions: (B, T)
  /// their absolute positions. Projects them, rotates q and k at their positions, appends k and v
  /// to the cache, and attends each new token to its sequence's cached tokens up to and
  /// including itself (the chunk is causal within itself). -> (B, T, d_model).
  /// @throws std::invalid_argument if x is not (cache.batch(), T, d_model), positions is not
  ///         (B, T), the cache does not have this layer's n_kv_heads and d_head, a sequence would
  ///         pass cache.max_len() (nothing is appended then), or a position lies outside the RoPE
  ///         tables; the message names the shapes.
  Tensor3 forward_step(const Tensor3& x, const BatchPositions& positions, KVCache& cache) const;

  /// Block C. The whole sequences at once, causally, with no cache: projects, rotates, repeats
  /// each key/value head for its query heads (repeat_kv) and attends per head. The plain
  /// definition that forward_step must reproduce. x: (B, T, d_model), positions: (B, T)
  /// -> (B, T, d_model).
  /// @throws std::invalid_argument as forward_step, for x and positions.
  Tensor3 forward(const Tensor3& x, const BatchPositions& positions) const;

  /// An empty cache for this layer: (batch, n_kv_heads, max_len, d_head).
  KVCache make_cache(std::size_t batch, std::size_t max_len) const {
    return KVCache(batch, n_kv_heads_, max_len, d_head());
  }

  std::size_t d_model() const { return w_q_.shape(0); }
  std::size_t n_heads() const { return n_heads_; }
  std::size_t n_kv_heads() const { return n_kv_heads_; }
  std::size_t d_head() const { return d_model() / n_heads_; }
  const Tensor2& w_q() const { return w_q_; }
  const Tensor2& w_k() const { return w_k_; }
  const Tensor2& w_v() const { return w_v_; }
  const Tensor2& w_o() const { return w_o_; }
  const std::optional<RotaryPositionalEmbedding>& rope() const { return rope_; }

 private:
  Tensor2 w_q_, w_k_, w_v_,
      w_o_;  // (d_model, d_model), (d_model, H_kv · d_head) ×2, (d_model, d_model)
  std::size_t n_heads_ = 0, n_kv_heads_ = 0;
  std::optional<RotaryPositionalEmbedding> rope_;
};

// ---- Block C: the whole sequence at once --------------------------------------------------------

/// Block C. kv: (B, H_kv, S, d_head) -> (B, H_kv · n_rep, S, d_head), head h being head
/// h / n_rep of kv: torch.repeat_interleave(kv, n_rep, dim=1), LLaMA's repeat_kv.
/// @throws std::invalid_argument if n_rep is 0.
Tensor4 repeat_kv(const Tensor4& kv, std::size_t n_rep);

}  // namespace minimodel
