// Lab 04: LayerNorm and the attention block (residual + LayerNorm, post-LN and pre-LN), checked
// against invariants first and then against torch (F.layer_norm, nn.MultiheadAttention).
#include <cmath>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention_block.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"

namespace minimodel {
namespace {

using testing::random_tokens;

using testing::all_close;
using testing::Fixture;
using testing::kTorchTolerance;
using testing::throws_invalid_argument;

// Row statistics of a normalised row: a float32 sum of d_model = 16..64 terms of size <= 4 rounds
// to about 1e-6, and eps = 1e-5 pulls the variance var / (var + eps) below 1 by eps / var <= 1e-5
// for the rows used here (var >= 1); 1e-5 for the mean and 2e-5 for the variance bound both.
constexpr double kMeanTolerance = 1e-5;
constexpr double kVarianceTolerance = 2e-5;

// (B, T, d_model) -> (B, T): the mean and the biased variance of every row, in double.
xt::xtensor<double, 2> row_means(const Tensor3& y) {
  const xt::xtensor<double, 3> y64 = xt::cast<double>(y);
  return xt::mean(y64, {2});
}
xt::xtensor<double, 2> row_variances(const Tensor3& y) {
  const xt::xtensor<double, 3> y64 = xt::cast<double>(y);
  const xt::xtensor<double, 3> mean =
      xt::mean(y64, {2}, xt::keep_dims);  // evaluated: a lazy one is wrong in 0.24
  const xt::xtensor<double, 3> centred = y64 - mean;
  return xt::mean(centred * centred, {2});
}

struct BlockWeights {
  Tensor2 w_q, w_k, w_v, w_o;
};

BlockWeights seeded_weights(std::size_t d_model, std::size_t n_heads, std::uint64_t seed) {
  const MultiHeadAttention mha(d_model, n_heads, seed);
  return {mha.w_q(), mha.w_k(), mha.w_v(), mha.w_o()};
}

// ---- Block A: layer_norm -----------------------------------------------------------------------

TEST(LayerNorm, EveryRowHasMeanZeroAndVarianceOne) {
  const Tensor3 x = random_tokens(2, 5, 16, 1) * 3.0f + 2.0f;  // rows of mean ~2, variance ~9
  const Tensor3 y = layer_norm(x);
  ASSERT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(all_close(row_means(y), xt::zeros<double>({2, 5}), kMeanTolerance));
  EXPECT_TRUE(all_close(row_variances(y), xt::ones<double>({2, 5}), kVarianceTolerance));
}

TEST(LayerNorm, AConstantRowBecomesZerosNotNaN) {
  Tensor3 x = random_tokens(1, 3, 16, 2);
  xt::view(x, 0, 1) = 7.0f;  // var = 0; 16 x 7 sums exactly, so x - mean is exactly 0
  const Tensor3 y = layer_norm(x);
  // Exact: 0 / sqrt(0 + eps) is 0 in any correct float arithmetic; all_close also fails on NaN.
  EXPECT_TRUE(all_close(xt::view(y, 0, 1), xt::zeros<float>({16}), 0.0));
  EXPECT_FALSE(xt::any(xt::isnan(y)));
}

TEST(LayerNorm, IgnoresTheShiftAndScaleOfARow) {
  const Tensor3 x = random_tokens(2, 4, 32, 3);
  // eps tiny, so that it does not weigh differently on variances 1 and 25. Rounding 5x + 10 to
  // float32 moves each value by ~5e-7 on a spread of 5, i.e. ~1e-7 after normalising; 1e-5 bounds
  // it.
  const float tiny_eps = 1e-12f;
  EXPECT_TRUE(all_close(layer_norm(x * 5.0f + 10.0f, tiny_eps), layer_norm(x, tiny_eps), 1e-5));
}

TEST(LayerNorm, AddsEpsToTheVarianceUnderTheSquareRoot) {
  // A row of ±0.1 has variance 0.01, as large as this eps: each value becomes 0.1 / sqrt(0.02) =
  // 1/√2, where sqrt(var) + eps would give 0.1 / 0.11 = 0.909. Float32 rounding here is ~1e-7.
  const Tensor3 x = {{{0.1f, -0.1f, 0.1f, -0.1f}}};
  const Tensor3 expected = Tensor3{{{1.0f, -1.0f, 1.0f, -1.0f}}} * float(1.0 / std::sqrt(2.0));
  EXPECT_TRUE(all_close(layer_norm(x, 0.01f), expected, 1e-6));
}

TEST(LayerNorm, MatchesTorch) {
  const Fixture fixture("layer_norm");
  const float eps = fixture.meta().at("eps").get<float>();
  EXPECT_TRUE(
      all_close(layer_norm(fixture.array<3>("x"), eps), fixture.array<3>("y"), kTorchTolerance));
}

TEST(LayerNorm, RejectsAnEmptyRowAndANonPositiveEps) {
  EXPECT_TRUE(throws_invalid_argument([] { layer_norm(Tensor3({2, 3, 0})); }, {"(2, 3, 0)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        layer_norm(xt::ones<float>({1, 2, 4}), 0.0f);
      },
      {"eps"}));
}

// ---- Block B: attention_block ------------------------------------------------------------------

TEST(AttentionBlock, PostLnFeedsTheSublayerTheRawInput) {
  const Tensor3 x = random_tokens(2, 5, 16, 4) * 2.0f;
  std::optional<Tensor3> seen;
  const auto twice = [&](const Tensor3& h) -> Tensor3 {
    seen = h;
    return 2.0f * h;
  };
  const Tensor3 y = attention_block(x, Norm::post_ln, twice);
  ASSERT_TRUE(seen.has_value()) << "the sublayer was not called";
  EXPECT_TRUE(all_close(*seen, x, 0.0));  // exact: x itself, not a function of it
  // layer_norm(x + 2x) = layer_norm(3x); the same float operations in the same order, so only a
  // different but correct evaluation order could differ, by ~1e-7.
  EXPECT_TRUE(all_close(y, layer_norm(x + 2.0f * x), 1e-6));
}

TEST(AttentionBlock, PreLnFeedsTheSublayerTheNormalisedInput) {
  const Tensor3 x = random_tokens(2, 5, 16, 5) * 2.0f;
  std::optional<Tensor3> seen;
  const auto twice = [&](const Tensor3& h) -> Tensor3 {
    seen = h;
    return 2.0f * h;
  };
  const Tensor3 y = attention_block(x, Norm::pre_ln, twice);
  ASSERT_TRUE(seen.has_value()) << "the sublayer was not called";
  // Exact: the block must hand over layer_norm(x) itself, computed by the same function.
  EXPECT_TRUE(all_close(*seen, layer_norm(x), 0.0));
  // Exact: the output is one float addition, x + sublayer(...), with nothing after it.
  EXPECT_TRUE(all_close(y, x + 2.0f * layer_norm(x), 0.0));
}

TEST(AttentionBlock, CallsTheSublayerOnce) {
  const Tensor3 x = random_tokens(1, 3, 8, 6);
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
    int calls = 0;
    attention_block(x, norm, [&](const Tensor3& h) -> Tensor3 {
      ++calls;
      return h;
    });
    EXPECT_EQ(calls, 1) << (norm == Norm::post_ln ? "post-LN" : "pre-LN");
  }
}

TEST(AttentionBlock, RejectsASublayerThatChangesTheShape) {
  const Tensor3 x = xt::zeros<float>({2, 5, 16});
  const auto narrow = [](const Tensor3& h) -> Tensor3 {
    return xt::view(h, xt::all(), xt::all(), xt::range(0, 8));
  };
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln})
    EXPECT_TRUE(throws_invalid_argument([&] { attention_block(x, norm, narrow); },
                                        {"(2, 5, 8)", "(2, 5, 16)"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { attention_block(x, Norm::pre_ln, nullptr); }, {"sublayer"}));
}

