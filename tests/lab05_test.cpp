// Lab 05: rotary position embeddings, checked by their invariants (identity at 0, norms, offset
// invariance, the pairing convention) and against an explicit RoPE + causal attention in torch.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"
#include "tensors/npy_io.hpp"

namespace minimodel {
namespace {

using testing::random_tokens;

using testing::all_close;
using testing::Fixture;
using testing::kTorchTolerance;
using testing::throws_invalid_argument;

constexpr float kTheta = 10000.0f;
constexpr std::size_t kDHead = 16, kMaxSeqLen = 64;

// A table entry is a double cos or sin rounded once to float: off by at most half an ulp of a
// number in [-1, 1], 6e-8. A table built from float32 angles is off by up to 8.6e-7 (pos 58, k 1).
constexpr double kTableTolerance = 1e-7;
// Rotated components are O(1) numbers with ~3 float32 roundings each (~2e-7 relative); summed over
// 16 features and pushed through softmax and two projections they stay near 1e-6, so 1e-5 is a
// real bound (as for lab 01's torch parity).
constexpr double kTolerance = 1e-5;
// Masked keys get exactly zero weight, so earlier positions cannot see a later change at all;
// 1e-6 only allows for a different summation order (as in lab 02).
constexpr double kCausalTolerance = 1e-6;

Tensor2 random_rows(std::size_t T, std::size_t d, int seed) {
  xt::random::seed(seed);
  return xt::random::randn<float>({T, d});
}

// W_Q, W_K, W_V, W_O drawn as lab 01's seeded constructor draws them.
std::array<Tensor2, 4> random_weights(std::size_t d_model, int seed) {
  xt::random::seed(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model));
  std::array<Tensor2, 4> w;
  for (Tensor2& m : w) m = xt::random::randn<float>({d_model, d_model}) * scale;
  return w;
}

Positions range_of_positions(std::int64_t first, std::size_t T) {
  return xt::arange<std::int64_t>(first, first + static_cast<std::int64_t>(T));
}

// angle(pos, k) = pos * theta^(-2k / d_head), written out in double.
double angle(double theta, std::size_t d_head, std::size_t pos, std::size_t k) {
  return double(pos) * std::pow(theta, -2.0 * double(k) / double(d_head));
}

// ---- Block A: the tables ------------------------------------------------------------------------

TEST(RotaryPositionalEmbedding, TablesHoldCosAndSinOfPositionTimesTheFrequencyLadder) {
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  ASSERT_EQ(rope.cos_table().shape(), (std::array<std::size_t, 2>{kMaxSeqLen, kDHead / 2}));
  ASSERT_EQ(rope.sin_table().shape(), (std::array<std::size_t, 2>{kMaxSeqLen, kDHead / 2}));
  EXPECT_EQ(rope.theta(), kTheta);
  EXPECT_EQ(rope.d_head(), kDHead);
  EXPECT_EQ(rope.max_seq_len(), kMaxSeqLen);
  Tensor2 expected_cos({kMaxSeqLen, kDHead / 2}), expected_sin(expected_cos.shape());
  for (std::size_t pos = 0; pos < kMaxSeqLen; ++pos)
    for (std::size_t k = 0; k < kDHead / 2; ++k) {
      expected_cos(pos, k) = static_cast<float>(std::cos(angle(kTheta, kDHead, pos, k)));
      expected_sin(pos, k) = static_cast<float>(std::sin(angle(kTheta, kDHead, pos, k)));
    }
  EXPECT_TRUE(all_close(rope.cos_table(), expected_cos, kTableTolerance));
  EXPECT_TRUE(all_close(rope.sin_table(), expected_sin, kTableTolerance));
  // Pair 0 turns one radian per position: cos(1) and sin(1) by hand.
  EXPECT_NEAR(rope.cos_table()(1, 0), 0.5403023, kTableTolerance);
  EXPECT_NEAR(rope.sin_table()(1, 0), 0.8414710, kTableTolerance);
}

TEST(RotaryPositionalEmbedding, RejectsABadConfiguration) {
  EXPECT_TRUE(
      throws_invalid_argument([] { RotaryPositionalEmbedding(kTheta, 7, 8); }, {"d_head", "7"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { RotaryPositionalEmbedding(kTheta, 0, 8); }, {"d_head", "0"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { RotaryPositionalEmbedding(0.0f, 8, 8); }, {"theta", "0"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { RotaryPositionalEmbedding(-1.0f, 8, 8); }, {"theta", "-1"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { RotaryPositionalEmbedding(kTheta, 8, 0); }, {"max_seq_len"}));
  // 2^61 - 1 positions of 4 pairs: 2^63 floats, whose byte count overflows std::size_t.
  EXPECT_TRUE(throws_invalid_argument(
      [] { RotaryPositionalEmbedding(kTheta, 8, std::numeric_limits<std::size_t>::max() / 8); },
      {"max_seq_len", "too large"}));
}

// ---- Block B: rotate ----------------------------------------------------------------------------
TEST(RotaryPositionalEmbedding, PositionZeroIsTheIdentity) {
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  const Tensor2 x = random_rows(5, kDHead, 1);
  // cos 0 = 1 and sin 0 = 0 exactly, so x0 * 1 - x1 * 0 is x0 to the bit.
  EXPECT_TRUE(all_close(rope.apply(x, xt::zeros<std::int64_t>({5})), x, 0.0));
}

TEST(RotaryPositionalEmbedding, PreservesTheNormOfEveryPair) {
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  const Tensor2 x = random_rows(6, kDHead, 2);
  const Positions positions = {0, 7, 19, 33, 50, 63};
  const Tensor2 y = rope.apply(x, positions);
  auto pair_norms = [](const Tensor2& a) -> Tensor2 {
    auto even = xt::view(a, xt::all(), xt::range(0, kDHead, 2));
    auto odd = xt::view(a, xt::all(), xt::range(1, kDHead, 2));
    return xt::sqrt(even * even + odd * odd);  // (T, d_head / 2)
  };
  // Pair norms are O(1): a rotation by float cos/sin changes them by a few 1e-7 at most.
  EXPECT_TRUE(all_close(pair_norms(y), pair_norms(x), kTolerance));
  // ...and the rotation is real: y is not x.
  EXPECT_FALSE(all_close(xt::view(y, xt::range(1, 6)), xt::view(x, xt::range(1, 6)), 1e-2));
}

TEST(RotaryPositionalEmbedding, PairsAreInterleavedNotRotateHalf) {
  // e_{2k} at position p must become cos * e_{2k} + sin * e_{2k+1}, and e_{2k+1} must become
  // -sin * e_{2k} + cos * e_{2k+1}. Rotate-half would move e_k to e_{k + d_head/2} instead.
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  const std::size_t p = 5;
  const Positions at_p = {static_cast<std::int64_t>(p)};
  for (std::size_t k = 0; k < kDHead / 2; ++k) {
    const double a = angle(kTheta, kDHead, p, k);
    Tensor2 e_even = xt::zeros<float>({std::size_t{1}, kDHead}), e_odd = e_even;
    e_even(0, 2 * k) = 1.0f;
    e_odd(0, 2 * k + 1) = 1.0f;
    Tensor2 expected_even = xt::zeros<float>({std::size_t{1}, kDHead}),
            expected_odd = expected_even;
    expected_even(0, 2 * k) = static_cast<float>(std::cos(a));
    expected_even(0, 2 * k + 1) = static_cast<float>(std::sin(a));
    expected_odd(0, 2 * k) = static_cast<float>(-std::sin(a));
    expected_odd(0, 2 * k + 1) = static_cast<float>(std::cos(a));
    EXPECT_TRUE(all_close(rope.apply(e_even, at_p), expected_even, kTableTolerance))
        << "e_" << 2 * k;
    EXPECT_TRUE(all_close(rope.apply(e_odd, at_p), expected_odd, kTableTolerance))
        << "e_" << 2 * k + 1;
  }
}

TEST(RotaryPositionalEmbedding, ScoreDependsOnlyOnTheOffset) {
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  const Tensor2 q = random_rows(1, kDHead, 3), k = random_rows(1, kDHead, 4);
  auto score = [&](std::int64_t m, std::int64_t n) {
    const Tensor2 q_m = rope.apply(q, Positions{m}), k_n = rope.apply(k, Positions{n});
    return double(xt::sum(q_m * k_n)());
  };
  // Angles reach 63 rad, where float32 resolves an angle only to 1.9e-6: a rotation by float
  // angles moves a score of size |q||k| ~ 16 by up to ~6e-5. The reference (double angles) is
  // within ~1e-6; a rotation that is not relative is off by O(1).
  constexpr double kOffsetTolerance = 1e-4;
  double smallest = 1e9, largest = -1e9;
  for (std::int64_t m : {0, 3, 17, 25})
    for (std::int64_t n : {0, 5, 22, 31})
      for (std::int64_t s : {1, 9, 32}) {
        const double before = score(m, n), after = score(m + s, n + s);
        EXPECT_NEAR(after, before, kOffsetTolerance) << "m=" << m << " n=" << n << " s=" << s;
        smallest = std::min(smallest, before);
        largest = std::max(largest, before);
      }
  // ...and the score does depend on the offset, so the test is not passing on a no-op.
  EXPECT_GT(largest - smallest, 1.0);
}

TEST(RotaryPositionalEmbedding, UsesThePositionsNotTheRowIndex) {
  const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
  const Tensor2 x = random_rows(3, kDHead, 5);
  const Tensor2 y = rope.apply(x, Positions{9, 2, 40});
  for (std::size_t t = 0; t < 3; ++t) {
    const std::int64_t p = std::array<std::int64_t, 3>{9, 2, 40}[t];
    const Tensor2 row = xt::view(x, xt::range(t, t + 1));
    EXPECT_TRUE(all_close(xt::view(y, xt::range(t, t + 1)), rope.apply(row, Positions{p}), 0.0))
        << "t=" << t;
  }
}

TEST(RotaryPositionalEmbedding, FourDimensionalApplyRotatesEveryBatchElementAndHeadAlike) {
  const RotaryPositionalEmbedding rope(kTheta, 8, kMaxSeqLen);
  xt::random::seed(6);
  const Tensor4 x = xt::random::randn<float>({2, 3, 5, 8});
  const Positions positions = {4, 5, 6, 7, 8};
  const Tensor4 y = rope.apply(x, positions);
  ASSERT_EQ(y.shape(), x.shape());
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 3; ++h)
      EXPECT_TRUE(
          all_close(xt::view(y, b, h), rope.apply(Tensor2(xt::view(x, b, h)), positions), 0.0))
          << "b=" << b << " h=" << h;
}

TEST(RotaryPositionalEmbedding, RejectsPositionsOutsideTheTable) {
  const RotaryPositionalEmbedding rope(kTheta, 8, kMaxSeqLen);
  const Tensor2 x = xt::zeros<float>({3, 8});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(x, Positions{0, 1, 64});
      },
      {"64", "max_seq_len", "positions[2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(x, Positions{0, -1, 2});
      },
      {"-1", "positions[1]"}));
  const Tensor4 x4 = xt::zeros<float>({1, 2, 3, 8});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(x4, Positions{70, 1, 2});
      },
      {"70", "max_seq_len"}));
}

