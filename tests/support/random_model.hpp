#pragma once
// A model of lab 10 with random parameters, for the tests of checkpoints and of `workbook
// generate`, which do not link a lab 10 implementation (init_model is lab 10's own, seeded rule).
#include <cmath>
#include <cstdint>

#include <xtensor/xrandom.hpp>

#include "minimodel/model/tiny_transformer.hpp"

namespace minimodel::testing {

/// Every tensor of a model of `config` from N(0, 1 / d_model), reproducible for a given seed.
inline ModelParams<float> random_model(const ModelConfig& config, std::uint64_t seed) {
  const std::size_t d = config.d_model;
  xt::random::seed(seed);
  const float scale = 1.0f / std::sqrt(float(d));
  const auto draw = [&](std::size_t rows, std::size_t cols) {
    return Matrix<float>(scale * xt::random::randn<float>({rows, cols}));
  };
  ModelParams<float> params{
      draw(config.vocab, d), draw(config.max_len, d), {}, draw(d, config.vocab)};
  for (std::size_t l = 0; l < config.n_layers; ++l)
    params.layers.push_back({draw(d, d), draw(d, d), draw(d, d), draw(d, d)});
  return params;
}

}  // namespace minimodel::testing