// ---- Block C: mha_block ------------------------------------------------------------------------

TEST(MhaBlock, IsAttentionBlockAroundMultiHeadAttention) {
  const Tensor3 x = random_tokens(2, 6, 16, 7);
  const BlockWeights w = seeded_weights(16, 4, 8);
  MultiHeadAttention mha(w.w_q, w.w_k, w.w_v, w.w_o, 4);
  const Tensor2 mask = causal_mask(6);
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
    const Tensor3 expected =
        attention_block(x, norm, [&](const Tensor3& h) { return mha.forward(h, mask); });
    // Exact: the same functions on the same inputs in the same order.
    EXPECT_TRUE(all_close(mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 4, norm, mask), expected, 0.0))
        << (norm == Norm::post_ln ? "post-LN" : "pre-LN");
  }
}

TEST(MhaBlock, PostLnOutputRowsHaveMeanZeroAndVarianceOne) {
  const Tensor3 x = random_tokens(2, 5, 32, 9) * 3.0f;
  const BlockWeights w = seeded_weights(32, 4, 10);
  const Tensor3 y = mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 4, Norm::post_ln);
  EXPECT_TRUE(all_close(row_means(y), xt::zeros<double>({2, 5}), kMeanTolerance));
  EXPECT_TRUE(all_close(row_variances(y), xt::ones<double>({2, 5}), kVarianceTolerance));
}

TEST(MhaBlock, PreLnOutputRowsAreNotNormalised) {
  const Tensor3 x = random_tokens(2, 5, 32, 9) * 3.0f;  // variance ~9 per row
  const BlockWeights w = seeded_weights(32, 4, 10);
  const Tensor3 y = mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 4, Norm::pre_ln);
  // The residual carries x's own statistics through: x + (an update of variance ~1) keeps a row
  // variance of several units and a mean that is not 0. A bound of 1 is far from both 0 and 9.
  const auto variances = row_variances(y);
  EXPECT_GT(xt::amin(variances)(), 2.0) << "every pre-LN row should keep most of x's variance ~9";
  EXPECT_GT(xt::amax(xt::abs(row_means(y)))(), 0.1) << "pre-LN row means are not forced to 0";
}

