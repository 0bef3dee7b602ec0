#include "generate/greedy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention_block.hpp"
#include "minimodel/shapes.hpp"

namespace workbench {

using minimodel::shape_of;
using minimodel::Tensor1;
using minimodel::Tensor2;
using minimodel::Tensor3;

CachedModel::CachedModel(const minimodel::ModelConfig& config,
                         const minimodel::ModelParams<float>& params)
    : config_(config),
      embedding_(params.embedding),
      positions_(params.positions),
      unembedding_(params.unembedding) {
  const std::size_t V = config.vocab, d = config.d_model;
  if (embedding_.shape(0) != V || embedding_.shape(1) != d ||
      positions_.shape(0) != config.max_len || positions_.shape(1) != d ||
      unembedding_.shape(0) != d || unembedding_.shape(1) != V ||
      params.layers.size() != config.n_layers)
    throw std::invalid_argument(
        "CachedModel: the embedding is " + shape_of(embedding_) + ", the position table " +
        shape_of(positions_) + ", the unembedding " + shape_of(unembedding_) + " and there are " +
        std::to_string(params.layers.size()) + " layers, but the config has vocab " +
        std::to_string(V) + ", max_len " + std::to_string(config.max_len) + ", d_model " +
        std::to_string(d) + " and " + std::to_string(config.n_layers) + " layers");
  for (const minimodel::AttentionWeights<float>& w : params.layers) {
    // One key/value head per query head: lab 01's layer, run through the cache.
    layers_.emplace_back(w.w_q, w.w_k, w.w_v, w.w_o, config.n_heads, config.n_heads);
    caches_.push_back(layers_.back().make_cache(1, config.max_len));
  }
}

namespace {

// LayerNorm squares each row's deviations from its mean and sums d of them: past
// sqrt(FLT_MAX / d) that sum is infinite, and the row silently normalises to zeros.
// h: (1, T, d_model)
void check_normalizable(const Tensor3& h, const std::string& where) {
  const std::size_t T = h.shape(1), d = h.shape(2);
  const double limit = std::sqrt(double(std::numeric_limits<float>::max()) / double(d));
  for (std::size_t t = 0; t < T; ++t) {
    double mean = 0.0, deviation = 0.0;
    for (std::size_t i = 0; i < d; ++i) mean += double(h(0, t, i)) / double(d);
    for (std::size_t i = 0; i < d; ++i)
      deviation = std::max(deviation, std::fabs(double(h(0, t, i)) - mean));
    if (!(deviation <= limit)) {  // also a NaN
      std::ostringstream text;
      text << std::setprecision(2) << where
           << " overflows float32: a row's deviation from its mean "
           << "reaches " << deviation << ", and LayerNorm squares it (float32 stops at 3.4e+38)";
      throw Float32Overflow(text.str());
    }
  }
}

}  // namespace

// tokens: T new tokens -> logits (V) after the last.
Tensor1 CachedModel::feed(const std::vector<std::size_t>& tokens) {
  const std::size_t T = tokens.size(), d = config_.d_model;
  if (T == 0) throw std::invalid_argument("CachedModel::feed: no tokens");
  if (length_ + T > config_.max_len)
    throw std::invalid_argument("CachedModel::feed: " + std::to_string(T) + " tokens after " +
                                std::to_string(length_) + " would pass max_len " +
                                std::to_string(config_.max_len));
  for (const std::size_t token : tokens)
    if (token >= config_.vocab)
      throw std::invalid_argument("CachedModel::feed: token " + std::to_string(token) +
                                  " but the vocabulary has " + std::to_string(config_.vocab));

  // 1. Embed: token row plus position row, at the positions that follow the cached ones.
  Tensor3 h({1, T, d});                         // (1, T, d_model)
  minimodel::BatchPositions positions({1, T});  // (1, T)
  for (std::size_t t = 0; t < T; ++t) {
    xt::view(h, 0, t) = xt::view(embedding_, tokens[t]) + xt::view(positions_, length_ + t);
    positions(0, t) = static_cast<std::int64_t>(length_ + t);
  }
  // 2. Each layer: h = h + attention(layer_norm(h)), the new rows attending to the cached ones.
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    check_normalizable(h, "layer " + std::to_string(l) + "'s LayerNorm input");
    h = minimodel::attention_block(h, minimodel::Norm::pre_ln, [&](const Tensor3& normalized) {
      return layers_[l].forward_step(normalized, positions, caches_[l]);
    });
  }
  length_ += T;
  // 3. The final layer_norm and the unembedding, for the last position only.
  Tensor3 last = xt::view(h, xt::all(), xt::range(T - 1, T), xt::all());  // (1, 1, d_model)
  check_normalizable(last, "the final LayerNorm's input");
  const Tensor3 normalized = minimodel::layer_norm(last);
  const Tensor2 row = xt::view(normalized, 0);                // (1, d_model)
  const Tensor2 logits = xt::linalg::dot(row, unembedding_);  // (1, V)
  return xt::view(logits, 0);
}

std::size_t argmax(const Tensor1& logits) {
  if (logits.size() == 0) throw std::invalid_argument("argmax: no logits");
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits(i) > logits(best)) best = i;  // strictly greater: a tie keeps the lower id
  return best;
}

std::vector<std::size_t> greedy_generate(const minimodel::ModelConfig& config,
                                         const minimodel::ModelParams<float>& params,
                                         const std::vector<std::size_t>& prompt,
                                         std::size_t count) {
  if (prompt.empty()) throw std::invalid_argument("greedy_generate: the prompt is empty");
  if (prompt.size() + count > config.max_len)
    throw std::invalid_argument("greedy_generate: a prompt of " + std::to_string(prompt.size()) +
                                " tokens and " + std::to_string(count) +
                                " more would pass max_len " + std::to_string(config.max_len));
  std::vector<std::size_t> generated;
  if (count == 0) return generated;
  CachedModel model(config, params);
  // One step: feed, then the argmax of logits that are all finite (every comparison with a NaN is
  // false: argmax would choose token 0).
  const auto step = [&](const std::vector<std::size_t>& tokens) {
    const std::string at = "the model's logits at step " + std::to_string(generated.size() + 1);
    Tensor1 logits;
    try {
      logits = model.feed(tokens);
    } catch (const Float32Overflow& e) {
      throw Float32Overflow(at + " cannot be computed: " + e.what());
    }
    for (std::size_t i = 0; i < logits.size(); ++i)
      if (!std::isfinite(logits(i))) {
        std::ostringstream value;
        value << logits(i);
        throw Float32Overflow(at + " are not finite (" + value.str() + " for token " +
                              std::to_string(i) + ")");
      }
    return argmax(logits);
  };
  generated.push_back(step(prompt));
  // The last token is never fed: nothing follows it.
  while (generated.size() < count) generated.push_back(step({generated.back()}));
  return generated;
}

}  // namespace workbench
