#pragma once
// A model of lab 10 with random parameters, built by hand (no lab 10 implementation needed), for
// the tests of checkpoints and of `workbook generate`.
#include <cmath>
#include <cstdint>
#include <random>

#include "minimodel/model/tiny_transformer.hpp"

namespace minimodel::testing {

/// Every tensor of a model of `config` drawn from N(0, 1) with one std::mt19937_64(seed), in
/// tensors_of's order; the weights and the unembedding scaled by 1 / sqrt(d_model), as lab 10's
/// init_model does. Reproducible for a given seed.
inline ModelParams<float> random_model(const ModelConfig& config, std::uint64_t seed) {
  const std::size_t d = config.d_model;
  ModelParams<float> params;
  params.embedding = Matrix<float>({config.vocab, d});
  params.positions = Matrix<float>({config.max_len, d});
  params.layers.resize(config.n_layers);
  for (AttentionWeights<float>& layer : params.layers)
    layer.w_q = layer.w_k = layer.w_v = layer.w_o = Matrix<float>({d, d});
  params.unembedding = Matrix<float>({d, config.vocab});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (Matrix<float>* tensor : tensors_of(params)) {
    const bool table = tensor == &params.embedding || tensor == &params.positions;
    for (float& value : *tensor) value = table ? normal(rng) : normal(rng) * scale;
  }
  return params;
}

}  // namespace minimodel::testing