TEST(RotaryPositionalEmbedding, RejectsInputThatIsNotTByDHead) {
  const RotaryPositionalEmbedding rope(kTheta, 8, kMaxSeqLen);
  const Positions five = {0, 1, 2, 3, 4};
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(Tensor2(xt::zeros<float>({5, 6})), five);
      },
      {"(5, 6)", "8"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(Tensor2(xt::zeros<float>({4, 8})), five);
      },
      {"(4, 8)", "(5)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(Tensor4(xt::zeros<float>({2, 3, 5, 6})), five);
      },
      {"(2, 3, 5, 6)", "8"}));
}

// ---- Block C: causal self-attention with RoPE ---------------------------------------------------
TEST(RopeSelfAttention, AllPositionsZeroEqualsLab02CausalAttention) {
  const std::size_t B = 2, T = 5, d = 16, H = 2;
  const auto [w_q, w_k, w_v, w_o] = random_weights(d, 10);
  const Tensor3 x = random_tokens(B, T, d, 11);
  const RotaryPositionalEmbedding rope(kTheta, d / H, kMaxSeqLen);
  const MultiHeadResult result =
      rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, xt::zeros<std::int64_t>({T}));
  MultiHeadAttention mha(w_q, w_k, w_v, w_o, H);
  EXPECT_TRUE(all_close(result.output, mha.forward(x, causal_mask(T)), kTolerance));
  EXPECT_TRUE(all_close(result.weights, mha.attention_weights(), kTolerance));
}

