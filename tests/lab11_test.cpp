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

#include "minimodel/precision/half_precision.hpp"

namespace minimodel {
namespace {

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
  EXPECT_EQ(to_bf16_bits(-1e9f), 0xCE6E) << "-1e9 stays finite in bf16: -999292928";
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

}  // namespace
}  // namespace minimodel
