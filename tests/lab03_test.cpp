// Lab 03: GPT-2's fused QKV attention, checked by invariants, against lab 01's MultiHeadAttention
// with separate matrices, and against torch.nn.MultiheadAttention with biases.
#include <cmath>
#include <random>

#include <gtest/gtest.h>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/gpt2_attention.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"

namespace minimodel {
namespace {

using testing::random_tokens;

using testing::all_close;
using testing::kTorchTolerance;
using testing::throws_invalid_argument;

// float32 sums of O(10) products of O(1) numbers: errors near 1e-6, so 1e-5 is a real bound.
constexpr double kTolerance = 1e-5;
// The fused and the separate layer do the same float32 multiply-adds over the same d_model terms;
// only the GEMM's width (3 d_model vs d_model) differs, which can at most reorder a sum: a few ulp
// of O(1) values, about 1e-7. 1e-6 leaves room for that and nothing more.
constexpr double kEquivalenceTolerance = 1e-6;
// Masked keys get exactly zero weight, so earlier positions cannot see a later change at all;
// 1e-6 only allows for a different summation order (as in lab 02).
constexpr double kCausalTolerance = 1e-6;

// A layer with unit-scale random weights (peakier attention than GPT-2's 0.02 init), biases
// N(0, bias_std²); bias_std = 0 gives zero biases.
GPT2Attention random_layer(std::size_t d, std::size_t H, int seed, float bias_std) {
  xt::random::seed(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor2 c_attn_weight = xt::random::randn<float>({d, 3 * d}) * scale;
  Tensor1 c_attn_bias = xt::random::randn<float>({3 * d}) * bias_std;
  Tensor2 c_proj_weight = xt::random::randn<float>({d, d}) * scale;
  Tensor1 c_proj_bias = xt::random::randn<float>({d}) * bias_std;
  return GPT2Attention(c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, H);
}

// Column block r (0 = Q, 1 = K, 2 = V) of c_attn_weight, as lab 01's (d_model, d_model) matrix.
Tensor2 role_block(const Tensor2& c_attn_weight, std::size_t r) {
  const std::size_t d = c_attn_weight.shape(0);
  return xt::view(c_attn_weight, xt::all(), xt::range(r * d, (r + 1) * d));
}

// ---- Block A: the weights ----------------------------------------------------------------------

TEST(GPT2Attention, SeededWeightsFollowTheBlueprint) {
  // BLUEPRINT.md: c_attn_weight then c_proj_weight, row-major, N(0, 1) times 0.02f from one
  // mt19937_64(seed); biases zero. Equal weights make learner and reference figures equal.
  const std::size_t d = 8;
  GPT2Attention attn(d, 2, 42);
  std::mt19937_64 generator(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor2 c_attn({d, 3 * d}), c_proj({d, d});
  for (Tensor2* w : {&c_attn, &c_proj})
    for (float& value : *w) value = normal(generator) * 0.02f;
  EXPECT_TRUE(all_close(attn.c_attn_weight(), c_attn, 0.0));
  EXPECT_TRUE(all_close(attn.c_proj_weight(), c_proj, 0.0));
  EXPECT_TRUE(all_close(attn.c_attn_bias(), xt::zeros<float>({3 * d}), 0.0));
  EXPECT_TRUE(all_close(attn.c_proj_bias(), xt::zeros<float>({d}), 0.0));
  EXPECT_EQ(attn.n_heads(), 2u);
  EXPECT_EQ(attn.d_model(), d);
}

TEST(GPT2Attention, RejectsHeadsThatDoNotDivideDModel) {
  EXPECT_TRUE(throws_invalid_argument([] { GPT2Attention(64, 5, 0); }, {"64", "5"}));
  EXPECT_TRUE(throws_invalid_argument([] { GPT2Attention(64, 0, 0); }, {"n_heads"}));
  const Tensor2 w = xt::zeros<float>({8, 24}), p = xt::zeros<float>({8, 8});
  const Tensor1 b = xt::zeros<float>({24}), c = xt::zeros<float>({8});
  EXPECT_TRUE(throws_invalid_argument([&] { GPT2Attention(w, b, p, c, 3); }, {"8", "3"}));
}

TEST(GPT2Attention, RejectsConv1DTensorsOfTheWrongShape) {
  const Tensor2 w = xt::zeros<float>({8, 24}), p = xt::zeros<float>({8, 8});
  const Tensor1 b = xt::zeros<float>({24}), c = xt::zeros<float>({8});
  const Tensor2 w_linear = xt::zeros<float>({24, 8});  // nn.Linear's (out, in), not Conv1D's
  EXPECT_TRUE(throws_invalid_argument([&] { GPT2Attention(w_linear, b, p, c, 2); }, {"(24, 8)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { GPT2Attention(w, xt::zeros<float>({8}), p, c, 2); },
                                      {"(8, 24)", "(8)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        GPT2Attention(w, b, xt::zeros<float>({8, 6}), c, 2);
      },
      {"(8, 24)", "(8, 6)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { GPT2Attention(w, b, p, xt::zeros<float>({24}), 2); },
                                      {"(8, 24)", "(24)"}));
}

// ---- Block B: split_qkv ------------------------------------------------------------------------

TEST(SplitQkv, PutsColumnBlocksZeroOneTwoIntoQKV) {
  const std::size_t d = 4;
  const Tensor3 fused =
      xt::reshape_view(xt::arange<float>(2 * 3 * 3 * d), std::array<std::size_t, 3>{2, 3, 3 * d});
  const QKV qkv = split_qkv(fused);
  const Tensor3* roles[] = {&qkv.q, &qkv.k, &qkv.v};
  for (std::size_t r = 0; r < 3; ++r) {
    const Tensor3 columns = xt::view(fused, xt::all(), xt::all(), xt::range(r * d, (r + 1) * d));
    EXPECT_TRUE(all_close(*roles[r], columns, 0.0)) << "role "
                                                    << "qkv"[r];
  }
}

TEST(SplitQkv, RejectsAWidthThatIsNotAMultipleOfThree) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        split_qkv(xt::zeros<float>({2, 5, 10}));
      },
      {"(2, 5, 10)", "3"}));
}

// ---- Block C: forward --------------------------------------------------------------------------

TEST(GPT2Attention, KeepsTheShapeOfBatchedInput) {
  GPT2Attention attn = random_layer(16, 4, 1, 0.5f);
  const Tensor3 y = attn.forward(random_tokens(2, 5, 16, 2));
  EXPECT_EQ(y.shape(), (std::array<std::size_t, 3>{2, 5, 16}));
  EXPECT_EQ(attn.attention_weights().shape(), (std::array<std::size_t, 4>{2, 4, 5, 5}));
}

TEST(GPT2Attention, TwoDimensionalInputIsABatchOfOne) {
  GPT2Attention attn = random_layer(12, 3, 3, 0.5f);
  const Tensor3 x = random_tokens(1, 6, 12, 4);
  const Tensor2 x2 = xt::view(x, 0);
  const Tensor2 y2 = attn.forward(x2);
  EXPECT_EQ(attn.attention_weights().shape(), (std::array<std::size_t, 4>{1, 3, 6, 6}));
  EXPECT_TRUE(all_close(y2, xt::view(attn.forward(x), 0), 0.0));
}

TEST(GPT2Attention, EveryAttentionRowSumsToOne) {
  GPT2Attention attn = random_layer(32, 4, 5, 0.5f);
  const Tensor3 x = random_tokens(3, 7, 32, 6) * 3.0f;  // larger logits, peakier rows
  for (const bool causal : {true, false}) {
    attn.forward(x, causal);
    const Tensor3 row_sums = xt::sum(attn.attention_weights(), {3});
    EXPECT_TRUE(all_close(row_sums, xt::ones<float>({3, 4, 7}), kTolerance)) << "causal " << causal;
  }
}

TEST(GPT2Attention, EqualsMultiHeadAttentionWithTheColumnBlocksOfCAttn) {
  const std::size_t d = 24, H = 4, T = 6;
  GPT2Attention attn = random_layer(d, H, 7, 0.0f);  // zero biases: lab 01 has none
  const Tensor2& w = attn.c_attn_weight();
  MultiHeadAttention separate(role_block(w, 0), role_block(w, 1), role_block(w, 2),
                              attn.c_proj_weight(), H);
  const Tensor3 x = random_tokens(2, T, d, 8);
  for (const bool causal : {true, false}) {
    const auto mask = causal ? std::optional<Tensor2>(causal_mask(T)) : std::nullopt;
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const Tensor3 y = attn.forward(x, causal);
    EXPECT_TRUE(all_close(y, separate.forward(x, mask), kEquivalenceTolerance));
    EXPECT_TRUE(
        all_close(attn.attention_weights(), separate.attention_weights(), kEquivalenceTolerance));
  }
}

// A key bias b_k adds q·b_k to every score of a query's row: a constant per row, which softmax
// ignores. The same shift is not constant for a query bias (b_q·k varies with the key), and a
// value bias moves every output.
TEST(GPT2Attention, KeyBiasLeavesTheOutputUnchangedButQueryAndValueBiasesDoNot) {
  const std::size_t d = 24, H = 4;
  GPT2Attention base = random_layer(d, H, 9, 0.5f);
  const Tensor3 x = random_tokens(2, 6, d, 10);
  xt::random::seed(11);
  const Tensor1 extra = xt::random::randn<float>({d});  // O(1) shift of one role's bias
  auto with_extra_bias = [&](std::size_t role) {
    Tensor1 bias = base.c_attn_bias();
    xt::view(bias, xt::range(role * d, (role + 1) * d)) += extra;
    return GPT2Attention(base.c_attn_weight(), bias, base.c_proj_weight(), base.c_proj_bias(), H);
  };
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const Tensor3 y = base.forward(x, causal);
    const Tensor4 weights = base.attention_weights();
    GPT2Attention k_shifted = with_extra_bias(1);
    // Exact in real arithmetic; in float32 each O(1)-O(10) score is rounded differently: ~1e-6.
    EXPECT_TRUE(all_close(k_shifted.forward(x, causal), y, kTolerance));
    EXPECT_TRUE(all_close(k_shifted.attention_weights(), weights, kTolerance));
    GPT2Attention q_shifted = with_extra_bias(0), v_shifted = with_extra_bias(2);
    EXPECT_FALSE(all_close(q_shifted.forward(x, causal), y, 1e-3));
    EXPECT_FALSE(all_close(v_shifted.forward(x, causal), y, 1e-3));
  }
}

TEST(GPT2Attention, IsCausalByDefault) {
  const std::size_t T = 7, d = 16, changed = 3;
  GPT2Attention attn = random_layer(d, 2, 12, 0.5f);
  Tensor3 x = random_tokens(1, T, d, 13);
  const Tensor3 before = attn.forward(x);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = i + 1; j < T; ++j)
      for (std::size_t h = 0; h < 2; ++h)
        EXPECT_EQ(attn.attention_weights()(0, h, i, j), 0.0f)
            << "h=" << h << " i=" << i << " j=" << j;
  xt::view(x, 0, changed) *= -2.0f;
  const Tensor3 after = attn.forward(x);
  for (std::size_t i = 0; i < T; ++i) {
    const bool same = all_close(xt::view(after, 0, i), xt::view(before, 0, i), kCausalTolerance);
    EXPECT_EQ(same, i < changed) << "position " << i;
  }
}

