// Lab 06: cross-attention with masks, biases, dropout and Xavier init, checked against invariants,
// a plain-loop reference written here, lab 01's MultiHeadAttention and torch.nn.MultiheadAttention.
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/cross_attention.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"
#include "tensors/npy_io.hpp"
#include "util/heap_meter.hpp"

namespace minimodel {
namespace {

using testing::random_tokens;

using testing::all_close;
using testing::kTorchTolerance;
using testing::throws_invalid_argument;

// float32 sums of O(10) products of O(1) numbers: errors near 1e-6, so 1e-5 is a real bound.
constexpr double kTolerance = 1e-5;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::optional<Tensor1> random_bias(std::size_t d_model, int seed) {
  xt::random::seed(seed);
  return Tensor1(xt::random::randn<float>({d_model}) * 0.5f);
}

// A module with Xavier weights from `seed` and random (nonzero) biases, so that b_o is visible.
MultiheadCrossAttention with_random_biases(std::size_t d, std::size_t H, int seed,
                                           float dropout = 0.0f, std::uint64_t dropout_seed = 0) {
  const MultiheadCrossAttention init(d, H, static_cast<std::uint64_t>(seed), false);
  return MultiheadCrossAttention(init.w_q(), init.w_k(), init.w_v(), init.w_o(),
                                 random_bias(d, seed + 1), random_bias(d, seed + 2),
                                 random_bias(d, seed + 3), random_bias(d, seed + 4), H, dropout,
                                 dropout_seed);
}

BoolTensor2 padding(std::size_t B, std::size_t S,
                    const std::vector<std::vector<std::size_t>>& keys) {
  BoolTensor2 mask = xt::zeros<bool>({B, S});
  for (std::size_t b = 0; b < keys.size(); ++b)
    for (std::size_t s : keys[b]) mask(b, s) = true;
  return mask;
}

struct Reference {
  Tensor3 output;   // (B, T, d_model)
  Tensor4 weights;  // (B, H, T, S)
};

// The definition of lab 06 written as plain loops in double, independent of the implementation:
// per head, scores q·k / sqrt(d_head) + attn_mask over the keys not removed (padded, or attn_mask
// <= kMaskedScore), softmax, weighted sum of values; a query with no key left gets zero weights.
Reference plain_loops(const MultiheadCrossAttention& m, const Tensor3& query, const Tensor3& key,
                      const Tensor3& value, const std::optional<BoolTensor2>& pad,
                      const std::optional<Tensor4>& attn_mask) {
  const std::size_t B = query.shape(0), T = query.shape(1), S = key.shape(1), d = m.d_model();
  const std::size_t H = m.n_heads(), dh = d / H;
  auto project = [&](const Tensor3& x, const Tensor2& w, const std::optional<Tensor1>& bias) {
    xt::xtensor<double, 3> y = xt::zeros<double>({x.shape(0), x.shape(1), d});
    for (std::size_t b = 0; b < x.shape(0); ++b)
      for (std::size_t t = 0; t < x.shape(1); ++t)
        for (std::size_t j = 0; j < d; ++j) {
          double sum = bias ? (*bias)(j) : 0.0;
          for (std::size_t i = 0; i < d; ++i) sum += double(x(b, t, i)) * w(i, j);
          y(b, t, j) = sum;
        }
    return y;
  };
  const auto q = project(query, m.w_q(), m.b_q());
  const auto k = project(key, m.w_k(), m.b_k());
  const auto v = project(value, m.w_v(), m.b_v());
  xt::xtensor<double, 3> context = xt::zeros<double>({B, T, d});
  Reference ref{Tensor3({B, T, d}), xt::zeros<float>({B, H, T, S})};
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> score(S, -std::numeric_limits<double>::infinity());
        double best = -std::numeric_limits<double>::infinity();
        for (std::size_t s = 0; s < S; ++s) {
          const double added =
              attn_mask ? (*attn_mask)(attn_mask->shape(0) == 1 ? 0 : b, 0, t, s) : 0.0;
          if ((pad && (*pad)(b, s)) || added <= kMaskedScore) continue;
          double dot = 0.0;
          for (std::size_t e = 0; e < dh; ++e) dot += q(b, t, h * dh + e) * k(b, s, h * dh + e);
          score[s] = dot / std::sqrt(double(dh)) + added;
          best = std::max(best, score[s]);
        }
        if (std::isinf(best)) continue;  // no key left: zero weights, zero context
        double total = 0.0;
        for (double& x : score) total += (x = std::exp(x - best));
        for (std::size_t s = 0; s < S; ++s) {
          ref.weights(b, h, t, s) = static_cast<float>(score[s] / total);
          for (std::size_t e = 0; e < dh; ++e)
            context(b, t, h * dh + e) += score[s] / total * v(b, s, h * dh + e);
        }
      }
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < d; ++j) {
        double sum = m.b_o() ? (*m.b_o())(j) : 0.0;
        for (std::size_t i = 0; i < d; ++i) sum += context(b, t, i) * m.w_o()(i, j);
        ref.output(b, t, j) = static_cast<float>(sum);
      }
  return ref;
}

