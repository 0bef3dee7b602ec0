// Lab 11: precision. Read labs/11-precision.md first. The API is in half_precision.hpp.
#include "minimodel/precision/half_precision.hpp"

#include <cstring>

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

// value >> shift, rounded to nearest with ties to even on the bits shifted out (0 < shift < 32).
std::uint32_t shift_right_rounding(std::uint32_t value, unsigned shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t dropped = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
  }
  return "?";
}

// ---- Block A: fp16
// -------------------------------------------------------------------------------

std::uint16_t to_fp16_bits(float x) {
  const std::uint32_t bits = bits_of(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: quiet (top fraction bit set), the payload's top bits kept
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x03FFu));
  if (magnitude >= 0x477FF000u)  // 65520 = 65504 + half a step, and more: rounds to inf
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // 2^-14 and more: a normal fp16
    // Re-bias the exponent (127 -> 15), then keep 10 of the 23 fraction bits. A carry out of the
    // fraction rounds up into the exponent, which is the right next value.
    return static_cast<std::uint16_t>(sign | shift_right_rounding(magnitude - 0x38000000u, 13));
  }
  // Below 2^-14: a subnormal, in steps of 2^-24. The value is (2^23 + fraction) · 2^(e − 150);
  // in steps of 2^-24 that is (2^23 + fraction) >> (126 − e). A result of 0x400 is 2^-14, the
  // smallest normal, whose bit pattern is that same 0x400.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;  // below 2^-25, half the smallest subnormal: ±0
  const std::uint32_t significand = (magnitude & 0x007FFFFFu) | 0x00800000u;
  return static_cast<std::uint16_t>(sign | shift_right_rounding(significand, 126u - exponent));
}

float from_fp16_bits(std::uint16_t bits) {
  const std::uint32_t sign = (std::uint32_t{bits} & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t fraction = bits & 0x03FFu;
  if (exponent == 0x1Fu) return float_of(sign | 0x7F800000u | (fraction << 13));  // inf, NaN
  if (exponent != 0) return float_of(sign | ((exponent + 112u) << 23) | (fraction << 13));
  if (fraction == 0) return float_of(sign);  // ±0
  // A subnormal, fraction · 2^-24: shift its leading 1 into the implicit bit's place.
  std::uint32_t float_exponent = 113;  // 2^-14 = 2^(113 − 127)
  while ((fraction & 0x0400u) == 0) {
    fraction <<= 1;
    --float_exponent;
  }
  return float_of(sign | (float_exponent << 23) | ((fraction & 0x03FFu) << 13));
}

// ---- Block A: bf16
// -------------------------------------------------------------------------------

std::uint16_t to_bf16_bits(float x) {
  const std::uint32_t bits = bits_of(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: cutting the payload could leave inf's pattern
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Round the lower 16 bits away, ties to even; a carry runs into the exponent, up to inf.
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float from_bf16_bits(std::uint16_t bits) { return float_of(std::uint32_t{bits} << 16); }

float round_to(float x, Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return x;
    case Precision::bf16:
      return from_bf16_bits(to_bf16_bits(x));
    case Precision::fp16:
      return from_fp16_bits(to_fp16_bits(x));
  }
  return x;
}

}  // namespace minimodel