TEST(GPT2Attention, ForwardWithCausalFalseSeesTheFuture) {
  const std::size_t T = 6, d = 16;
  GPT2Attention attn = random_layer(d, 4, 14, 0.5f);
  Tensor3 x = random_tokens(2, T, d, 15);
  const Tensor3 before = attn.forward(x, false);
  EXPECT_GT(xt::amin(xt::view(attn.attention_weights(), xt::all(), xt::all(), 0, T - 1))(), 0.0f)
      << "position 0 puts no weight on the last token";
  xt::view(x, xt::all(), T - 1) += 5.0f;
  const Tensor3 after = attn.forward(x, false);
  EXPECT_FALSE(all_close(xt::view(after, xt::all(), 0), xt::view(before, xt::all(), 0), 1e-3))
      << "position 0 did not notice a change of the last token";
}

// ---- Block D: parameter count ------------------------------------------------------------------

TEST(GPT2Attention, ParameterCountIsFourDSquaredPlusFourD) {
  for (const std::size_t d : {24u, 768u}) {
    const GPT2Attention attn(d, 12, 0);
    EXPECT_EQ(attn.parameter_count(), 4 * d * d + 4 * d) << "d_model " << d;
  }
  EXPECT_EQ(GPT2Attention(768, 12, 0).parameter_count(), 2'362'368u);  // GPT-2 small, one layer
}