// ---- Block A: the weights ----------------------------------------------------------------------

TEST(MultiheadCrossAttention, SeededWeightsFollowTheBlueprint) {
  // BLUEPRINT.md, Lab 06: W_Q, W_K, W_V, W_O in that order, row-major, from
  // uniform_real_distribution<float>(-a, a), a = sqrt(6 / (d + d)), one mt19937_64(seed).
  const std::size_t d = 8;
  MultiheadCrossAttention m(d, 2, 42);
  std::mt19937_64 generator(42);
  const float bound = std::sqrt(6.0f / static_cast<float>(d + d));
  std::uniform_real_distribution<float> uniform(-bound, bound);
  for (const Tensor2* w : {&m.w_q(), &m.w_k(), &m.w_v(), &m.w_o()}) {
    Tensor2 expected({d, d});
    for (float& value : expected) value = uniform(generator);
    EXPECT_TRUE(all_close(*w, expected, 0.0));
  }
  for (const auto* b : {&m.b_q(), &m.b_k(), &m.b_v(), &m.b_o()}) {
    ASSERT_TRUE(b->has_value());
    EXPECT_TRUE(all_close(**b, xt::zeros<float>({d}), 0.0));
  }
  const MultiheadCrossAttention no_bias(d, 2, 42, false);
  EXPECT_FALSE(no_bias.b_q() || no_bias.b_k() || no_bias.b_v() || no_bias.b_o());
  EXPECT_TRUE(all_close(no_bias.w_o(), m.w_o(), 0.0));
}

TEST(MultiheadCrossAttention, XavierUniformHasTheBoundAndVarianceOfItsFans) {
  const std::size_t d = 256;
  const MultiheadCrossAttention m(d, 4, 7);
  std::vector<double> values;
  for (const Tensor2* w : {&m.w_q(), &m.w_k(), &m.w_v(), &m.w_o()})
    values.insert(values.end(), w->begin(), w->end());
  const double n = double(values.size());  // 4 * 256^2 = 262144 draws
  const double a = std::sqrt(6.0 / double(d + d)), expected_var = 2.0 / double(d + d);
  double sum = 0.0, sum_sq = 0.0, largest = 0.0;
  for (double x : values) sum += x, sum_sq += x * x, largest = std::max(largest, std::abs(x));
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Uniform(-a, a): Var x = a^2/3, Var x^2 = a^4/5 - a^4/9. Allow 5 standard errors each: a correct
  // draw fails with probability ~6e-7; a wrong bound (e.g. sqrt(6/d)) is off by ~100 errors.
  const double mean_error = a / std::sqrt(3.0 * n);
  const double var_error = a * a * std::sqrt((1.0 / 5 - 1.0 / 9) / n);
  EXPECT_LE(std::abs(mean), 5 * mean_error);
  EXPECT_LE(std::abs(var - expected_var), 5 * var_error) << "variance " << var;
  EXPECT_LE(largest, a);  // uniform_real_distribution draws from [-a, a)
  // 262144 uniform draws all below 0.999 a has probability 0.999^262144 ~ e^-262.
  EXPECT_GE(largest, 0.999 * a);
}

