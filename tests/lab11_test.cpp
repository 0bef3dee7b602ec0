// Lab 11: precision. Block A's conversions are checked on every fp16 bit pattern, on every rounding
// boundary of both formats against an independent oracle (scale, round to nearest even in double,
// scale back) and, where the compiler has it, against _Float16.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/precision/half_precision.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "tensors/attention_float64.hpp"

namespace minimodel {
namespace {

using testing::throws_invalid_argument;
using workbench::attention_float64;
using workbench::max_abs_error;

std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::string hex(std::uint32_t bits) {
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

// The value of a format with `fraction_bits` fraction bits, smallest normal exponent `min_exponent`
// and largest finite value `largest` nearest to x, ties to even, computed in double without any
// bit manipulation: x / step is exact (step is a power of two), std::nearbyint rounds it in the
// default mode, to nearest even, and the product is exact again. Overflow follows IEEE 754: at
// largest + half a step and beyond, ±inf.
double nearest(double x, int fraction_bits, int min_exponent, double largest) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  const double top_step = std::ldexp(1.0, std::ilogb(largest) - fraction_bits);
  if (std::abs(x) >= largest + top_step / 2) return std::copysign(HUGE_VAL, x);
  const int exponent = std::max(std::ilogb(x), min_exponent);
  const double step = std::ldexp(1.0, exponent - fraction_bits);
  return std::copysign(std::nearbyint(x / step) * step, x);  // keeps the sign of a rounded-off 0
}

double nearest_fp16(double x) { return nearest(x, 10, -14, 65504.0); }
double nearest_bf16(double x) { return nearest(x, 7, -126, double(float_of(0x7F7F0000u))); }

// Same value and, for zeros, same sign; any NaN matches any NaN.
::testing::AssertionResult same_value(double actual, double expected, float input) {
  const bool same = (std::isnan(actual) && std::isnan(expected)) ||
                    (actual == expected && std::signbit(actual) == std::signbit(expected));
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "input " << input << " (bits " << hex(bits_of(input))
                                       << "): got " << actual << ", expected " << expected;
}

// Every float whose lower `dropped` bits are one of the patterns around the rounding boundary of
// the format that keeps the upper bits: exactly representable, just above, just below and at the
// midpoint, and the largest. Covers each rounding interval of the format at both of its ends.
template <class Check>
void for_each_boundary(unsigned dropped, Check check) {
  const std::uint32_t half = 1u << (dropped - 1), all = (1u << dropped) - 1;
  const std::uint32_t lows[] = {0, 1, half - 1, half, half + 1, all};
  for (std::uint64_t upper = 0; upper < (std::uint64_t{1} << (32 - dropped)); ++upper)
    for (const std::uint32_t low : lows)
      if (!check(float_of(static_cast<std::uint32_t>(upper << dropped) | low))) return;
}

// ---- Block A: fp16 -----------------------------------------------------------------------------

TEST(Fp16, DecodesEveryBitPatternToItsValue) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const int exponent = (bits >> 10) & 0x1F, fraction = bits & 0x3FF;
    const double magnitude = exponent == 0x1F ? (fraction ? NAN : HUGE_VAL)
                             : exponent == 0
                                 ? std::ldexp(fraction, -24)  // subnormal: fraction · 2^-24
                                 : std::ldexp(1024 + fraction, exponent - 25);
    const double expected = (bits & 0x8000) ? -magnitude : magnitude;
    ASSERT_TRUE(same_value(from_fp16_bits(h), expected, 0.0f)) << "fp16 bits " << hex(bits);
  }
}

TEST(Fp16, EncodesEveryValueBackToItsOwnBits) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float value = from_fp16_bits(static_cast<std::uint16_t>(bits));
    if (std::isnan(value)) continue;  // NaN payloads: Fp16.KeepsSpecialValues
    ASSERT_EQ(to_fp16_bits(value), bits) << "fp16 bits " << hex(bits) << " = " << value;
  }
}

TEST(Fp16, RoundsEveryBoundaryToTheNearestValueTiesToEven) {
  // fp16 keeps 10 of float32's 23 fraction bits: the lower 13 decide the rounding of normals.
  for_each_boundary(13, [](float x) {
    const auto result = same_value(from_fp16_bits(to_fp16_bits(x)), nearest_fp16(x), x);
    EXPECT_TRUE(result);
    return bool(result);
  });
}

