#pragma once
// The API of lab 11, Block A: float32 to fp16 and bf16 and back, by bit manipulation, rounding to
// nearest with ties to even, as IEEE 754 and every GPU conversion instruction do.
//
// The formats (sign, exponent, fraction bits; exponent bias):
//   float32  1 8 23  bias 127   epsilon 2^-23   largest 3.40e38   integers exact up to 2^24
//   fp16     1 5 10  bias 15    epsilon 2^-10   largest 65504     integers exact up to 2048
//   bf16     1 8 7   bias 127   epsilon 2^-7    largest 3.39e38   integers exact up to 256
// bf16 is float32's upper 16 bits; fp16 has its own exponent range, with subnormals below 2^-14.
#include <cstdint>

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

}  // namespace minimodel