TEST(MhaBlock, PreLnWithZeroOutputProjectionIsTheIdentity) {
  const Tensor3 x = random_tokens(2, 5, 16, 11);
  BlockWeights w = seeded_weights(16, 4, 12);
  w.w_o = xt::zeros<float>({16, 16});
  // Exact: the attention output is a product with zeros, exactly 0, and x + 0 is x.
  EXPECT_TRUE(all_close(mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 4, Norm::pre_ln), x, 0.0));
  // Post-LN has no identity path: with W_O = 0 it is layer_norm(x), not x. Same arithmetic: exact.
  EXPECT_TRUE(
      all_close(mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 4, Norm::post_ln), layer_norm(x), 0.0));
}

TEST(MhaBlock, CausalBlockIgnoresLaterTokens) {
  const std::size_t T = 6;
  Tensor3 x = random_tokens(1, T, 16, 13);
  const BlockWeights w = seeded_weights(16, 2, 14);
  const Tensor2 mask = causal_mask(T);
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
    const Tensor3 y = mha_block(x, w.w_q, w.w_k, w.w_v, w.w_o, 2, norm, mask);
    Tensor3 changed = x;
    xt::view(changed, 0, T - 1) += 1.0f;
    const Tensor3 y_changed = mha_block(changed, w.w_q, w.w_k, w.w_v, w.w_o, 2, norm, mask);
    // LayerNorm works per row and the residual per position, so the mask's causality survives;
    // masked weights are exactly 0, so 1e-6 only allows for another summation order.
    auto earlier = xt::range(0, T - 1);
    EXPECT_TRUE(all_close(xt::view(y_changed, 0, earlier), xt::view(y, 0, earlier), 1e-6))
        << (norm == Norm::post_ln ? "post-LN" : "pre-LN");
  }
}

void expect_block_matches_torch(const std::string& name, Norm norm) {
  SCOPED_TRACE("fixture " + name);
  const Fixture fixture(name);
  ASSERT_EQ(fixture.meta().at("norm").get<std::string>(),
            norm == Norm::post_ln ? "post_ln" : "pre_ln");
  const Tensor3 x = fixture.array<3>("x");
  const auto mask = fixture.meta().at("causal").get<bool>()
                        ? std::optional<Tensor2>(causal_mask(x.shape(1)))
                        : std::nullopt;
  const Tensor3 y = mha_block(x, fixture.array<2>("w_q"), fixture.array<2>("w_k"),
                              fixture.array<2>("w_v"), fixture.array<2>("w_o"),
                              fixture.meta().at("n_heads").get<std::size_t>(), norm, mask);
  EXPECT_TRUE(all_close(y, fixture.array<3>("y"), kTorchTolerance));
}

TEST(MhaBlock, MatchesTorchPostLn) { expect_block_matches_torch("block_post_ln", Norm::post_ln); }
TEST(MhaBlock, MatchesTorchPreLn) { expect_block_matches_torch("block_pre_ln", Norm::pre_ln); }
TEST(MhaBlock, MatchesTorchPreLnCausal) {
  expect_block_matches_torch("block_pre_ln_causal", Norm::pre_ln);
}

TEST(MhaBlock, RejectsWeightsOfTheWrongShape) {
  const Tensor3 x = xt::zeros<float>({2, 5, 16});
  const Tensor2 square = xt::zeros<float>({16, 16}), narrow = xt::zeros<float>({16, 8});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { mha_block(x, square, square, narrow, square, 4, Norm::pre_ln); },
      {"mha_block", "w_v", "(16, 8)", "(2, 5, 16)"}));
  const Tensor2 small = xt::zeros<float>({8, 8});
  EXPECT_TRUE(
      throws_invalid_argument([&] { mha_block(x, small, small, small, small, 4, Norm::post_ln); },
                              {"(8, 8)", "(2, 5, 16)"}));
}

TEST(MhaBlock, RejectsAMaskOfTheWrongShapeAndHeadsThatDoNotDivideDModel) {
  const Tensor3 x = xt::zeros<float>({2, 5, 16});
  const Tensor2 square = xt::zeros<float>({16, 16}), mask = xt::zeros<float>({5, 4});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { mha_block(x, square, square, square, square, 4, Norm::pre_ln, mask); },
      {"mha_block", "(5, 4)", "(2, 5, 16)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { mha_block(x, square, square, square, square, 5, Norm::pre_ln); }, {"16", "5"}));
}

}  // namespace
}  // namespace minimodel
