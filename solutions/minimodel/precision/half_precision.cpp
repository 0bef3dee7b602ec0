// Lab 11: precision, fp16 and bf16 by hand and attention in a half precision. Reference solution.
#include "minimodel/precision/half_precision.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "minimodel/shapes.hpp"

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

// ---- Block A: fp16 ------------------------------------------------------------------------------

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

// ---- Block A: bf16 ------------------------------------------------------------------------------
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

// ---- Block B: attention in a precision ---------------------------------------------------------

namespace {

// A running sum as the kernel keeps it: in float32, rounded once when read, or rounded to the
// storage format after every addition.
class Accumulator {
 public:
  explicit Accumulator(const Kernel& kernel) : kernel_(kernel) {}
  void add(float term) {
    total_ = kernel_.fp32_accumulation ? total_ + term : round_to(total_ + term, kernel_.storage);
  }
  float total() const { return round_to(total_, kernel_.storage); }

 private:
  const Kernel& kernel_;
  float total_ = 0.0f;
};

Tensor2 rounded(const Tensor2& x, Precision precision) {
  Tensor2 out = x;
  for (float& value : out) value = round_to(value, precision);
  return out;
}

}  // namespace

// q: (T, d_head), k: (S, d_head), v: (S, d_v), mask: (T, S) -> (T, d_v)
Tensor2 attention_in(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                     const std::optional<Tensor2>& mask, const Kernel& kernel) {
  if (q.shape(1) != k.shape(1))
    throw std::invalid_argument("attention_in: q is " + shape_of(q) + " but k is " + shape_of(k) +
                                "; their widths must match");
  if (k.shape(0) != v.shape(0))
    throw std::invalid_argument("attention_in: k is " + shape_of(k) + " but v is " + shape_of(v) +
                                "; they need one row per key");
  const std::size_t T = q.shape(0), S = k.shape(0), d = q.shape(1), d_v = v.shape(1);
  if (mask && (mask->shape(0) != T || mask->shape(1) != S))
    throw std::invalid_argument("attention_in: mask is " + shape_of(*mask) +
                                " but the scores are (" + std::to_string(T) + ", " +
                                std::to_string(S) + ")");
  const Precision p = kernel.storage;
  auto r = [p](float x) { return round_to(x, p); };

  // 1. The inputs, as the kernel stores them.
  const Tensor2 qs = rounded(q, p), ks = rounded(k, p), vs = rounded(v, p);
  const float scale = r(1.0f / std::sqrt(static_cast<float>(d)));
  Tensor2 output({T, d_v});
  std::vector<float> scores(S);
  for (std::size_t t = 0; t < T; ++t) {
    // 2. Scores, scaled and masked: a dot product of d_head exact products, then two roundings.
    float row_max = -std::numeric_limits<float>::infinity();
    for (std::size_t s = 0; s < S; ++s) {
      Accumulator dot(kernel);
      for (std::size_t i = 0; i < d; ++i) dot.add(qs(t, i) * ks(s, i));
      float score = dot.total();
      if (kernel.scale_scores) score = r(score * scale);
      if (mask) score = r(score + r((*mask)(t, s)));
      scores[s] = score;
      row_max = std::max(row_max, score);
    }
    // 3. Exponentials and their sum: exp(score - max) <= 1, or exp(score) without the max.
    const float shift = kernel.subtract_max ? row_max : 0.0f;
    Accumulator sum(kernel);
    for (float& score : scores) {
      score = r(std::exp(r(score - shift)));
      sum.add(score);
    }
    const float total = sum.total();
    // 4. Weights, and the output: their weighted sum of the values.
    for (float& score : scores) score = r(score / total);
    for (std::size_t j = 0; j < d_v; ++j) {
      Accumulator out(kernel);
      for (std::size_t s = 0; s < S; ++s) out.add(scores[s] * vs(s, j));
      output(t, j) = out.total();
    }
  }
  return output;
}

// ---- Block C: the failures and their fixes ------------------------------------------------------

float mask_value(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return -1e9f;  // lab 02's value: finite, and exp(-1e9 - max) is exactly 0
    // Half the most negative finite value: a masked score stays finite as long as the score
    // added to it is smaller than the other half (-65504 - 16 is already -inf in fp16).
    case Precision::bf16:
      return from_bf16_bits(0xFF7Fu) / 2;  // -1.69e38
    case Precision::fp16:
      return from_fp16_bits(0xFBFFu) / 2;  // -32752
  }
  return -1e9f;
}

// -> (T, T)
Tensor2 causal_mask_in(std::size_t T, Precision precision) {
  Tensor2 mask = xt::zeros<float>({T, T});
  const float masked = mask_value(precision);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t s = t + 1; s < T; ++s) mask(t, s) = masked;
  return mask;
}

// positions: (T) -> (T, d_head / 2)
Tensor2 rope_angles_in(const Positions& positions, std::size_t d_head, float theta,
                       Precision precision) {
  if (d_head == 0 || d_head % 2 != 0)
    throw std::invalid_argument("rope_angles_in: d_head is " + std::to_string(d_head) +
                                " but must be even and positive");
  if (!(theta > 0.0f) || !std::isfinite(theta)) {
    std::ostringstream value;
    value << theta;
    throw std::invalid_argument("rope_angles_in: theta is " + value.str() +
                                " but must be positive and finite");
  }
  auto r = [precision](float x) { return round_to(x, precision); };
  Tensor2 angles({positions.size(), d_head / 2});
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (std::size_t k = 0; k < d_head / 2; ++k) {
      const float frequency =
          static_cast<float>(std::pow(double(theta), -2.0 * double(k) / double(d_head)));
      angles(t, k) = r(r(static_cast<float>(positions(t))) * r(frequency));
    }
  return angles;
}

}  // namespace minimodel
