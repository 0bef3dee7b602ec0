// Lab 01: multi-head attention, checked against invariants and torch.nn.MultiheadAttention.
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>
#include <xtensor-blas/xlinalg.hpp>
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
using testing::throws_invalid_argument;

// float32 sums of O(10) products of O(1) numbers: errors near 1e-6, so 1e-5 is a real bound.
constexpr double kTolerance = 1e-5;

TEST(Project, MatchesAHandComputation) {
  // Small integers: every product and sum is exact in float32, in any order, so tolerance 0.
  const Tensor2 w = {{1, 0}, {0, 1}, {1, -1}};  // (d_in 3, d_out 2)
  const Tensor1 bias = {0.5f, -2.0f};
  const Tensor3 one_sequence = {{{1, 2, 3}, {4, 5, 6}}};     // (B 1, T 2, 3)
  const Tensor3 two_sequences = {{{1, 2, 3}}, {{4, 5, 6}}};  // (B 2, T 1, 3)
  const Tensor3 one_token = {{{1, 2, 3}}};                   // (1, 1, 3): the GEMV path
  EXPECT_TRUE(all_close(project(one_sequence, w), Tensor3{{{4, -1}, {10, -1}}}, 0.0));
  EXPECT_TRUE(all_close(project(two_sequences, w), Tensor3{{{4, -1}}, {{10, -1}}}, 0.0));
  EXPECT_TRUE(all_close(project(one_token, w), Tensor3{{{4, -1}}}, 0.0));
  EXPECT_TRUE(all_close(project(one_sequence, w, bias), Tensor3{{{4.5f, -3}, {10.5f, -3}}}, 0.0));
  EXPECT_TRUE(all_close(project(one_token, w, bias), Tensor3{{{4.5f, -3}}}, 0.0));
}

TEST(Project, OneTokenEqualsItsRowOfTheBatch) {
  // The single-token GEMV and the batch's GEMM sum the same 16 products in another order.
  const Tensor3 x = random_tokens(2, 3, 16, 41);
  const Tensor2 w = xt::view(random_tokens(1, 16, 12, 42), 0);  // (16, 12)
  const Tensor1 bias = xt::view(random_tokens(1, 1, 12, 43), 0, 0);
  const Tensor3 all = project(x, w), all_biased = project(x, w, bias);  // (2, 3, 12)
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t t = 0; t < 3; ++t) {
      const auto row = [b, t](const Tensor3& y) -> Tensor3 {
        return xt::view(y, xt::range(b, b + 1), xt::range(t, t + 1));  // (1, 1, ·)
      };
      EXPECT_TRUE(all_close(project(row(x), w), row(all), kTolerance)) << "b " << b << ", t " << t;
      EXPECT_TRUE(all_close(project(row(x), w, bias), row(all_biased), kTolerance))
          << "b " << b << ", t " << t;
    }
  }
}

