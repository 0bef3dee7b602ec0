// One instruction set's copy of the row loops: CMake compiles this file once per set of
// simd::Archs, with MINIMODEL_SIMD_ARCH naming it and the compiler flag that enables it.
#include "simd_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace minimodel::simd {

// The sum and the max of a batch's lanes. For AVX-512, halves folded onto each other in registers:
// a loop over the lanes, each step waiting for the last, was most of a short row's time
// (LayerNorm's rows of 128, the attention's of 32 to 128 keys). xsimd 8.1's hadd for avx512f uses
// an AVX512DQ instruction: AVX512F's shuffles here.
#ifdef __AVX512F__
template <class Op>
float fold_lanes(__m512 v, Op op) {
  // the masked forms, every lane set: the plain ones start from _mm512_undefined_ps, which GCC 12
  // warns of
  const __mmask16 all = 0xffff;
  v = op(v, _mm512_mask_shuffle_f32x4(v, all, v, v, _MM_SHUFFLE(1, 0, 3, 2)));  // 256-bit halves
  v = op(v, _mm512_mask_shuffle_f32x4(v, all, v, v, _MM_SHUFFLE(2, 3, 0, 1)));  // 128-bit quarters
  v = op(v, _mm512_mask_permute_ps(v, all, v, _MM_SHUFFLE(1, 0, 3, 2)));        // pairs
  v = op(v, _mm512_mask_permute_ps(v, all, v, _MM_SHUFFLE(2, 3, 0, 1)));        // neighbours
  return _mm512_cvtss_f32(v);
}
#endif