TEST(MultiheadCrossAttention, StartsInEvaluationMode) {
  MultiheadCrossAttention m(8, 2, 0, true, 0.1f);
  EXPECT_FALSE(m.training());
  m.train();
  EXPECT_TRUE(m.training());
  m.train(false);
  EXPECT_FALSE(m.training());
  EXPECT_EQ(m.d_head(), 4u);
  EXPECT_FLOAT_EQ(m.dropout(), 0.1f);
}

TEST(MultiheadCrossAttention, RejectsHeadsThatDoNotDivideDModel) {
  EXPECT_TRUE(throws_invalid_argument([] { MultiheadCrossAttention(64, 5, 0); }, {"64", "5"}));
  EXPECT_TRUE(throws_invalid_argument([] { MultiheadCrossAttention(64, 0, 0); }, {"n_heads"}));
}

TEST(MultiheadCrossAttention, RejectsDropoutOutsideZeroToOne) {
  for (float p : {1.0f, -0.1f, std::numeric_limits<float>::quiet_NaN()})
    EXPECT_TRUE(throws_invalid_argument([p] { MultiheadCrossAttention(8, 2, 0, true, p); },
                                        {"dropout", "[0, 1)"}))
        << "p = " << p;
}

TEST(MultiheadCrossAttention, RejectsWeightsAndBiasesOfTheWrongShape) {
  const Tensor2 square = xt::zeros<float>({8, 8}), wide = xt::zeros<float>({8, 6});
  const Tensor1 bias = xt::zeros<float>({8}), short_bias = xt::zeros<float>({7});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { MultiheadCrossAttention(wide, wide, wide, wide, {}, {}, {}, {}, 2); }, {"(8, 6)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { MultiheadCrossAttention(square, square, wide, square, {}, {}, {}, {}, 2); },
      {"(8, 8)", "(8, 6)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        MultiheadCrossAttention(square, square, square, square, bias, short_bias, bias, bias, 2);
      },
      {"b_k", "(7)"}));
}

// ---- Block B: the masks ------------------------------------------------------------------------

TEST(AsAttnMask, AddsTwoLeadingAxes) {
  const Tensor2 mask = {{0.0f, -1.0f, kMaskedScore}, {2.0f, 0.0f, -kInf}};
  const Tensor4 four = as_attn_mask(mask);
  EXPECT_EQ(four.shape(), (std::array<std::size_t, 4>{1, 1, 2, 3}));
  EXPECT_EQ(Tensor2(xt::view(four, 0, 0)), mask);  // ==, not all_close: -inf - -inf is NaN
}

TEST(RemovedKeys, CombinesPaddingAndAttnMaskFromTheMasksAlone) {
  CrossAttentionOptions options;
  options.key_padding_mask = padding(2, 3, {{2}, {}});
  // Only values <= kMaskedScore remove a key; -5 is an ordinary additive penalty.
  options.attn_mask = as_attn_mask(Tensor2{{0.0f, kMaskedScore, 0.0f}, {-kInf, -5.0f, 0.0f}});
  const BoolTensor3 removed = removed_keys(options, 2, 2, 3);
  const BoolTensor3 expected = {{{false, true, true}, {true, false, true}},
                                {{false, true, false}, {true, false, false}}};
  EXPECT_EQ(removed, expected);
  EXPECT_EQ(removed_keys({}, 2, 2, 3), BoolTensor3(xt::zeros<bool>({2, 2, 3})));
}

TEST(RemovedKeys, UsesTheAttnMaskOfEachSequence) {
  CrossAttentionOptions options;
  Tensor4 per_sequence = xt::zeros<float>({2, 1, 1, 2});
  per_sequence(1, 0, 0, 0) = kMaskedScore;
  options.attn_mask = per_sequence;
  const BoolTensor3 expected = {{{false, false}}, {{true, false}}};
  EXPECT_EQ(removed_keys(options, 2, 1, 2), expected);
}

TEST(RemovedKeys, RejectsMasksOfTheWrongShape) {
  CrossAttentionOptions bad_padding;
  bad_padding.key_padding_mask = BoolTensor2(xt::zeros<bool>({2, 5}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { removed_keys(bad_padding, 2, 4, 6); }, {"(2, 5)", "(2, 6)"}));
  CrossAttentionOptions bad_mask;
  bad_mask.attn_mask = Tensor4(xt::zeros<float>({1, 4, 4, 6}));  // a head axis is not allowed
  EXPECT_TRUE(throws_invalid_argument([&] { removed_keys(bad_mask, 2, 4, 6); },
                                      {"(1, 4, 4, 6)", "(2 or 1, 1, 4, 6)"}));
}

