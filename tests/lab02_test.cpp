// Lab 02: the causal mask, checked by its pattern, by perturbation and against torch.
#include <gtest/gtest.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "support/checks.hpp"
#include "support/random_tokens.hpp"
#include "support/torch_parity.hpp"

namespace minimodel {
namespace {

using testing::random_tokens;

using testing::all_close;
using testing::expect_matches_torch;

// Masked keys get exactly zero weight (exp(-1e9) == 0 in float32), so earlier positions cannot
// see a later change at all; 1e-6 only allows for a different summation order.
constexpr double kCausalTolerance = 1e-6;

TEST(CausalMask, IsZeroOnAndBelowTheDiagonalAndMaskedAbove) {
  const Tensor2 mask = causal_mask(4);
  ASSERT_EQ(mask.shape(), (std::array<std::size_t, 2>{4, 4}));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      EXPECT_EQ(mask(i, j), j <= i ? 0.0f : kMaskedScore) << "(" << i << ", " << j << ")";
}

TEST(CausalMask, OfOneTokenMasksNothing) {
  EXPECT_TRUE(all_close(causal_mask(1), xt::zeros<float>({1, 1}), 0.0));
}

TEST(CausalMask, ChangingTheLastTokenLeavesEarlierOutputsUnchanged) {
  const std::size_t B = 2, T = 6, d = 32;
  MultiHeadAttention mha(d, 4, 1);
  Tensor3 x = random_tokens(B, T, d, 2);
  const Tensor3 before = mha.forward(x, causal_mask(T));
  xt::view(x, xt::all(), T - 1) += 5.0f;
  const Tensor3 after = mha.forward(x, causal_mask(T));
  EXPECT_TRUE(all_close(xt::view(after, xt::all(), xt::range(0, T - 1)),
                        xt::view(before, xt::all(), xt::range(0, T - 1)), kCausalTolerance));
  // ...and the perturbation is real: the last position does change.
  EXPECT_FALSE(
      all_close(xt::view(after, xt::all(), T - 1), xt::view(before, xt::all(), T - 1), 1e-3));
}

TEST(CausalMask, ChangingOneTokenOnlyAffectsItsOwnAndLaterPositions) {
  const std::size_t T = 7, d = 16, changed = 3;
  MultiHeadAttention mha(d, 2, 3);
  Tensor3 x = random_tokens(1, T, d, 4);
  const Tensor3 before = mha.forward(x, causal_mask(T));
  xt::view(x, 0, changed) *= -2.0f;
  const Tensor3 after = mha.forward(x, causal_mask(T));
  for (std::size_t i = 0; i < T; ++i) {
    const bool same = all_close(xt::view(after, 0, i), xt::view(before, 0, i), kCausalTolerance);
    EXPECT_EQ(same, i < changed) << "position " << i;
  }
}

TEST(CausalMask, BroadcastsAcrossBatchAndHeads) {
  const std::size_t B = 3, T = 5, d = 12, H = 3;
  MultiHeadAttention mha(d, H, 5);
  const Tensor3 x = random_tokens(B, T, d, 6);
  const Tensor3 y = mha.forward(x, causal_mask(T));
  const Tensor4 weights = mha.attention_weights();
  for (std::size_t b = 0; b < B; ++b) {
    const Tensor2 alone = xt::view(x, b);
    EXPECT_TRUE(all_close(mha.forward(alone, causal_mask(T)), xt::view(y, b), 1e-5)) << "b=" << b;
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = i + 1; j < T; ++j)
          EXPECT_EQ(weights(b, h, i, j), 0.0f)
              << "b=" << b << " h=" << h << " i=" << i << " j=" << j;
  }
}

TEST(CausalMask, FirstPositionAttendsOnlyToItselfAndRowsSumToOne) {
  const std::size_t T = 6;
  MultiHeadAttention mha(16, 4, 7);
  const Tensor3 x = random_tokens(2, T, 16, 8) * 3.0f;
  mha.forward(x, causal_mask(T));
  const Tensor4& weights = mha.attention_weights();
  EXPECT_TRUE(
      all_close(xt::view(weights, xt::all(), xt::all(), 0, 0), xt::ones<float>({2, 4}), 1e-6));
  EXPECT_TRUE(
      all_close(xt::sum(weights, {3}), xt::ones<float>({std::size_t{2}, std::size_t{4}, T}), 1e-5));
}

TEST(CausalMask, MatchesTorchCausal) { expect_matches_torch("mha_causal", causal_mask); }
TEST(CausalMask, MatchesTorchWithLargeLogits) {
  expect_matches_torch("mha_causal_large_logits", causal_mask);
}
TEST(CausalMask, MatchesTorchWithOneToken) {
  expect_matches_torch("mha_single_token", causal_mask);
}

}  // namespace
}  // namespace minimodel
