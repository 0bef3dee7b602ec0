// One instruction set's copy of the row loops: CMake compiles this file once per set of
// simd::Archs, with MINIMODEL_SIMD_ARCH naming it and the compiler flag that enables it.
#include "simd_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace minimodel::simd {

template <class Arch>
float RowMax::operator()(Arch, const float* row, std::size_t n) const {
  using Batch = xsimd::batch<float, Arch>;
  std::size_t j = 0;
  float result = -std::numeric_limits<float>::infinity();
  if (n >= Batch::size) {
    Batch maxima = Batch::load_unaligned(row);
    for (j = Batch::size; j + Batch::size <= n; j += Batch::size)
      maxima = xsimd::max(maxima, Batch::load_unaligned(row + j));
    alignas(Arch::alignment()) float lanes[Batch::size];
    maxima.store_aligned(lanes);
    result = *std::max_element(lanes, lanes + Batch::size);
  }
  for (; j < n; ++j) result = std::max(result, row[j]);
  return result;
}

// The sum of a batch's lanes, through memory: xsimd 8.1's hadd for avx512f uses an AVX512DQ
// instruction.
template <class Arch>
float lane_sum(const xsimd::batch<float, Arch>& sums) {
  alignas(Arch::alignment()) float lanes[xsimd::batch<float, Arch>::size];
  sums.store_aligned(lanes);
  return std::accumulate(lanes, lanes + xsimd::batch<float, Arch>::size, 0.0f);
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

template float RowMax::operator()(MINIMODEL_SIMD_ARCH, const float*, std::size_t) const;
template float ExponentiateRow::operator()(MINIMODEL_SIMD_ARCH, const float*, float*, std::size_t,
                                           float) const;
template float RowDot::operator()(MINIMODEL_SIMD_ARCH, const float*, const float*,
                                  std::size_t) const;
template float RowSum::operator()(MINIMODEL_SIMD_ARCH, const float*, std::size_t) const;

}  // namespace minimodel::simd