// ---- Block C: forward --------------------------------------------------------------------------

TEST(MultiheadCrossAttention, KeepsTheShapesWhenQueriesAndKeysDifferInLength) {
  MultiheadCrossAttention m(16, 4, 0);
  const AttentionOutput out =
      m.forward(random_tokens(2, 3, 16, 1), random_tokens(2, 7, 16, 2), random_tokens(2, 7, 16, 3));
  EXPECT_EQ(out.output.shape(), (std::array<std::size_t, 3>{2, 3, 16}));
  ASSERT_TRUE(out.weights.has_value());
  EXPECT_EQ(out.weights->shape(), (std::array<std::size_t, 4>{2, 4, 3, 7}));
}

TEST(MultiheadCrossAttention, NeedWeightsFalseReturnsNoWeightsAndTheSameOutput) {
  MultiheadCrossAttention m = with_random_biases(16, 4, 10);
  const Tensor3 q = random_tokens(2, 3, 16, 1), kv = random_tokens(2, 5, 16, 2);
  CrossAttentionOptions options;
  options.need_weights = false;
  const AttentionOutput without = m.forward(q, kv, kv, options);
  EXPECT_FALSE(without.weights.has_value());
  EXPECT_TRUE(all_close(without.output, m.forward(q, kv, kv).output, 0.0));  // same arithmetic
}

TEST(MultiheadCrossAttention, NeedWeightsFalseDoesNotKeepTheWeights) {
  // The weights of every head are (B, H, T, S) = (2, 8, 256, 256) floats, 4 MiB. Without them a
  // forward needs a few (T, S) tables at a time, 256 KiB each: half the weights is a loose bound
  // that a version keeping them (and dropping them at the end) cannot meet.
  constexpr std::size_t B = 2, H = 8, T = 256, d_model = 32;
  MultiheadCrossAttention m = with_random_biases(d_model, H, 11);
  const Tensor3 x = random_tokens(B, T, d_model, 3);
  CrossAttentionOptions options;
  options.need_weights = false;
  const std::size_t weights = B * H * T * T * sizeof(float);
  EXPECT_LT(workbench::peak_extra_heap_bytes([&] { m.forward(x, x, x, options); }), weights / 2);
  EXPECT_GE(workbench::peak_extra_heap_bytes([&] { m.forward(x, x, x); }), weights)
      << "with need_weights, the weights are returned";
}

TEST(MultiheadCrossAttention, EveryUnmaskedRowSumsToOne) {
  MultiheadCrossAttention m = with_random_biases(32, 4, 20);
  CrossAttentionOptions options;
  options.key_padding_mask = padding(3, 9, {{}, {8}, {0, 1, 2}});
  const AttentionOutput out =
      m.forward(random_tokens(3, 5, 32, 4) * 3.0f,  // peakier rows
                random_tokens(3, 9, 32, 5), random_tokens(3, 9, 32, 6), options);
  const Tensor3 row_sums = xt::sum(*out.weights, {3});
  EXPECT_TRUE(all_close(row_sums, xt::ones<float>({3, 4, 5}), kTolerance));
}

TEST(MultiheadCrossAttention, PaddedKeysGetExactlyZeroWeight) {
  MultiheadCrossAttention m = with_random_biases(16, 4, 30);
  CrossAttentionOptions options;
  options.key_padding_mask = padding(2, 6, {{0}, {4, 5}});
  const Tensor3 kv = random_tokens(2, 6, 16, 8) * 10.0f;  // large scores must not leak through
  const AttentionOutput out = m.forward(random_tokens(2, 4, 16, 7), kv, kv, options);
  // Exactly 0, not merely small: exp(-inf) = 0 (or exp(-1e9 - max) underflows to 0).
  EXPECT_TRUE(
      all_close(xt::view(*out.weights, 0, xt::all(), xt::all(), 0), xt::zeros<float>({4, 4}), 0.0));
  EXPECT_TRUE(all_close(xt::view(*out.weights, 1, xt::all(), xt::all(), xt::range(4, 6)),
                        xt::zeros<float>({4, 4, 2}), 0.0));
}

