#pragma once
// The API of lab 11, Block A: float32 to fp16 and bf16 and back, by bit manipulation, rounding to
// nearest with ties to even, as IEEE 754 and every GPU conversion instruction do.
//
// The formats (sign, exponent, fraction bits; exponent bias):
//   float32  1 8 23  bias 127   epsilon 2^-23   largest 3.40e38   integers exact up to 2^24
//   fp16     1 5 10  bias 15    epsilon 2^-10   largest 65504     integers exact up to 2048
//   bf16     1 8 7   bias 127   epsilon 2^-7    largest 3.39e38   integers exact up to 256
// bf16 is float32's upper 16 bits; fp16 has its own exponent range, with subnormals below 2^-14.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"

namespace minimodel {

/// The precision a value is stored in. fp32 is float itself.
enum class Precision { fp32, bf16, fp16 };

/// "fp32", "bf16", "fp16".
const char* precision_name(Precision precision);

/// Block A. The fp16 bit pattern nearest to x, ties to even. Values of magnitude 65520 or more
/// (65504 plus half a step) become ±inf, values below 2^-14 become subnormals (steps of 2^-24) or
/// ±0, ±inf stays ±inf, and a NaN stays a quiet NaN with the same sign.
std::uint16_t to_fp16_bits(float x);

/// Block A. The float an fp16 bit pattern stands for (exactly: every fp16 value is a float).
float from_fp16_bits(std::uint16_t bits);

/// Block A. The bf16 bit pattern nearest to x, ties to even: float32's upper 16 bits, rounded by
/// the lower 16. Values that round past the largest bf16 (3.3895e38) become ±inf; a NaN stays a
/// quiet NaN with the same sign (cutting its payload must not turn it into inf).
std::uint16_t to_bf16_bits(float x);

/// Block A. The float a bf16 bit pattern stands for: the bits shifted into float32's upper half.
float from_bf16_bits(std::uint16_t bits);

/// Block A. x rounded to the nearest value of `precision` and back to float (x itself for fp32).
float round_to(float x, Precision precision);

// ---- Block B: attention in a precision ---------------------------------------------------------

/// How a kernel evaluates attention: the format it stores every tensor in, and whether it adds up
/// every sum (the scores' dot products, the softmax's sum and the weighted sum of the values) in
/// float32, rounding the total once (the mixed-precision recipe). The two switches after them exist
/// to show, in Block C, what each safeguard prevents.
struct Kernel {
  Precision storage = Precision::fp32;
  bool fp32_accumulation = true;
  bool scale_scores = true;  ///< multiply the scores by 1/sqrt(d_head)
  bool subtract_max = true;  ///< subtract each row's maximum before exp
};

/// Block B. softmax(Q Kᵀ / sqrt(d_head) + mask) V for one head, with every intermediate rounded to
/// kernel.storage as a half-precision kernel stores it: the inputs, each score, the scaled and
/// masked score, the difference to the row maximum, each exponential, each weight and each output.
/// A product of two stored values is not rounded: exact in float32 for fp16, and for bf16 values
/// away from float32's limits (theory/14); a running sum is rounded after every addition unless
/// kernel.fp32_accumulation, when it is rounded once at the end.
/// With storage fp32 it is lab 00's single_head_attention, up to the order of the sums.
/// @param q (T, d_head)   @param k (S, d_head)   @param v (S, d_v)   @param mask (T, S), additive
/// @throws std::invalid_argument as single_head_attention, naming both shapes.
Tensor2 attention_in(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                     const std::optional<Tensor2>& mask, const Kernel& kernel);

// ---- Block C: the failures and their fixes ------------------------------------------------------

/// Block C. The additive mask value for a precision: lab 02's -1e9 in fp32, and in a half format
/// half its most negative finite value (-32752 in fp16), so that a masked score stays finite for
/// any score smaller in magnitude than the other half. -1e9 is -inf in fp16, a fully masked row
/// then has -inf - (-inf) = NaN, and the most negative value itself overflows once a negative
/// score is added to it.
float mask_value(Precision precision);

/// Block C. The causal mask of lab 02, (T, T), with mask_value(precision) above the diagonal.
Tensor2 causal_mask_in(std::size_t T, Precision precision);

/// Block C. RoPE's angles, (T, d_head / 2): positions[t] · theta^(-2k / d_head), computed as a
/// kernel that holds the positions and angles in `precision` would: the position and the frequency
/// rounded to it, and their product too. In bf16, positions above 256 are no longer whole numbers
/// apart (257 is stored as 256), and each of the three roundings can move an angle of magnitude a
/// by up to a · 2^-8. With fp32 this is lab 05's table.
/// @throws std::invalid_argument if d_head is 0 or odd, or theta is not positive and finite,
///         naming the value.
Tensor2 rope_angles_in(const Positions& positions, std::size_t d_head, float theta,
                       Precision precision);

}  // namespace minimodel