TEST(Fp16, RoundsSubnormalsAndOverflowsAtTheDocumentedLimits) {
  const float smallest = std::ldexp(1.0f, -24);  // the smallest subnormal
  EXPECT_EQ(to_fp16_bits(smallest), 0x0001);
  EXPECT_EQ(to_fp16_bits(smallest / 2), 0x0000) << "2^-25 is a tie between 0 and 2^-24: even";
  EXPECT_EQ(to_fp16_bits(smallest * 0.75f), 0x0001);
  EXPECT_EQ(to_fp16_bits(smallest * 1.5f), 0x0002) << "a tie between 1 and 2 steps: even";
  EXPECT_EQ(to_fp16_bits(-smallest / 4), 0x8000) << "-0, not +0";
  EXPECT_EQ(to_fp16_bits(std::ldexp(1.0f, -14)), 0x0400) << "the smallest normal";
  EXPECT_EQ(to_fp16_bits(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400)
      << "rounds up out of the subnormals";
  EXPECT_EQ(to_fp16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(to_fp16_bits(65519.996f), 0x7BFF);
  EXPECT_EQ(to_fp16_bits(65520.0f), 0x7C00) << "65504 + half a step rounds to inf";
  EXPECT_EQ(to_fp16_bits(-1e9f), 0xFC00) << "lab 02's mask value is -inf in fp16";
  EXPECT_EQ(to_fp16_bits(FLT_MAX), 0x7C00);
}

TEST(Fp16, KeepsSpecialValues) {
  EXPECT_EQ(to_fp16_bits(0.0f), 0x0000);
  EXPECT_EQ(to_fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(to_fp16_bits(HUGE_VALF), 0x7C00);
  EXPECT_EQ(to_fp16_bits(-HUGE_VALF), 0xFC00);
  for (const std::uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u}) {
    const std::uint16_t h = to_fp16_bits(float_of(nan));
    EXPECT_EQ(h & 0x7C00, 0x7C00) << hex(nan);
    EXPECT_NE(h & 0x03FF, 0) << hex(nan) << " must stay NaN, not become inf";
    EXPECT_EQ(h & 0x0200, 0x0200) << hex(nan) << " becomes a quiet NaN";
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << hex(nan) << " keeps its sign";
    EXPECT_TRUE(std::isnan(from_fp16_bits(h)));
  }
}

TEST(Fp16, AgreesWithTheCompilersFloat16OnEveryBoundary) {
#if defined(__FLT16_MAX__) && !defined(__clang__)
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    _Float16 h;
    const auto pattern = static_cast<std::uint16_t>(bits);
    std::memcpy(&h, &pattern, sizeof h);
    ASSERT_TRUE(same_value(from_fp16_bits(pattern), static_cast<float>(h), 0.0f)) << hex(bits);
  }
  for_each_boundary(13, [](float x) {
    const _Float16 h = static_cast<_Float16>(x);
    const auto result = same_value(from_fp16_bits(to_fp16_bits(x)), static_cast<float>(h), x);
    EXPECT_TRUE(result);
    return bool(result);
  });
#else
  // The pristine stubs must still fail here (cmake/check_stubs.cmake counts a skip as a pass).
  ASSERT_EQ(to_fp16_bits(1.0f), 0x3C00);
  GTEST_SKIP() << "this compiler has no _Float16 conversions (g++ 12 on x86-64 has them)";
#endif
}

// ---- Block A: bf16 -----------------------------------------------------------------------------

TEST(Bf16, IsTheUpperHalfOfAFloat) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float value = from_bf16_bits(static_cast<std::uint16_t>(bits));
    ASSERT_EQ(bits_of(value), bits << 16) << hex(bits);
    if (!std::isnan(value)) {
      ASSERT_EQ(to_bf16_bits(value), bits) << hex(bits);
    }
  }
}

TEST(Bf16, RoundsEveryBoundaryToTheNearestValueTiesToEven) {
  // bf16 keeps 7 of float32's 23 fraction bits: the lower 16 decide the rounding.
  for_each_boundary(16, [](float x) {
    const auto result = same_value(from_bf16_bits(to_bf16_bits(x)), nearest_bf16(x), x);
    EXPECT_TRUE(result);
    return bool(result);
  });
}

