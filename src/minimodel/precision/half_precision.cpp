// Lab 11: precision. Read labs/11-precision.md first. The API is in half_precision.hpp.
#include "minimodel/precision/half_precision.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {
namespace {

// A float's 32 bits and back, without undefined behaviour (memcpy, not a pointer cast).
[[maybe_unused]] std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

[[maybe_unused]] float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
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

// ---- Block A: float32 to fp16 and bf16 and back -------------------------------------------------

std::uint16_t to_fp16_bits(float x) {
  // TODO(lab 11, Block A): encode x as fp16 bits, ties to even: NaN, overflow to inf, normals,
  // subnormals — see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block A): encode x as fp16 bits, ties to even: NaN, overflow to inf, normals, "
      "subnormals — see labs/11-precision.md");
}

float from_fp16_bits(std::uint16_t bits) {
  // TODO(lab 11, Block A): decode fp16 bits: inf and NaN, normals, ±0, subnormals — see
  // labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block A): decode fp16 bits: inf and NaN, normals, ±0, subnormals — see "
      "labs/11-precision.md");
}

std::uint16_t to_bf16_bits(float x) {
  // TODO(lab 11, Block A): keep float32's upper 16 bits, rounded by the lower 16 (ties to even),
  // and keep a NaN a NaN — see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block A): keep float32's upper 16 bits, rounded by the lower 16 (ties to "
      "even), "
      "and keep a NaN a NaN — see labs/11-precision.md");
}

float from_bf16_bits(std::uint16_t bits) {
  // TODO(lab 11, Block A): shift the bf16 bits into float32's upper half — see
  // labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block A): shift the bf16 bits into float32's upper half — see "
      "labs/11-precision.md");
}

float round_to(float x, Precision precision) {
  // TODO(lab 11, Block A): round x to the precision and back (x itself for fp32) — see
  // labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block A): round x to the precision and back (x itself for fp32) — see "
      "labs/11-precision.md");
}

// ---- Block B: attention in a precision ---------------------------------------------------------

// q: (T, d_head), k: (S, d_head), v: (S, d_v), mask: (T, S) -> (T, d_v)
Tensor2 attention_in(const Tensor2& q, const Tensor2& k, const Tensor2& v,
                     const std::optional<Tensor2>& mask, const Kernel& kernel) {
  // TODO(lab 11, Block B): check the shapes, then compute attention rounding every intermediate to
  // kernel.storage, with sums in float32 when kernel.fp32_accumulation — see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block B): check the shapes, then compute attention rounding every intermediate "
      "to kernel.storage, with sums in float32 when kernel.fp32_accumulation — see "
      "labs/11-precision.md");
}

// ---- Block C: the failures and their fixes ------------------------------------------------------

float mask_value(Precision precision) {
  // TODO(lab 11, Block C): -1e9 in fp32, half the most negative finite value in fp16 and bf16 —
  // see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block C): -1e9 in fp32, half the most negative finite value in fp16 and bf16 — "
      "see labs/11-precision.md");
}

// -> (T, T)
Tensor2 causal_mask_in(std::size_t T, Precision precision) {
  // TODO(lab 11, Block C): lab 02's causal mask with mask_value(precision) above the diagonal —
  // see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block C): lab 02's causal mask with mask_value(precision) above the diagonal — "
      "see labs/11-precision.md");
}

// positions: (T) -> (T, d_head / 2)
Tensor2 rope_angles_in(const Positions& positions, std::size_t d_head, float theta,
                       Precision precision) {
  // TODO(lab 11, Block C): check d_head and theta, then position times frequency with both and
  // their product rounded to the precision — see labs/11-precision.md
  throw Todo(
      "TODO(lab 11, Block C): check d_head and theta, then position times frequency with both and "
      "their product rounded to the precision — see labs/11-precision.md");
}

}  // namespace minimodel
