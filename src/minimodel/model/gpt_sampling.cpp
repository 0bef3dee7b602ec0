// Lab 13: a GPT that writes. Block D: sampling with temperature, top-k and top-p, and generation
// one token at a time through a KV cache. Read labs/13-gpt.md first. The API is in
// include/minimodel/model/gpt.hpp.
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "minimodel/model/gpt.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

Vector<float> sampling_distribution(const Vector<float>& logits, const SamplingOptions& options) {
  // TODO(lab 13, Block D): check the options, then softmax at the temperature (0: greedy), keep
  // the top k, then the top-p nucleus, renormalised — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block D): check the options, then softmax at the temperature (0: greedy), keep "
      "the top k, then the top-p nucleus, renormalised — see labs/13-gpt.md");
}

TokenId sample_token(const Vector<float>& logits, const SamplingOptions& options,
                     std::mt19937_64& rng) {
  // TODO(lab 13, Block D): one uniform draw, then the first id whose cumulative probability
  // exceeds it — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block D): one uniform draw, then the first id whose cumulative probability "
      "exceeds it — see labs/13-gpt.md");
}

Vector<float> gpt_decode_step(const GptParams<float>& params, TokenId token, GptKVCache& cache) {
  // TODO(lab 13, Block D): one token at position cache.length through every layer, its keys and
  // values into the cache; return the next token's logits — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block D): one token at position cache.length through every layer, its keys and "
      "values into the cache; return the next token's logits — see labs/13-gpt.md");
}

std::vector<TokenId> generate(const GptParams<float>& params, const std::vector<TokenId>& prompt,
                              std::size_t max_new, const SamplingOptions& options,
                              std::mt19937_64& rng, const std::function<void(TokenId)>& on_token) {
  // TODO(lab 13, Block D): feed the prompt through the cache, then sample and feed max_new
  // tokens, refilling a full cache with the last max_len / 2 tokens — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block D): feed the prompt through the cache, then sample and feed max_new "
      "tokens, refilling a full cache with the last max_len / 2 tokens — see labs/13-gpt.md");
}

}  // namespace minimodel
