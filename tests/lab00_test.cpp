// Lab 00: softmax and single-head attention, checked against the hand-derived toy and invariants.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>

#include "minimodel/attention/attention.hpp"
#include "support/checks.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::throws_invalid_argument;

// float32 arithmetic on O(1) numbers: a few ulps (1.2e-7 each) of error, far below 1e-5.
constexpr double kTolerance = 1e-5;

// The lab 00 toy: X = I, W_Q = I, W_K = [[0, 1], [1, 0]], W_V = diag(2, 3).
struct HandExample {
  Tensor2 q = {{1, 0}, {0, 1}};  // X W_Q
  Tensor2 k = {{0, 1}, {1, 0}};  // X W_K
  Tensor2 v = {{2, 0}, {0, 3}};  // X W_V
  // On paper: scores = Q Kᵀ / sqrt(2) = [[0, s], [s, 0]] with s = 1/sqrt(2), so each row's
  // softmax is (1 - p, p) or (p, 1 - p) with p = e^s / (1 + e^s).
  double s = 1.0 / std::sqrt(2.0);
  double p = std::exp(s) / (1.0 + std::exp(s));
};

TEST(Softmax, MatchesTheHandExample) {
  HandExample hand;
  const Tensor2 scaled = {{0.0f, static_cast<float>(hand.s)}, {static_cast<float>(hand.s), 0.0f}};
  const xt::xarray<double> expected = {{1 - hand.p, hand.p}, {hand.p, 1 - hand.p}};
  EXPECT_TRUE(all_close(softmax(scaled), expected, kTolerance));
}

TEST(Softmax, EveryRowSumsToOne) {
  xt::random::seed(7);
  const Tensor2 scores = xt::random::randn<float>({6, 9}) * 4.0f;
  const Tensor2 weights = softmax(scores);
  EXPECT_TRUE(all_close(xt::sum(weights, {1}), xt::ones<float>({6}), kTolerance));
  EXPECT_GE(xt::amin(weights)(), 0.0f);
}

TEST(Softmax, IsStableForLargeLogits) {
  // exp(1000) overflows float32; subtracting the row max first keeps every exp() <= 1.
  const Tensor2 scores = {{1000.0f, 1001.0f, 999.0f}, {-1000.0f, -1001.0f, -999.0f}};
  const double e1 = std::exp(1.0), e2 = std::exp(2.0);
  const xt::xarray<double> expected = {{e1 / (1 + e1 + e2), e2 / (1 + e1 + e2), 1 / (1 + e1 + e2)},
                                       {e1 / (1 + e1 + e2), 1 / (1 + e1 + e2), e2 / (1 + e1 + e2)}};
  EXPECT_TRUE(all_close(softmax(scores), expected, kTolerance));
}

TEST(Softmax, IgnoresAConstantAddedToARow) {
  const Tensor2 scores = {{0.5f, -1.0f, 2.0f}};
  EXPECT_TRUE(all_close(softmax(scores + 30.0f), softmax(scores), kTolerance));
}

TEST(SingleHeadAttention, MatchesTheHandExample) {
  HandExample hand;
  const AttentionResult result = single_head_attention(hand.q, hand.k, hand.v);
  const xt::xarray<double> weights = {{1 - hand.p, hand.p}, {hand.p, 1 - hand.p}};
  const xt::xarray<double> output = {{2 * (1 - hand.p), 3 * hand.p},
                                     {2 * hand.p, 3 * (1 - hand.p)}};
  EXPECT_TRUE(all_close(result.weights, weights, kTolerance));
  EXPECT_TRUE(all_close(result.output, output, kTolerance));
}

