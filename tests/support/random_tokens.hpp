#pragma once
// Random token vectors for the lab tests.
#include <cstddef>

#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

namespace minimodel::testing {

/// (B, T, d_model) draws from N(0, 1), reproducible for a given seed.
inline xt::xtensor<float, 3> random_tokens(std::size_t B, std::size_t T, std::size_t d_model,
                                           int seed) {
  xt::random::seed(seed);
  return xt::random::randn<float>({B, T, d_model});
}

}  // namespace minimodel::testing
