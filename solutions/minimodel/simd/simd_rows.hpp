#pragma once
// The row loops that are most of the reference's work outside its SGEMMs: lab 07's online softmax
// over one row of a tile, and lab 13's LayerNorm sums and exponentials. simd_rows.cpp is compiled
// once per instruction set below, and xsimd::dispatch chooses the widest one the CPU has at run
// time: the default build stays portable (no -march=native), and a CPU with AVX2 or AVX-512 still
// uses them.
#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace minimodel::simd {

/// max over row[0, n) (-inf if n = 0), with the widest instruction set this CPU has.
float row_max(const float* row, std::size_t n);

/// row[j] = exp(row[j] - max) for j < n, in place, with the widest instruction set this CPU has;
/// returns their sum.
float exponentiate_row(float* row, std::size_t n, float max);

/// out[j] = exp(in[j] - max) for j < n (in and out may be one row); returns their sum.
float exponentiate_row(const float* in, float* out, std::size_t n, float max);

/// Σ a[j] b[j] over j < n, summed in the lanes of the widest instruction set (so in another order
/// than a loop's: the last bits differ).
float row_dot(const float* a, const float* b, std::size_t n);

/// Σ row[j] over j < n, in lanes as row_dot.
float row_sum(const float* row, std::size_t n);

/// A causal attention row: row[0, width) holds scores of which the first `visible` are the keys
/// the query sees (1 <= visible <= width); it becomes softmax(scale · row[0, visible)) followed by
/// zeros.
void causal_softmax_row(float* row, std::size_t visible, std::size_t width, float scale);

/// Its backward: g[0, width) holds dL/dp for the row p[0, width) that causal_softmax_row made; it
/// becomes dL/dscores = scale · p ⊙ (g − Σ g ⊙ p) on the visible keys, zeros after them.
void causal_softmax_backward_row(const float* p, float* g, std::size_t visible, std::size_t width,
                                 float scale);

/// GELU's tanh form, out[j] = x σ(2u), u = sqrt(2/π) (x + 0.044715 x³), for j < n.
void gelu_row(const float* x, float* out, std::size_t n);

/// d[j] *= gelu'(h[j]) for j < n, with σ(2u) recovered from the forward's g = h σ as g / h (1/2
/// at h = 0): gelu' = σ + 2 h σ (1 − σ) u'(h), u' = sqrt(2/π) (1 + 3 · 0.044715 h²).
void gelu_backward_row(const float* h, const float* g, float* d, std::size_t n);

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
  float operator()(Arch, const float* in, float* out, std::size_t n, float max) const;
};

/// row_dot for one instruction set.
struct RowDot {
  template <class Arch>
  float operator()(Arch, const float* a, const float* b, std::size_t n) const;
};

/// row_sum for one instruction set.
struct RowSum {
  template <class Arch>
  float operator()(Arch, const float* row, std::size_t n) const;
};

/// causal_softmax_row for one instruction set.
struct CausalSoftmaxRow {
  template <class Arch>
  void operator()(Arch, float* row, std::size_t visible, std::size_t width, float scale) const;
};

/// causal_softmax_backward_row for one instruction set.
struct CausalSoftmaxBackwardRow {
  template <class Arch>
  void operator()(Arch, const float* p, float* g, std::size_t visible, std::size_t width,
                  float scale) const;
};

/// gelu_row for one instruction set.
struct GeluRow {
  template <class Arch>
  void operator()(Arch, const float* x, float* out, std::size_t n) const;
};

/// gelu_backward_row for one instruction set.
struct GeluBackwardRow {
  template <class Arch>
  void operator()(Arch, const float* h, const float* g, float* d, std::size_t n) const;
};

}  // namespace minimodel::simd
