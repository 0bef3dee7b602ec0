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

template <class Arch>
float ExponentiateRow::operator()(Arch, float* row, std::size_t n, float max) const {
  using Batch = xsimd::batch<float, Arch>;
  const Batch shift(max);
  Batch sums(0.0f);
  std::size_t j = 0;
  for (; j + Batch::size <= n; j += Batch::size) {
    const Batch e = xsimd::exp(Batch::load_unaligned(row + j) - shift);
    e.store_unaligned(row + j);
    sums += e;
  }
  // The lanes' sum, through memory: xsimd 8.1's hadd for avx512f uses an AVX512DQ instruction.
  alignas(Arch::alignment()) float lanes[Batch::size];
  sums.store_aligned(lanes);
  float sum = std::accumulate(lanes, lanes + Batch::size, 0.0f);
  for (; j < n; ++j) sum += row[j] = std::exp(row[j] - max);
  return sum;
}

template float RowMax::operator()(MINIMODEL_SIMD_ARCH, const float*, std::size_t) const;
template float ExponentiateRow::operator()(MINIMODEL_SIMD_ARCH, float*, std::size_t, float) const;

}  // namespace minimodel::simd