TEST(RopeSelfAttention, ValuesAreNotRotated) {
  // With W_Q = W_K = 0 every score is exactly 0 at any position, so the weights are uniform over
  // the visible keys and nothing position-dependent remains, unless V is rotated. Hence exact.
  const std::size_t B = 2, T = 6, d = 16, H = 2;
  const auto [w_q, w_k, w_v, w_o] = random_weights(d, 12);
  const Tensor2 zero = xt::zeros<float>({d, d});
  const Tensor3 x = random_tokens(B, T, d, 13);
  const RotaryPositionalEmbedding rope(kTheta, d / H, kMaxSeqLen);
  const Tensor3 at_start =
      rope_self_attention(x, zero, zero, w_v, w_o, H, rope, range_of_positions(0, T)).output;
  const Tensor3 later =
      rope_self_attention(x, zero, zero, w_v, w_o, H, rope, range_of_positions(30, T)).output;
  EXPECT_TRUE(all_close(later, at_start, 0.0));
}

TEST(RopeSelfAttention, ShiftingEveryPositionLeavesTheOutputUnchanged) {
  const std::size_t B = 2, T = 6, d = 16, H = 2;
  const auto [w_q, w_k, w_v, w_o] = random_weights(d, 14);
  const Tensor3 x = random_tokens(B, T, d, 15);
  const RotaryPositionalEmbedding rope(kTheta, d / H, kMaxSeqLen);
  const MultiHeadResult at_start =
      rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, range_of_positions(0, T));
  const MultiHeadResult later =
      rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, range_of_positions(50, T));
  // Scores agree to ~1e-6 (ScoreDependsOnlyOnTheOffset); softmax and W_O keep that below 1e-5.
  EXPECT_TRUE(all_close(later.output, at_start.output, kTolerance));
  EXPECT_TRUE(all_close(later.weights, at_start.weights, kTolerance));
  // ...while positions that are not a uniform shift do change the output.
  const MultiHeadResult spread =
      rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, Positions{0, 3, 6, 9, 12, 15});
  EXPECT_FALSE(all_close(spread.output, at_start.output, 1e-3));
}