// ---- Bad input and PyTorch parity --------------------------------------------------------------

TEST(GPT2Attention, RejectsInputOfTheWrongWidth) {
  GPT2Attention attn(64, 4, 0);
  const Tensor3 x3 = xt::zeros<float>({4, 8, 60});
  const Tensor2 x2 = xt::zeros<float>({8, 60});
  EXPECT_TRUE(throws_invalid_argument([&] { attn.forward(x3); }, {"(4, 8, 60)", "64"}));
  EXPECT_TRUE(throws_invalid_argument([&] { attn.forward(x2); }, {"(8, 60)", "64"}));
}

void expect_matches_torch(const std::string& name) {
  SCOPED_TRACE("fixture " + name);
  const testing::Fixture fixture(name);
  GPT2Attention attn(fixture.array<2>("c_attn_weight"), fixture.array<1>("c_attn_bias"),
                     fixture.array<2>("c_proj_weight"), fixture.array<1>("c_proj_bias"),
                     fixture.meta().at("n_heads").get<std::size_t>());
  const bool causal = fixture.meta().at("causal").get<bool>();
  if (fixture.rank("x") == 2) {
    const Tensor2 y = attn.forward(fixture.array<2>("x"), causal);
    EXPECT_TRUE(all_close(y, fixture.array<2>("y"), kTorchTolerance));
  } else {
    const Tensor3 y = attn.forward(fixture.array<3>("x"), causal);
    EXPECT_TRUE(all_close(y, fixture.array<3>("y"), kTorchTolerance));
  }
  EXPECT_TRUE(all_close(attn.attention_weights(), fixture.array<4>("attn"), kTorchTolerance));
}

TEST(GPT2Attention, MatchesTorchCausalWithBiases) { expect_matches_torch("gpt2_causal"); }
TEST(GPT2Attention, MatchesTorchUnbatched) { expect_matches_torch("gpt2_unbatched"); }

}  // namespace
}  // namespace minimodel