TEST(MultiheadCrossAttention, PaddingEqualsDroppingThePaddedKeys) {
  MultiheadCrossAttention m = with_random_biases(16, 4, 40);
  const Tensor3 q = random_tokens(2, 4, 16, 1), k = random_tokens(2, 6, 16, 2),
                v = random_tokens(2, 6, 16, 3);
  CrossAttentionOptions options;
  options.key_padding_mask = padding(2, 6, {{}, {4, 5}});
  const AttentionOutput padded = m.forward(q, k, v, options);
  const Tensor3 q1 = xt::view(q, xt::range(1, 2));
  const Tensor3 k1 = xt::view(k, xt::range(1, 2), xt::range(0, 4));
  const Tensor3 v1 = xt::view(v, xt::range(1, 2), xt::range(0, 4));
  const AttentionOutput short_keys = m.forward(q1, k1, v1);
  EXPECT_TRUE(all_close(xt::view(padded.output, xt::range(1, 2)), short_keys.output, kTolerance));
  EXPECT_TRUE(
      all_close(xt::view(*padded.weights, xt::range(1, 2), xt::all(), xt::all(), xt::range(0, 4)),
                *short_keys.weights, kTolerance));
}

TEST(MultiheadCrossAttention, MasksCombineAsInAPlainLoopReference) {
  MultiheadCrossAttention m = with_random_biases(8, 2, 50);
  const Tensor3 q = random_tokens(2, 3, 8, 1), k = random_tokens(2, 5, 8, 2),
                v = random_tokens(2, 5, 8, 3);
  const BoolTensor2 pad = padding(2, 5, {{4}, {0}});
  Tensor4 per_sequence = xt::zeros<float>({2, 1, 3, 5});
  per_sequence(0, 0, 0, 1) = -1.5f;         // additive penalty
  per_sequence(0, 0, 2, 3) = kMaskedScore;  // removed
  per_sequence(1, 0, 1, 2) = -kInf;         // removed, torch style
  per_sequence(1, 0, 2, 4) = 0.75f;         // additive bonus
  const Tensor4 shared = as_attn_mask(xt::view(per_sequence, 1, 0));
  for (const Tensor4& attn_mask : {per_sequence, shared}) {
    SCOPED_TRACE("attn_mask " + shape_of(attn_mask));
    CrossAttentionOptions options;
    options.key_padding_mask = pad;
    options.attn_mask = attn_mask;
    const AttentionOutput out = m.forward(q, k, v, options);
    const Reference expected = plain_loops(m, q, k, v, pad, attn_mask);
    EXPECT_TRUE(all_close(out.output, expected.output, kTolerance));
    EXPECT_TRUE(all_close(*out.weights, expected.weights, kTolerance));
  }
}

TEST(MultiheadCrossAttention, AFullyMaskedQueryGetsZeroWeightsAndOutputBo) {
  MultiheadCrossAttention m = with_random_biases(8, 2, 60);
  const Tensor3 q = random_tokens(2, 3, 8, 1), k = random_tokens(2, 4, 8, 2),
                v = random_tokens(2, 4, 8, 3);
  CrossAttentionOptions options;
  options.key_padding_mask = padding(2, 4, {{0, 1, 2, 3}, {2, 3}});  // sequence 0: every key
  Tensor2 mask = xt::zeros<float>({3, 4});
  mask(1, 0) = mask(1, 1) = -kInf;  // with the padding, query 1 of sequence 1 has no key left
  options.attn_mask = as_attn_mask(mask);
  const AttentionOutput out = m.forward(q, k, v, options);
  // Exactly: the context is a sum of zeros, 0 @ W_O = 0, and adding b_o is exact.
  for (const auto& [b, t] : {std::pair<std::size_t, std::size_t>{0, 0}, {0, 1}, {0, 2}, {1, 1}}) {
    SCOPED_TRACE("sequence " + std::to_string(b) + ", query " + std::to_string(t));
    EXPECT_TRUE(all_close(xt::view(*out.weights, b, xt::all(), t), xt::zeros<float>({2, 4}), 0.0));
    EXPECT_TRUE(all_close(xt::view(out.output, b, t), *m.b_o(), 0.0));
  }
  // The other rows are untouched by it, and nothing anywhere is NaN (all_close reports NaN).
  const Reference expected = plain_loops(m, q, k, v, options.key_padding_mask, options.attn_mask);
  EXPECT_TRUE(all_close(out.output, expected.output, kTolerance));
  EXPECT_TRUE(all_close(*out.weights, expected.weights, kTolerance));
}