TEST(RopeSelfAttention, ChangingOneTokenOnlyAffectsItsOwnAndLaterPositions) {
  const std::size_t T = 7, d = 16, H = 2, changed = 3;
  const auto [w_q, w_k, w_v, w_o] = random_weights(d, 16);
  const RotaryPositionalEmbedding rope(kTheta, d / H, kMaxSeqLen);
  const Positions positions = range_of_positions(10, T);
  Tensor3 x = random_tokens(1, T, d, 17);
  const Tensor3 before = rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, positions).output;
  xt::view(x, 0, changed) *= -2.0f;
  const Tensor3 after = rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, positions).output;
  for (std::size_t i = 0; i < T; ++i) {
    const bool same = all_close(xt::view(after, 0, i), xt::view(before, 0, i), kCausalTolerance);
    EXPECT_EQ(same, i < changed) << "position " << i;
  }
}

TEST(RopeSelfAttention, WeightsAreCausalAndRowsSumToOne) {
  const std::size_t B = 2, T = 6, d = 16, H = 4;
  const auto [w_q, w_k, w_v, w_o] = random_weights(d, 18);
  const RotaryPositionalEmbedding rope(kTheta, d / H, kMaxSeqLen);
  const MultiHeadResult result = rope_self_attention(random_tokens(B, T, d, 19), w_q, w_k, w_v, w_o,
                                                     H, rope, range_of_positions(0, T));
  ASSERT_EQ(result.output.shape(), (std::array<std::size_t, 3>{B, T, d}));
  ASSERT_EQ(result.weights.shape(), (std::array<std::size_t, 4>{B, H, T, T}));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = i + 1; j < T; ++j)
          EXPECT_EQ(result.weights(b, h, i, j), 0.0f)
              << "b=" << b << " h=" << h << " i=" << i << " j=" << j;
  EXPECT_TRUE(all_close(xt::sum(result.weights, {3}), xt::ones<float>({B, H, T}), kTolerance));
}

