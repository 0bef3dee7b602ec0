#pragma once
// Greedy decoding of lab 10's model through lab 08's KV cache: the decoder behind
// `workbook generate`, compiled once and linked with each implementation. Each layer is lab 08's
// GroupedQueryAttention with one key/value head per query head and no RoPE (the model adds a
// learned position table instead), inside lab 04's pre-LN block; the cache makes each new token
// cost one row of attention instead of a forward over the whole sequence.
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "minimodel/attention/kv_cache.hpp"
#include "minimodel/model/tiny_transformer.hpp"

namespace workbench {

/// Lab 10's model for one sequence, fed a chunk of tokens at a time, each layer keeping its keys
/// and values in a KV cache of max_len tokens.
class CachedModel {
 public:
  /// Copies the parameters into one GroupedQueryAttention and one empty KVCache per layer.
  /// @throws std::invalid_argument if a parameter's shape disagrees with `config`.
  CachedModel(const minimodel::ModelConfig& config, const minimodel::ModelParams<float>& params);

  /// Feeds `tokens` at the next positions, length() … length() + T − 1, and returns the logits
  /// (V) that follow the last of them: what model_forward gives at the last position of the whole
  /// sequence so far. The prompt goes in as one chunk, then one token at a time.
  /// @throws std::invalid_argument if `tokens` is empty, a token is >= V, or the sequence would
  ///         hold more than max_len tokens; nothing is fed then. Float32Overflow if a LayerNorm's
  ///         input is too large to square in float32.
  minimodel::Tensor1 feed(const std::vector<std::size_t>& tokens);

  /// How many tokens the sequence holds.
  std::size_t length() const { return length_; }

 private:
  minimodel::ModelConfig config_;
  minimodel::Tensor2 embedding_, positions_, unembedding_;  // (V, d), (max_len, d), (d, V)
  std::vector<minimodel::GroupedQueryAttention> layers_;
  std::vector<minimodel::KVCache> caches_;  // one per layer, (1, H, max_len, d_head)
  std::size_t length_ = 0;
};

/// The model's numbers overflow float32 (finite but huge weights): a LayerNorm's input is too
/// large to square, or a step's logits hold a NaN or an infinity. Either would silently pick token
/// 0 (LayerNorm turns an infinite variance into a row of zeros, and every comparison with a NaN is
/// false). greedy_generate's message names the step, 1 for the first token generated.
class Float32Overflow : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The index of the largest logit; on a tie, the lowest such index.
/// @throws std::invalid_argument if `logits` is empty.
std::size_t argmax(const minimodel::Tensor1& logits);

/// Continues `prompt` by `count` tokens, each the argmax of the logits after the sequence so far:
/// the prompt is fed as one chunk, then each new token. Returns the `count` new tokens.
/// @throws std::invalid_argument if the prompt is empty, a token is >= V, or prompt + count tokens
///         are more than max_len; Float32Overflow if the model's numbers overflow float32.
std::vector<std::size_t> greedy_generate(const minimodel::ModelConfig& config,
                                         const minimodel::ModelParams<float>& params,
                                         const std::vector<std::size_t>& prompt, std::size_t count);

}  // namespace workbench