TEST(MultiheadCrossAttention, SelfAttentionWithoutBiasesEqualsLab01) {
  MultiHeadAttention mha(16, 4, 70);
  MultiheadCrossAttention m(mha.w_q(), mha.w_k(), mha.w_v(), mha.w_o(), {}, {}, {}, {}, 4);
  const Tensor3 x = random_tokens(2, 5, 16, 1);
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "no mask");
    const auto mask = causal ? std::optional<Tensor2>(causal_mask(5)) : std::nullopt;
    CrossAttentionOptions options;
    if (mask) options.attn_mask = as_attn_mask(*mask);
    const AttentionOutput out = m.forward(x, x, x, options);
    EXPECT_TRUE(all_close(out.output, mha.forward(x, mask), kTolerance));
    EXPECT_TRUE(all_close(*out.weights, mha.attention_weights(), kTolerance));
  }
}

TEST(MultiheadCrossAttention, TransformQkActsOnPerHeadQueriesAndKeysBeforeTheScores) {
  MultiheadCrossAttention m = with_random_biases(16, 4, 80);
  const Tensor3 q = random_tokens(2, 3, 16, 1), kv = random_tokens(2, 5, 16, 2);
  std::vector<std::size_t> q_shape, k_shape;
  CrossAttentionOptions options;
  options.transform_qk = [&](Tensor4& per_head_q, Tensor4& per_head_k) {
    q_shape.assign(per_head_q.shape().begin(), per_head_q.shape().end());
    k_shape.assign(per_head_k.shape().begin(), per_head_k.shape().end());
    per_head_q *= 2.0f;
  };
  const AttentionOutput transformed = m.forward(q, kv, kv, options);
  EXPECT_EQ(q_shape, (std::vector<std::size_t>{2, 4, 3, 4}));  // (B, H, T, d_head)
  EXPECT_EQ(k_shape, (std::vector<std::size_t>{2, 4, 5, 4}));  // (B, H, S, d_head)
  // Doubling the projected queries is doubling W_Q and b_q.
  MultiheadCrossAttention doubled(m.w_q() * 2.0f, m.w_k(), m.w_v(), m.w_o(),
                                  Tensor1(*m.b_q() * 2.0f), m.b_k(), m.b_v(), m.b_o(), 4);
  const AttentionOutput expected = doubled.forward(q, kv, kv);
  EXPECT_TRUE(all_close(transformed.output, expected.output, kTolerance));
  EXPECT_TRUE(all_close(*transformed.weights, *expected.weights, kTolerance));
}

TEST(MultiheadCrossAttention, EvaluationModeDropoutIsTheIdentity) {
  MultiheadCrossAttention with_dropout(16, 4, 90, true, 0.5f), without(16, 4, 90, true, 0.0f);
  const Tensor3 q = random_tokens(2, 3, 16, 1), kv = random_tokens(2, 5, 16, 2);
  const AttentionOutput a = with_dropout.forward(q, kv, kv), b = without.forward(q, kv, kv);
  EXPECT_TRUE(all_close(a.output, b.output, 0.0));  // same weights, same arithmetic
  EXPECT_TRUE(all_close(*a.weights, *b.weights, 0.0));
}

TEST(MultiheadCrossAttention, TrainingModeDropoutIsReproducibleWithTheSameSeed) {
  MultiheadCrossAttention first(16, 4, 91, true, 0.5f), second(16, 4, 91, true, 0.5f);
  first.train();
  second.train();
  const Tensor3 q = random_tokens(2, 3, 16, 1), kv = random_tokens(2, 5, 16, 2);
  const AttentionOutput a = first.forward(q, kv, kv);
  EXPECT_TRUE(all_close(a.output, second.forward(q, kv, kv).output, 0.0));  // same draws
  // The generator moves on: the next call drops other weights.
  EXPECT_FALSE(all_close(*first.forward(q, kv, kv).weights, *a.weights, 1e-3));
}