template <class Arch>
float lane_sum(const xsimd::batch<float, Arch>& sums) {
#ifdef __AVX512F__
  if constexpr (std::is_same_v<Arch, xsimd::avx512f>)
    return fold_lanes(sums, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
#endif
  return xsimd::hadd(sums);
}

template <class Arch>
float lane_max(const xsimd::batch<float, Arch>& maxima) {
#ifdef __AVX512F__
  if constexpr (std::is_same_v<Arch, xsimd::avx512f>)
    return fold_lanes(maxima, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
#endif
  alignas(Arch::alignment()) float lanes[xsimd::batch<float, Arch>::size];
  maxima.store_aligned(lanes);
  return *std::max_element(lanes, lanes + xsimd::batch<float, Arch>::size);
}

template <class Arch>
float RowMax::operator()(Arch, const float* row, std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  std::size_t j = 0;
  float result = -std::numeric_limits<float>::infinity();
  if (n >= Batch::size) {
    Batch maxima = Batch::load_unaligned(row);
    for (j = Batch::size; j + Batch::size <= n; j += Batch::size)
      maxima = xsimd::max(maxima, Batch::load_unaligned(row + j));
    result = lane_max(maxima);
  }
  for (; j < n; ++j) result = std::max(result, row[j]);
  return result;
}

template <class Arch>
float ExponentiateRow::operator()(Arch, const float* in, float* out, std::size_t n,
                                  float max) const {
  using Batch = xsimd::batch<float, Arch>;
  const Batch shift(max);
  Batch sums(0.0f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size) {
    const Batch e = xsimd::exp(Batch::load_unaligned(in + j) - shift);
    e.store_unaligned(out + j);
    sums += e;
  }
  float sum = lane_sum(sums);
  for (; j < n; ++j) sum += out[j] = std::exp(in[j] - max);
  return sum;
}

template <class Arch>
float RowDot::operator()(Arch, const float* a, const float* b, std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  Batch sums(0.0f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size)
    sums += Batch::load_unaligned(a + j) * Batch::load_unaligned(b + j);
  float sum = lane_sum(sums);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

template <class Arch>
float RowSum::operator()(Arch, const float* row, std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  Batch sums(0.0f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size) sums += Batch::load_unaligned(row + j);
  float sum = lane_sum(sums);
  for (; j < n; ++j) sum += row[j];
  return sum;
}

// The batch whose lanes are first, first + 1, …: the columns a batch of a row holds.
template <class Arch>
xsimd::batch<float, Arch> columns(std::size_t first) {
  alignas(Arch::alignment()) float lanes[xsimd::batch<float, Arch>::size];
  for (std::size_t i = 0; i < xsimd::batch<float, Arch>::size; ++i) lanes[i] = float(first + i);
  return xsimd::batch<float, Arch>::load_aligned(lanes);
}

// The batches wholly visible, then the one the last visible key falls in, its keys past it
// -inf before the exponential (exp(-inf) = 0), then zeros; a last partial batch in scalars.
template <class Arch>
void CausalSoftmaxRow::operator()(Arch, float* row, std::size_t visible, std::size_t width,
                                  float scale) const {
  using Batch = xsimd::batch<float, Arch>;
  constexpr std::size_t size = Batch::size;
  const std::size_t whole = width - width % size, seen = std::min(whole, visible - visible % size);
  float top =
      RowMax{}(Arch{}, row, visible);  // scale > 0: the scaled scores' max is the scaled max
  const Batch shift(top * scale), scales(scale), zero(0.0f);
  Batch sums = zero;
  std::size_t j = 0;
  for (; j < seen; j += size) {
    const Batch e = xsimd::exp(Batch::load_unaligned(row + j) * scales - shift);
    e.store_unaligned(row + j);
    sums += e;
  }
  if (j < whole) {  // the batch of the last visible key
    const auto visible_lanes = columns<Arch>(j) < Batch(float(visible));
    const Batch e = xsimd::select(
        visible_lanes, xsimd::exp(Batch::load_unaligned(row + j) * scales - shift), zero);
    e.store_unaligned(row + j);
    sums += e;
    for (j += size; j < whole; j += size) zero.store_unaligned(row + j);
  }
  float sum = lane_sum(sums);
  for (; j < width; ++j)
    sum += row[j] = j < visible ? std::exp(row[j] * scale - top * scale) : 0.0f;
  const Batch inverse(1.0f / sum);
  const std::size_t nonzero = std::min(whole, (visible + size - 1) / size * size);
  for (j = 0; j < nonzero; j += size)
    (Batch::load_unaligned(row + j) * inverse).store_unaligned(row + j);
  for (j = whole; j < visible; ++j) row[j] *= 1.0f / sum;
}

template <class Arch>
void CausalSoftmaxBackwardRow::operator()(Arch, const float* p, float* g, std::size_t visible,
                                          std::size_t width, float scale) const {
  using Batch = xsimd::batch<float, Arch>;
  constexpr std::size_t size = Batch::size;
  const std::size_t whole = width - width % size, seen = std::min(whole, visible - visible % size);
  const float dot = RowDot{}(Arch{}, g, p, visible);
  const Batch dots(dot), scales(scale), zero(0.0f);
  std::size_t j = 0;
  for (; j < seen; j += size)
    (Batch::load_unaligned(p + j) * (Batch::load_unaligned(g + j) - dots) * scales)
        .store_unaligned(g + j);
  if (j < whole) {  // the batch of the last visible key
    const auto visible_lanes = columns<Arch>(j) < Batch(float(visible));
    const Batch d = Batch::load_unaligned(p + j) * (Batch::load_unaligned(g + j) - dots) * scales;
    xsimd::select(visible_lanes, d, zero).store_unaligned(g + j);
    for (j += size; j < whole; j += size) zero.store_unaligned(g + j);
  }
  for (; j < width; ++j) g[j] = j < visible ? p[j] * (g[j] - dot) * scale : 0.0f;
}

template <class Arch>
void GeluRow::operator()(Arch, const float* x, float* out, std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  const float c = 0.7978845608028654f;  // sqrt(2 / π)
  const Batch minus_2c(-2.0f * c), cubic(0.044715f), one(1.0f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size) {
    const Batch v = Batch::load_unaligned(x + j);
    const Batch e = xsimd::exp(minus_2c * (v + cubic * v * v * v));  // exp(−2u)
    (v / (one + e)).store_unaligned(out + j);
  }
  for (; j < n; ++j)
    out[j] = x[j] / (1.0f + std::exp(-2.0f * c * (x[j] + 0.044715f * x[j] * x[j] * x[j])));
}

template <class Arch>
void GeluBackwardRow::operator()(Arch, const float* h, const float* g, float* d,
                                 std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  const float c = 0.7978845608028654f;
  const Batch zero(0.0f), one(1.0f), half(0.5f), two(2.0f), cs(c), cubic3(3.0f * 0.044715f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size) {
    const Batch x = Batch::load_unaligned(h + j);
    const auto at_zero = x == zero;
    const Batch s =
        xsimd::select(at_zero, half, Batch::load_unaligned(g + j) / xsimd::select(at_zero, one, x));
    const Batch du = cs * (one + cubic3 * x * x);
    (Batch::load_unaligned(d + j) * (s + two * x * s * (one - s) * du)).store_unaligned(d + j);
  }
  for (; j < n; ++j) {
    const float x = h[j], s = x != 0.0f ? g[j] / x : 0.5f;
    d[j] *= s + 2.0f * x * s * (1.0f - s) * c * (1.0f + 3.0f * 0.044715f * x * x);
  }
}

template float RowMax::operator()(MINIMODEL_SIMD_ARCH, const float*, std::size_t) const;
template float ExponentiateRow::operator()(MINIMODEL_SIMD_ARCH, const float*, float*, std::size_t,
                                           float) const;
template float RowDot::operator()(MINIMODEL_SIMD_ARCH, const float*, const float*,
                                  std::size_t) const;
template float RowSum::operator()(MINIMODEL_SIMD_ARCH, const float*, std::size_t) const;
template void CausalSoftmaxRow::operator()(MINIMODEL_SIMD_ARCH, float*, std::size_t, std::size_t,
                                           float) const;
template void CausalSoftmaxBackwardRow::operator()(MINIMODEL_SIMD_ARCH, const float*, float*,
                                                   std::size_t, std::size_t, float) const;
template void GeluRow::operator()(MINIMODEL_SIMD_ARCH, const float*, float*, std::size_t) const;
template void GeluBackwardRow::operator()(MINIMODEL_SIMD_ARCH, const float*, const float*, float*,
                                          std::size_t) const;

}  // namespace minimodel::simd
