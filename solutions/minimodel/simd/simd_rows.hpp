#pragma once
// The two loops of the online softmax over one row of a tile, which are most of the kernel's
// work outside its two SGEMMs. simd_rows.cpp is compiled once per instruction set below, and
// xsimd::dispatch chooses the widest one the CPU has at run time: the default build stays
// portable (no -march=native), and a CPU with AVX2 or AVX-512 still uses them.
#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace minimodel::simd {

/// max over row[0, n) (-inf if n = 0), with the widest instruction set this CPU has.
float row_max(const float* row, std::size_t n);

/// row[j] = exp(row[j] - max) for j < n, in place, with the widest instruction set this CPU has;
/// returns their sum.
float exponentiate_row(float* row, std::size_t n, float max);

// ---- What they dispatch to ---------------------------------------------------------------------

/// The instruction sets compiled, widest first, as xsimd::dispatch takes them.
using Archs = xsimd::arch_list<xsimd::avx512f, xsimd::avx2, xsimd::sse2>;

/// row_max for one instruction set.
struct RowMax {
  template <class Arch>
  float operator()(Arch, const float* row, std::size_t n) const;
};

/// exponentiate_row for one instruction set.
struct ExponentiateRow {
  template <class Arch>
  float operator()(Arch, float* row, std::size_t n, float max) const;
};

}  // namespace minimodel::simd