TEST(Bf16, KeepsSpecialValuesAndNaNsWhosePayloadIsInTheCutBits) {
  EXPECT_EQ(to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(to_bf16_bits(HUGE_VALF), 0x7F80);
  EXPECT_EQ(to_bf16_bits(FLT_MAX), 0x7F80) << "FLT_MAX lies past the largest bf16 plus half a step";
  EXPECT_EQ(to_bf16_bits(float_of(0x7F7F7FFFu)), 0x7F7F) << "just below the tie: the largest bf16";
  EXPECT_EQ(to_bf16_bits(-1e9f), 0xCE6E) << "-1e9 stays finite in bf16: -998244352";
  EXPECT_EQ(to_bf16_bits(257.0f), 0x4380) << "257 is a tie between 256 and 258: even, 256";
  for (const std::uint32_t nan : {0x7F800001u, 0xFF80FFFFu, 0x7FC00000u}) {
    const std::uint16_t b = to_bf16_bits(float_of(nan));
    EXPECT_TRUE(std::isnan(from_bf16_bits(b))) << hex(nan) << " must stay NaN, not become inf";
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << hex(nan) << " keeps its sign";
  }
}

// ---- Block A: round_to -------------------------------------------------------------------------

TEST(RoundTo, IsTheIdentityInFp32AndIdempotentInEachFormat) {
  for (const float x : {0.1f, -1.0f / 3.0f, 65504.0f, 1e-6f, 3.0e38f, -0.0f}) {
    EXPECT_EQ(bits_of(round_to(x, Precision::fp32)), bits_of(x)) << x;
    for (const Precision p : {Precision::bf16, Precision::fp16}) {
      const float once = round_to(x, p);
      EXPECT_EQ(bits_of(round_to(once, p)), bits_of(once)) << precision_name(p) << " " << x;
    }
  }
  EXPECT_EQ(round_to(0.1f, Precision::fp16), 0.0999755859375f);
  EXPECT_EQ(round_to(0.1f, Precision::bf16), 0.10009765625f);
}

TEST(RoundTo, MatchesTorchsConversions) {
  // tests/fixtures/half_conversions: torch's x.to(float16) and x.to(bfloat16), back in float32,
  // on ties, their neighbours, overflow, subnormals and special values (scripts/fixture_cases/
  // lab11.py). Both formats' values are float32 values, so the comparison is exact.
  const testing::Fixture fixture("half_conversions");
  const auto x = fixture.array<1>("x");
  const auto fp16 = fixture.array<1>("fp16"), bf16 = fixture.array<1>("bf16");
  int failures = 0;
  for (std::size_t i = 0; i < x.size() && failures < 5; ++i) {
    const auto agree_fp16 = same_value(round_to(x(i), Precision::fp16), fp16(i), x(i));
    const auto agree_bf16 = same_value(round_to(x(i), Precision::bf16), bf16(i), x(i));
    EXPECT_TRUE(agree_fp16) << "fp16, against torch";
    EXPECT_TRUE(agree_bf16) << "bf16, against torch";
    failures += !agree_fp16 + !agree_bf16;
  }
}

// ---- Block B: attention in a precision ---------------------------------------------------------

Tensor2 random_rows(std::size_t rows, std::size_t d, int seed) {
  xt::random::seed(seed);
  return xt::random::randn<float>({rows, d});
}

TEST(AttentionIn, InFp32IsLab00sSingleHeadAttention) {
  const Tensor2 q = random_rows(6, 8, 1), k = random_rows(9, 8, 2), v = random_rows(9, 5, 3);
  Tensor2 mask = xt::zeros<float>({6, 9});
  mask(2, 7) = mask(4, 0) = -1e9f;
  const Tensor2 expected = single_head_attention(q, k, v, mask).output;
  const Tensor2 actual = attention_in(q, k, v, mask, Kernel{});
  // Float32 throughout: only the order of the sums differs from lab 00's BLAS, a few ulps of
  // numbers of order 1.
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual.flat(i), expected.flat(i), 1e-6) << "element " << i;
}

TEST(AttentionIn, StoresEveryOutputInItsFormat) {
  const Tensor2 q = random_rows(4, 16, 4), k = random_rows(32, 16, 5), v = random_rows(32, 8, 6);
  for (const Precision p : {Precision::bf16, Precision::fp16})
    for (const bool fp32_accumulation : {false, true}) {
      const Tensor2 out = attention_in(q, k, v, std::nullopt, Kernel{p, fp32_accumulation});
      for (const float x : out)
        ASSERT_EQ(bits_of(round_to(x, p)), bits_of(x)) << precision_name(p) << " output " << x;
    }
}