TEST(RopeSelfAttention, RejectsInputsOfTheWrongShape) {
  const std::size_t d = 16, H = 2;
  // References, not a structured binding: the lambdas below capture them, which clang 14 (the
  // sanitizer build) does not allow for bindings before C++20.
  const std::array<Tensor2, 4> weights = random_weights(d, 20);
  const Tensor2 &w_q = weights[0], &w_k = weights[1], &w_v = weights[2], &w_o = weights[3];
  const Tensor3 x = xt::zeros<float>({2, 6, 16});
  const RotaryPositionalEmbedding rope(kTheta, 8, kMaxSeqLen), narrow(kTheta, 4, kMaxSeqLen);
  const Positions six = range_of_positions(0, 6);
  const Tensor2 thin = xt::zeros<float>({16, 8});
  EXPECT_TRUE(
      throws_invalid_argument([&] { rope_self_attention(x, w_q, thin, w_v, w_o, H, rope, six); },
                              {"(2, 6, 16)", "(16, 8)", "w_k"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { rope_self_attention(x, w_q, w_k, w_v, w_o, 3, rope, six); }, {"16", "3"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { rope_self_attention(x, w_q, w_k, w_v, w_o, 0, rope, six); }, {"n_heads"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { rope_self_attention(x, w_q, w_k, w_v, w_o, H, narrow, six); }, {"4", "8"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, range_of_positions(0, 5)); },
      {"(5)", "(2, 6, 16)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { rope_self_attention(x, w_q, w_k, w_v, w_o, H, rope, range_of_positions(60, 6)); },
      {"64", "max_seq_len"}));
}

// ---- Parity with an explicit RoPE in torch (float64) + causal nn.MultiheadAttention -------------

// Parity with torch, to kTorchTolerance absolute (support/fixtures.hpp): the tables are built
// from double angles, so RoPE adds no error of its own beyond float32 rounding of O(1) values.

// positions.npy of a fixture: int64, (T,).
Positions fixture_positions(const std::string& name) {
  const auto path = testing::fixtures_dir() / name / "positions.npy";
  const xt::xarray<std::int64_t> values = workbench::load_npy_i64(path);
  if (values.dimension() != 1) throw workbench::NpyError(path.string() + " is not 1-D");
  Positions positions = Positions::from_shape({values.size()});
  std::copy(values.begin(), values.end(), positions.begin());
  return positions;
}

void expect_matches_torch(const std::string& name) {
  SCOPED_TRACE("fixture " + name);
  const Fixture fixture(name);
  const auto& meta = fixture.meta();
  const std::size_t H = meta.at("n_heads").get<std::size_t>();
  const Tensor3 x = fixture.array<3>("x");
  const Positions positions = fixture_positions(name);
  const RotaryPositionalEmbedding rope(meta.at("theta").get<float>(), x.shape(2) / H,
                                       meta.at("max_seq_len").get<std::size_t>());
  const Tensor2 w_q = fixture.array<2>("w_q"), w_k = fixture.array<2>("w_k");
  auto rotated = [&](const Tensor2& w) {
    const Tensor2 rows =
        xt::linalg::dot(Tensor2(xt::reshape_view(
                            x, std::array<std::size_t, 2>{x.shape(0) * x.shape(1), x.shape(2)})),
                        w);
    return rope.apply(split_heads(xt::reshape_view(rows, x.shape()), H), positions);
  };
  EXPECT_TRUE(all_close(rotated(w_q), fixture.array<4>("q_rot"), kTorchTolerance));
  EXPECT_TRUE(all_close(rotated(w_k), fixture.array<4>("k_rot"), kTorchTolerance));
  const MultiHeadResult result = rope_self_attention(x, w_q, w_k, fixture.array<2>("w_v"),
                                                     fixture.array<2>("w_o"), H, rope, positions);
  EXPECT_TRUE(all_close(result.output, fixture.array<3>("y"), kTorchTolerance));
  EXPECT_TRUE(all_close(result.weights, fixture.array<4>("attn"), kTorchTolerance));
}

TEST(RopeSelfAttention, MatchesTorchCausal) { expect_matches_torch("rope_causal"); }
TEST(RopeSelfAttention, MatchesTorchAtOffsetPositions) {
  expect_matches_torch("rope_offset_positions");
}

}  // namespace
}  // namespace minimodel