TEST(Project, RejectsShapesThatDoNotFit) {
  const Tensor2 w = xt::zeros<float>({6, 4});
  const Tensor3 x = xt::zeros<float>({2, 5, 8}), token = xt::zeros<float>({1, 1, 8});
  EXPECT_TRUE(throws_invalid_argument([&] { project(x, w); }, {"(2, 5, 8)", "(6, 4)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { project(token, w); }, {"(1, 1, 8)", "(6, 4)"}));
  const Tensor2 w8 = xt::zeros<float>({8, 4});
  const Tensor1 bias = xt::zeros<float>({5});
  EXPECT_TRUE(throws_invalid_argument([&] { project(x, w8, bias); }, {"(8, 4)", "(5)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { project(token, w8, bias); }, {"(8, 4)", "(5)"}));
}

TEST(MultiHeadAttention, KeepsTheShapeOfBatchedInput) {
  MultiHeadAttention mha(16, 4, 0);
  const Tensor3 y = mha.forward(random_tokens(2, 5, 16, 1));
  EXPECT_EQ(y.shape(), (std::array<std::size_t, 3>{2, 5, 16}));
  EXPECT_EQ(mha.attention_weights().shape(), (std::array<std::size_t, 4>{2, 4, 5, 5}));
  EXPECT_EQ(mha.d_head(), 4u);
}

TEST(MultiHeadAttention, TwoDimensionalInputIsABatchOfOne) {
  MultiHeadAttention mha(12, 3, 5);
  const Tensor3 x = random_tokens(1, 6, 12, 2);
  const Tensor2 x2 = xt::view(x, 0);
  const Tensor2 y2 = mha.forward(x2);
  EXPECT_EQ(mha.attention_weights().shape(), (std::array<std::size_t, 4>{1, 3, 6, 6}));
  const Tensor3 y3 = mha.forward(x);
  EXPECT_TRUE(all_close(y2, xt::view(y3, 0), 0.0));
}

TEST(MultiHeadAttention, EveryAttentionRowSumsToOne) {
  MultiHeadAttention mha(32, 4, 3);
  const Tensor3 x = random_tokens(3, 7, 32, 4) * 3.0f;  // larger logits, peakier rows
  mha.forward(x);
  const Tensor3 row_sums = xt::sum(mha.attention_weights(), {3});
  EXPECT_TRUE(all_close(row_sums, xt::ones<float>({3, 4, 7}), kTolerance));
}

TEST(MultiHeadAttention, BatchElementsDoNotInteract) {
  MultiHeadAttention mha(16, 2, 8);
  const Tensor3 x = random_tokens(3, 4, 16, 9);
  const Tensor3 y = mha.forward(x);
  for (std::size_t b = 0; b < 3; ++b) {
    const Tensor3 alone = xt::view(x, xt::range(b, b + 1));
    EXPECT_TRUE(all_close(mha.forward(alone), xt::view(y, xt::range(b, b + 1)), kTolerance))
        << "b=" << b;
  }
}

TEST(MultiHeadAttention, SeededWeightsFollowTheBlueprint) {
  // BLUEPRINT.md: W_Q, W_K, W_V, W_O in that order, row-major, N(0, 1) from one mt19937_64(seed),
  // times 1/sqrt(d_model). Equal weights make learner and reference figures equal.
  const std::size_t d = 8;
  MultiHeadAttention mha(d, 2, 42);
  std::mt19937_64 generator(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (const Tensor2* w : {&mha.w_q(), &mha.w_k(), &mha.w_v(), &mha.w_o()}) {
    Tensor2 expected({d, d});
    for (float& value : expected) value = normal(generator) * scale;
    EXPECT_TRUE(all_close(*w, expected, 0.0));
  }
  MultiHeadAttention other(d, 2, 43);
  EXPECT_FALSE(all_close(mha.w_q(), other.w_q(), 1e-3));
}

TEST(MultiHeadAttention, OneHeadEqualsSingleHeadThenWo) {
  MultiHeadAttention mha(16, 1, 11);
  const Tensor3 x = random_tokens(2, 5, 16, 12);
  const Tensor3 y = mha.forward(x);
  for (std::size_t b = 0; b < 2; ++b) {
    const Tensor2 xb = xt::view(x, b);
    const AttentionResult head =
        single_head_attention(xt::linalg::dot(xb, mha.w_q()), xt::linalg::dot(xb, mha.w_k()),
                              xt::linalg::dot(xb, mha.w_v()));
    EXPECT_TRUE(all_close(xt::view(y, b), xt::linalg::dot(head.output, mha.w_o()), kTolerance));
    EXPECT_TRUE(all_close(xt::view(mha.attention_weights(), b, 0), head.weights, kTolerance));
  }
}

TEST(MultiHeadAttention, MaskedKeysGetZeroWeightInEveryHead) {
  MultiHeadAttention mha(16, 4, 13);
  const Tensor3 x = random_tokens(2, 5, 16, 14);
  Tensor2 mask = xt::zeros<float>({5, 5});
  const std::array<std::array<std::size_t, 2>, 3> masked = {{{0, 4}, {2, 1}, {4, 0}}};
  for (const auto& [query, key] : masked) mask(query, key) = kMaskedScore;
  mha.forward(x, mask);
  // exp(-1e9 + O(10) - max) underflows to exactly 0 in float32, as in lab 00.
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 4; ++h)
      for (const auto& [query, key] : masked)
        EXPECT_EQ(mha.attention_weights()(b, h, query, key), 0.0f)
            << "b " << b << ", head " << h << ", query " << query << ", key " << key;
  const Tensor3 row_sums = xt::sum(mha.attention_weights(), {3});
  EXPECT_TRUE(all_close(row_sums, xt::ones<float>({2, 4, 5}), kTolerance));
}

TEST(SplitHeads, PutsColumnBlockHIntoHeadH) {
  const Tensor3 x =
      xt::reshape_view(xt::arange<float>(2 * 3 * 8), std::array<std::size_t, 3>{2, 3, 8});
  const Tensor4 heads = split_heads(x, 4);  // d_head = 2
  EXPECT_EQ(heads.shape(), (std::array<std::size_t, 4>{2, 4, 3, 2}));
  for (std::size_t h = 0; h < 4; ++h)
    EXPECT_TRUE(all_close(xt::view(heads, xt::all(), h),
                          xt::view(x, xt::all(), xt::all(), xt::range(2 * h, 2 * h + 2)), 0.0))
        << "head " << h;
}

TEST(SplitHeads, MergeHeadsUndoesIt) {
  const Tensor3 x = random_tokens(2, 5, 12, 31);
  EXPECT_TRUE(all_close(merge_heads(split_heads(x, 3)), x, 0.0));
}

TEST(MultiHeadAttention, MatchesTorchBatched) { expect_matches_torch("mha_batched"); }
TEST(MultiHeadAttention, MatchesTorchUnbatched) { expect_matches_torch("mha_unbatched"); }
TEST(MultiHeadAttention, MatchesTorchWithOneHead) { expect_matches_torch("mha_one_head"); }
TEST(MultiHeadAttention, MatchesTorchWithHeadWidthOne) {
  expect_matches_torch("mha_head_width_one");
}

TEST(MultiHeadAttention, RejectsHeadsThatDoNotDivideDModel) {
  EXPECT_TRUE(throws_invalid_argument([] { MultiHeadAttention(64, 5, 0); }, {"64", "5"}));
  EXPECT_TRUE(throws_invalid_argument([] { MultiHeadAttention(64, 0, 0); }, {"n_heads"}));
  // The constructor from weights checks too, rather than leaving it to forward's split_heads.
  const Tensor2 w = xt::zeros<float>({8, 8});
  EXPECT_TRUE(throws_invalid_argument([&] { MultiHeadAttention(w, w, w, w, 3); }, {"8", "3"}));
  EXPECT_TRUE(throws_invalid_argument([&] { MultiHeadAttention(w, w, w, w, 0); }, {"n_heads"}));
}

TEST(SplitHeads, RejectsHeadsThatDoNotDivideDModel) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        split_heads(xt::zeros<float>({1, 2, 10}), 4);
      },
      {"10", "4"}));
}

TEST(MultiHeadAttention, RejectsWeightsOfTheWrongShape) {
  const Tensor2 square = xt::zeros<float>({8, 8}), wide = xt::zeros<float>({8, 6});
  EXPECT_TRUE(
      throws_invalid_argument([&] { MultiHeadAttention(wide, wide, wide, wide, 2); }, {"(8, 6)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { MultiHeadAttention(square, square, wide, square, 2); },
                                      {"(8, 8)", "(8, 6)"}));
}

TEST(MultiHeadAttention, RejectsInputOfTheWrongWidth) {
  MultiHeadAttention mha(64, 4, 0);
  const Tensor3 x3 = xt::zeros<float>({4, 8, 60});
  const Tensor2 x2 = xt::zeros<float>({8, 60});
  EXPECT_TRUE(throws_invalid_argument([&] { mha.forward(x3); }, {"(4, 8, 60)", "64"}));
  EXPECT_TRUE(throws_invalid_argument([&] { mha.forward(x2); }, {"(8, 60)", "64"}));
}

TEST(MultiHeadAttention, RejectsAMaskOfTheWrongShape) {
  MultiHeadAttention mha(8, 2, 0);
  const Tensor3 x = xt::zeros<float>({2, 5, 8});
  const Tensor2 mask = xt::zeros<float>({5, 4});
  EXPECT_TRUE(throws_invalid_argument([&] { mha.forward(x, mask); }, {"(5, 4)", "(2, 5, 8)"}));
}

}  // namespace
}  // namespace minimodel