TEST(AttentionIn, StoresTheWeightsInItsFormatBeforeTheWeightedSum) {
  // q = 0: three equal scores, weights 1/3. fp16 stores 1/3 as 1365/4096 = 0.333251953125, so five
  // of it is 1.666259765625, which rounds to 1706/1024 = 1.666015625. A kernel that kept the
  // float32 weight 0.33333334 would get 1.6666667 and round it to 1707/1024 = 1.6669921875.
  const Tensor2 q = xt::zeros<float>({std::size_t{1}, std::size_t{4}}), k = random_rows(3, 4, 17);
  Tensor2 v = xt::zeros<float>({std::size_t{3}, std::size_t{1}});
  v(0, 0) = 5.0f;
  const Tensor2 out = attention_in(q, k, v, std::nullopt, Kernel{Precision::fp16, true});
  EXPECT_EQ(out(0, 0), 1.666015625f) << "5 times the fp16 weight 1/3, rounded to fp16";
}

TEST(AttentionIn, Fp32AccumulationKeepsLongRowsAccurate) {
  // 4 queries over S = 4096 keys with d_head 64: each dot product adds 64 terms and each softmax
  // sum 4096. Rounding the inputs alone costs about u = 2^-11 (fp16) or 2^-8 (bf16) relative;
  // a sum rounded after each addition can lose up to n · u, and in practice about sqrt(n) · u.
  const Tensor2 q = random_rows(4, 64, 7), k = random_rows(4096, 64, 8),
                v = random_rows(4096, 8, 9);
  const auto truth = attention_float64(q, k, v);
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    const double mixed = max_abs_error(attention_in(q, k, v, std::nullopt, Kernel{p, true}), truth);
    const double pure = max_abs_error(attention_in(q, k, v, std::nullopt, Kernel{p, false}), truth);
    // The outputs are weighted means of N(0, 1) values, of magnitude below 0.2 here: with fp32
    // sums their error is that of rounding the inputs, scores and weights, a few u of numbers that
    // small, below u itself (measured: 0.17 u in fp16, 0.08 u in bf16). Rounded after every
    // addition, the sums lose some 20 u (measured: 22 u and 24 u), over 100 times more.
    const double u = p == Precision::fp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    EXPECT_LT(mixed, u) << precision_name(p) << " with fp32 accumulation";
    EXPECT_GT(pure, 10 * mixed) << precision_name(p) << " without";
  }
}

// n terms, each `term`, added first to last and rounded to fp16 after every addition, with the
// test's own rounding (nearest_fp16, in double): the sum a kernel without fp32 accumulation keeps.
double fp16_running_sum(double term, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum = nearest_fp16(sum + term);
  return sum;
}

TEST(AttentionIn, Fp32AccumulationDecidesHowTheScoresAndTheWeightedSumAreAdded) {
  // In fp16, 2048 + 1 is a tie between 2048 and 2050 that rounds back to 2048: a sum of ones
  // rounded after every addition stops at 2048.
  ASSERT_EQ(fp16_running_sum(1.0, 4096), 2048.0);
  const Kernel pure{Precision::fp16, false}, mixed{Precision::fp16, true};

  // The scores: d_head 4096, a query of ones, key 0 all ones and key 1 ones in its first half.
  // The dot products are 4096 and 2048 in float32, so the scores (scale 1/64) are 64 and 32,
  // exp(32 - 64) is 0 in fp16 and key 0 takes all the weight. Rounded after every addition, both
  // stop at 2048: two equal scores, weights of 1/2. v picks key 0's weight.
  const std::size_t d = 4096;
  const Tensor2 q = xt::ones<float>({std::size_t{1}, d});
  Tensor2 k = xt::ones<float>({std::size_t{2}, d});
  xt::view(k, 1, xt::range(d / 2, d)) = 0.0f;
  Tensor2 v = xt::zeros<float>({std::size_t{2}, std::size_t{1}});
  v(0, 0) = 1.0f;
  ASSERT_EQ(fp16_running_sum(1.0, d), fp16_running_sum(1.0, d / 2)) << "equal rounded scores";
  EXPECT_EQ(attention_in(q, k, v, std::nullopt, pure)(0, 0), 0.5f)
      << "the dot products rounded after every addition: both stop at 2048";
  EXPECT_EQ(attention_in(q, k, v, std::nullopt, mixed)(0, 0), 1.0f)
      << "the dot products in float32: 4096 and 2048";

  // The weighted sum: a zero query over S = 4096 keys, and v all ones. Without fp32 accumulation
  // the exponentials' sum stops at 2048, each weight is 2^-11, and the weighted sum of 4096 terms
  // 2^-11 stops too (1 + 2^-11 is a tie that rounds back to 1); added in float32 it would be 2.
  // With fp32 accumulation the weights are 2^-12 and the sum is 1, exactly.
  const std::size_t S = 4096;
  const Tensor2 zero_q = xt::zeros<float>({std::size_t{1}, std::size_t{4}});
  const Tensor2 keys = random_rows(S, 4, 18);
  const Tensor2 ones = xt::ones<float>({S, std::size_t{1}});
  const double weight = 1.0 / fp16_running_sum(1.0, S);
  EXPECT_EQ(attention_in(zero_q, keys, ones, std::nullopt, pure)(0, 0), fp16_running_sum(weight, S))
      << "the weighted sum rounded after every addition, of weights 1 / 2048";
  EXPECT_EQ(attention_in(zero_q, keys, ones, std::nullopt, mixed)(0, 0), 1.0f)
      << "the weighted sum in float32, of weights 1 / 4096";
}