TEST(SingleHeadAttention, MatchesAnExplicitComputationWithUnequalSizes) {
  // T, S, d_head and d_v all differ, so dividing by the wrong size or adding the mask after the
  // scaling's place cannot pass by accident as it can on the 2 x 2 toy.
  const std::size_t T = 3, S = 5, d_head = 4, d_v = 2;
  xt::random::seed(3);
  const Tensor2 q = xt::random::randn<float>({T, d_head}),
                k = xt::random::randn<float>({S, d_head});
  const Tensor2 v = xt::random::randn<float>({S, d_v});
  Tensor2 mask = xt::zeros<float>({T, S});
  mask(0, 4) = mask(2, 1) = kMaskedScore;
  mask(1, 2) = -1.5f;  // a soft mask is added, not just tested for "masked"

  xt::xarray<double> weights = xt::zeros<double>({T, S}), output = xt::zeros<double>({T, d_v});
  for (std::size_t i = 0; i < T; ++i) {
    double total = 0.0;
    for (std::size_t j = 0; j < S; ++j) {
      double score = 0.0;
      for (std::size_t c = 0; c < d_head; ++c) score += double(q(i, c)) * double(k(j, c));
      weights(i, j) = std::exp(score / std::sqrt(double(d_head)) + double(mask(i, j)));
      total += weights(i, j);
    }
    for (std::size_t j = 0; j < S; ++j) {
      weights(i, j) /= total;
      for (std::size_t c = 0; c < d_v; ++c) output(i, c) += weights(i, j) * double(v(j, c));
    }
  }
  const AttentionResult result = single_head_attention(q, k, v, mask);
  EXPECT_TRUE(all_close(result.weights, weights, kTolerance));
  EXPECT_TRUE(all_close(result.output, output, kTolerance));
}

TEST(SingleHeadAttention, HasTheDocumentedShapes) {
  xt::random::seed(1);
  const Tensor2 q = xt::random::randn<float>({3, 4});  // T = 3, d_head = 4
  const Tensor2 k = xt::random::randn<float>({5, 4});  // S = 5
  const Tensor2 v = xt::random::randn<float>({5, 6});  // d_v = 6
  const AttentionResult result = single_head_attention(q, k, v);
  EXPECT_EQ(result.output.shape(), (std::array<std::size_t, 2>{3, 6}));
  EXPECT_EQ(result.weights.shape(), (std::array<std::size_t, 2>{3, 5}));
}

TEST(SingleHeadAttention, EveryWeightRowSumsToOne) {
  xt::random::seed(2);
  const Tensor2 q = xt::random::randn<float>({4, 8}) * 3.0f;
  const Tensor2 k = xt::random::randn<float>({7, 8}) * 3.0f;
  const Tensor2 v = xt::random::randn<float>({7, 2});
  const AttentionResult result = single_head_attention(q, k, v);
  EXPECT_TRUE(all_close(xt::sum(result.weights, {1}), xt::ones<float>({4}), kTolerance));
}

TEST(SingleHeadAttention, MaskedKeysGetZeroWeight) {
  HandExample hand;
  // Row 0 may only see key 0, row 1 sees both.
  const Tensor2 mask = {{0.0f, kMaskedScore}, {0.0f, 0.0f}};
  const AttentionResult result = single_head_attention(hand.q, hand.k, hand.v, mask);
  EXPECT_EQ(result.weights(0, 1), 0.0f);
  EXPECT_NEAR(result.weights(0, 0), 1.0f, kTolerance);
  const xt::xarray<double> output = {{2, 0}, {2 * hand.p, 3 * (1 - hand.p)}};
  EXPECT_TRUE(all_close(result.output, output, kTolerance));
}

TEST(SingleHeadAttention, RejectsQueriesAndKeysOfDifferentWidth) {
  const Tensor2 q = xt::zeros<float>({5, 8}), k = xt::zeros<float>({5, 4}),
                v = xt::zeros<float>({5, 4});
  EXPECT_TRUE(
      throws_invalid_argument([&] { single_head_attention(q, k, v); }, {"(5, 8)", "(5, 4)"}));
}

TEST(SingleHeadAttention, RejectsKeysAndValuesOfDifferentLength) {
  const Tensor2 q = xt::zeros<float>({2, 4}), k = xt::zeros<float>({5, 4}),
                v = xt::zeros<float>({6, 4});
  EXPECT_TRUE(
      throws_invalid_argument([&] { single_head_attention(q, k, v); }, {"(5, 4)", "(6, 4)"}));
}

TEST(SingleHeadAttention, RejectsAMaskOfTheWrongShape) {
  const Tensor2 q = xt::zeros<float>({2, 4}), k = xt::zeros<float>({3, 4}),
                v = xt::zeros<float>({3, 4});
  const Tensor2 mask = xt::zeros<float>({3, 2});
  EXPECT_TRUE(
      throws_invalid_argument([&] { single_head_attention(q, k, v, mask); }, {"(3, 2)", "(2, 3)"}));
}

}  // namespace
}  // namespace minimodel