TEST(MultiheadCrossAttention, DropoutZeroesAboutPOfTheWeightsAndScalesTheRest) {
  const float p = 0.25f;
  MultiheadCrossAttention dropping(16, 4, 92, true, p), reference(16, 4, 92, true, p);
  dropping.train();
  const Tensor3 q = random_tokens(4, 32, 16, 1), kv = random_tokens(4, 32, 16, 2);
  const Tensor4 dropped = *dropping.forward(q, kv, kv).weights;  // (4, 4, 32, 32)
  const Tensor4 kept = *reference.forward(q, kv, kv).weights;    // evaluation mode
  std::size_t zeros = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < dropped.size(); ++i) {
    ASSERT_GT(kept.flat(i), 0.0f);  // without masks every weight is positive
    if (dropped.flat(i) == 0.0f)
      ++zeros;
    else
      worst = std::max(worst, std::abs(double(dropped.flat(i)) - double(kept.flat(i)) / (1.0 - p)));
  }
  const double n = double(dropped.size()), rate = double(zeros) / n;
  // 16384 Bernoulli(p) draws: standard error sqrt(p(1-p)/n) = 0.0034; 5 errors = 0.017.
  EXPECT_LE(std::abs(rate - p), 5 * std::sqrt(p * (1 - p) / n)) << "drop rate " << rate;
  // Kept weights are w / (1 - p): weights <= 1.34, so one float32 rounding is below 1.6e-7.
  EXPECT_LE(worst, 1e-6);
}

TEST(MultiheadCrossAttention, ReturnedWeightsAreTheDroppedOnesThatMadeTheOutput) {
  MultiheadCrossAttention m = with_random_biases(8, 2, 93, 0.3f, 5);
  m.train();
  const Tensor3 q = random_tokens(2, 3, 8, 1), kv = random_tokens(2, 6, 8, 2);
  const AttentionOutput out = m.forward(q, kv, kv);
  const Tensor4& w = *out.weights;  // (2, 2, 3, 6)
  EXPECT_GT(xt::sum(xt::equal(w, 0.0f))(), 0u) << "no weight was dropped; the test is vacuous";
  // output = concat_h(w[b, h] @ V_h) @ W_O + b_o, written out here in double.
  Tensor3 expected({2, 3, 8});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < 3; ++t)
      for (std::size_t j = 0; j < 8; ++j) {
        double y = (*m.b_o())(j);
        for (std::size_t i = 0; i < 8; ++i) {
          const std::size_t h = i / 4;  // d_head = 4
          double context = 0.0;
          for (std::size_t s = 0; s < 6; ++s) {
            double v = (*m.b_v())(i);
            for (std::size_t c = 0; c < 8; ++c) v += double(kv(b, s, c)) * m.w_v()(c, i);
            context += w(b, h, t, s) * v;
          }
          y += context * m.w_o()(i, j);
        }
        expected(b, t, j) = static_cast<float>(y);
      }
  EXPECT_TRUE(all_close(out.output, expected, kTolerance));
}

TEST(MultiheadCrossAttention, RejectsInputsOfTheWrongWidth) {
  MultiheadCrossAttention m(16, 4, 0);
  const Tensor3 good_q = xt::zeros<float>({2, 4, 16}), good_kv = xt::zeros<float>({2, 6, 16});
  const Tensor3 narrow_q = xt::zeros<float>({2, 4, 12}), narrow_kv = xt::zeros<float>({2, 6, 12});
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(narrow_q, good_kv, good_kv); },
                                      {"query", "(2, 4, 12)", "16"}));
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(good_q, narrow_kv, good_kv); },
                                      {"key", "(2, 6, 12)", "16"}));
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(good_q, good_kv, narrow_kv); },
                                      {"value", "(2, 6, 12)", "16"}));
}