TEST(AttentionIn, RejectsInputsOfTheWrongShape) {
  const Tensor2 q = random_rows(3, 4, 1), k = random_rows(5, 4, 2), v = random_rows(5, 2, 3);
  const Tensor2 narrow_k = random_rows(5, 3, 2), short_v = random_rows(4, 2, 3);
  const Tensor2 small_mask = xt::zeros<float>({3, 4});
  EXPECT_TRUE(throws_invalid_argument([&] { attention_in(q, narrow_k, v, std::nullopt, Kernel{}); },
                                      {"(3, 4)", "(5, 3)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { attention_in(q, k, short_v, std::nullopt, Kernel{}); },
                                      {"(5, 4)", "(4, 2)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { attention_in(q, k, v, small_mask, Kernel{}); },
                                      {"(3, 4)", "(3, 5)"}));
}

// ---- Block C: the failures, reproduced, then fixed ---------------------------------------------

TEST(MaskValue, MinusOneBillionMakesAFullyMaskedFp16RowNaNAndTheFormatsValueDoesNot) {
  const Tensor2 q = random_rows(3, 8, 10), k = random_rows(3, 8, 11), v = random_rows(3, 4, 12);
  const Kernel fp16{Precision::fp16, true};
  Tensor2 lab02 = xt::zeros<float>({3, 3});
  xt::row(lab02, 0) = -1e9f;  // row 0 sees no key: a padded query
  const Tensor2 broken = attention_in(q, k, v, lab02, fp16);
  EXPECT_TRUE(std::isnan(broken(0, 0))) << "-1e9 is -inf in fp16, and -inf - (-inf) is NaN";
  Tensor2 fixed_mask = lab02;
  xt::row(fixed_mask, 0) = mask_value(Precision::fp16);
  const Tensor2 fixed = attention_in(q, k, v, fixed_mask, fp16);
  for (const float x : fixed) EXPECT_TRUE(std::isfinite(x)) << x;
  EXPECT_EQ(xt::view(fixed, xt::range(1, 3)), xt::view(broken, xt::range(1, 3)))
      << "the rows that see keys are unchanged";
}

TEST(MaskValue, StaysFiniteWhenAScoreIsAddedAndRemovesTheKey) {
  EXPECT_EQ(mask_value(Precision::fp32), -1e9f) << "lab 02's value";
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
    const float masked = mask_value(p);
    EXPECT_EQ(round_to(masked, p), masked) << precision_name(p);
    EXPECT_TRUE(std::isfinite(round_to(masked - 10000.0f, p))) << precision_name(p);
    EXPECT_EQ(round_to(std::exp(round_to(masked - 10.0f, p)), p), 0.0f) << precision_name(p);
  }
  EXPECT_TRUE(std::isinf(round_to(-65504.0f - 16.0f, Precision::fp16)))
      << "why not fp16's most negative value itself";
  const Tensor2 mask = causal_mask_in(4, Precision::fp16);
  EXPECT_EQ(mask(0, 1), -32752.0f);
  EXPECT_EQ(mask(1, 0), 0.0f);
}

TEST(Overflow, UnscaledScoresWithoutTheMaxOverflowFp16AndEachSafeguardFixesIt) {
  // Scores of magnitude ~ 30: q·k of d_head 64 with entries of size ~ 0.7.
  const Tensor2 q = random_rows(2, 64, 13), k = random_rows(8, 64, 14), v = random_rows(8, 4, 15);
  Kernel bare{Precision::fp16, true, /*scale_scores=*/false, /*subtract_max=*/false};
  const Tensor2 broken = attention_in(q, k, v, std::nullopt, bare);
  bool any_nan = false;
  for (const float x : broken) any_nan = any_nan || std::isnan(x);
  EXPECT_TRUE(any_nan) << "exp of a score above ln 65504 = 11.09 is inf in fp16, and inf / inf NaN";
  // Either safeguard alone: the max makes every exp at most 1; the scale 1/8 brings these scores
  // from about 19 to below 3 (not a guarantee: a score above 8 · 11.09 would still overflow).
  for (const auto& [scale, subtract_max] : {std::pair{false, true}, {true, false}, {true, true}}) {
    const Kernel safe{Precision::fp16, true, scale, subtract_max};
    for (const float x : attention_in(q, k, v, std::nullopt, safe))
      EXPECT_TRUE(std::isfinite(x)) << "scale " << scale << ", subtract_max " << subtract_max;
  }
}

TEST(LongRows, AnFp16SumOfOnesStallsAt2048WithoutFp32Accumulation) {
  // 16384 keys with equal scores: every exp is 1, the sum is 16384, and every weight 2^-14. In
  // fp16, 2048 + 1 is a tie between 2048 and 2050 (steps of 2 there), which rounds back to 2048:
  // the sum stops growing, and every weight comes out 8 times too large. The value vector picks
  // the weight of key 0 alone.
  const std::size_t S = 16384;
  const Tensor2 q = xt::zeros<float>({std::size_t{1}, std::size_t{4}}), k = random_rows(S, 4, 16);
  Tensor2 v = xt::zeros<float>({S, std::size_t{1}});
  v(0, 0) = 1.0f;
  const Tensor2 pure = attention_in(q, k, v, std::nullopt, Kernel{Precision::fp16, false});
  EXPECT_EQ(pure(0, 0), std::ldexp(1.0f, -11)) << "1 / 2048: the sum stalled at 2048";
  const Tensor2 mixed = attention_in(q, k, v, std::nullopt, Kernel{Precision::fp16, true});
  EXPECT_EQ(mixed(0, 0), std::ldexp(1.0f, -14)) << "1 / 16384, exact in fp16";
}

TEST(RopeAngles, InFp32AreLab05sAnglesAndInBf16PositionsAbove256Merge) {
  Positions positions = {0, 1, 255, 256, 257, 258, 259, 4096, 4097};
  const Tensor2 fp32 = rope_angles_in(positions, 8, 10000.0f, Precision::fp32);
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (std::size_t k = 0; k < 4; ++k) {
      const double exact = double(positions(t)) * std::pow(10000.0, -2.0 * double(k) / 8.0);
      EXPECT_NEAR(fp32(t, k), exact, 1e-6 * std::max(1.0, exact)) << t << ", " << k;
    }
  const Tensor2 bf16 = rope_angles_in(positions, 8, 10000.0f, Precision::bf16);
  EXPECT_EQ(bf16(4, 0), 256.0f) << "position 257 is a tie between 256 and 258 in bf16: even";
  EXPECT_EQ(bf16(6, 0), 260.0f) << "259 is a tie between 258 and 260";
  EXPECT_EQ(bf16(7, 0), bf16(8, 0)) << "positions 4096 and 4097 get the same angle";
  EXPECT_EQ(bf16(4, 1), 25.625f) << "the position is rounded before the product: 256 · bf16(0.1), "
                                    "not 257 · bf16(0.1) = 25.725, which rounds to 25.75";
  EXPECT_THROW(rope_angles_in(positions, 7, 10000.0f, Precision::fp32), std::invalid_argument);
  EXPECT_THROW(rope_angles_in(positions, 8, 0.0f, Precision::fp32), std::invalid_argument);
}

}  // namespace
}  // namespace minimodel