TEST(MultiheadCrossAttention, RejectsMismatchedBatchesAndLengths) {
  MultiheadCrossAttention m(16, 4, 0);
  const Tensor3 q = xt::zeros<float>({2, 4, 16}), kv = xt::zeros<float>({2, 6, 16});
  const Tensor3 other_batch = xt::zeros<float>({3, 6, 16}), shorter = xt::zeros<float>({2, 5, 16});
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(q, other_batch, other_batch); },
                                      {"(2, 4, 16)", "(3, 6, 16)"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { m.forward(q, kv, shorter); }, {"(2, 6, 16)", "(2, 5, 16)"}));
}

TEST(MultiheadCrossAttention, RejectsMasksOfTheWrongShape) {
  MultiheadCrossAttention m(16, 4, 0);
  const Tensor3 q = xt::zeros<float>({2, 4, 16}), kv = xt::zeros<float>({2, 6, 16});
  CrossAttentionOptions bad_padding;
  bad_padding.key_padding_mask = BoolTensor2(xt::zeros<bool>({2, 5}));
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(q, kv, kv, bad_padding); },
                                      {"(2, 5)", "(2, 6, 16)"}));
  CrossAttentionOptions bad_mask;
  bad_mask.attn_mask = as_attn_mask(xt::zeros<float>({4, 5}));
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(q, kv, kv, bad_mask); },
                                      {"(1, 1, 4, 5)", "(2, 4, 16)", "(2, 6, 16)"}));
}

TEST(MultiheadCrossAttention, RejectsATransformThatChangesShapes) {
  MultiheadCrossAttention m(16, 4, 0);
  const Tensor3 q = xt::zeros<float>({2, 4, 16}), kv = xt::zeros<float>({2, 6, 16});
  CrossAttentionOptions options;
  options.transform_qk = [](Tensor4& per_head_q, Tensor4&) {
    per_head_q = xt::zeros<float>({2, 4, 4, 2});
  };
  EXPECT_TRUE(throws_invalid_argument([&] { m.forward(q, kv, kv, options); },
                                      {"transform_qk", "(2, 4, 4, 2)"}));
}

// ---- Parity with torch.nn.MultiheadAttention (tests/fixtures/README.md) -------------------------

void expect_cross_matches_torch(const std::string& name) {
  SCOPED_TRACE("fixture " + name);
  const testing::Fixture fixture(name);
  const bool bias = fixture.meta().at("bias").get<bool>();
  auto b = [&](const char* which) {
    return bias ? std::optional<Tensor1>(fixture.array<1>(which)) : std::nullopt;
  };
  MultiheadCrossAttention m(fixture.array<2>("w_q"), fixture.array<2>("w_k"),
                            fixture.array<2>("w_v"), fixture.array<2>("w_o"), b("b_q"), b("b_k"),
                            b("b_v"), b("b_o"), fixture.meta().at("n_heads").get<std::size_t>());
  CrossAttentionOptions options;
  const auto pad =
      workbench::load_npy_bool(testing::fixtures_dir() / name / "key_padding_mask.npy");
  ASSERT_EQ(pad.dimension(), 2u);
  options.key_padding_mask = BoolTensor2(pad);
  if (fixture.meta().at("attn_mask").get<bool>())
    options.attn_mask = as_attn_mask(fixture.array<2>("attn_mask"));
  const AttentionOutput out = m.forward(fixture.array<3>("query"), fixture.array<3>("key"),
                                        fixture.array<3>("value"), options);
  EXPECT_TRUE(all_close(out.output, fixture.array<3>("y"), kTorchTolerance));
  ASSERT_TRUE(out.weights.has_value());
  EXPECT_TRUE(all_close(*out.weights, fixture.array<4>("attn"), kTorchTolerance));
}

TEST(MultiheadCrossAttention, MatchesTorchWithKeyPadding) {
  expect_cross_matches_torch("cross_padding");
}
TEST(MultiheadCrossAttention, MatchesTorchWithAnAttnMaskAndPadding) {
  expect_cross_matches_torch("cross_attn_mask");
}
TEST(MultiheadCrossAttention, MatchesTorchWithoutBiases) {
  expect_cross_matches_torch("cross_no_bias");
}

}  // namespace
}  // namespace minimodel
