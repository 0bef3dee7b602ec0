// The choice among simd_rows.cpp's copies, made once when the program starts. xsimd 8.1 reads the
// CPU with an asm "cpuid" that is not volatile, so where its first call is inlined, GCC may hoist
// the instruction out of the static's guard and run it on every call; under a hypervisor each
// cpuid is a trap of tens of microseconds. Namespace-scope dispatchers keep it in the start-up
// code.
#include "simd_rows.hpp"

namespace minimodel::simd {
namespace {

auto dispatched_row_max = xsimd::dispatch<Archs>(RowMax{});
auto dispatched_exponentiate_row = xsimd::dispatch<Archs>(ExponentiateRow{});
auto dispatched_row_dot = xsimd::dispatch<Archs>(RowDot{});
auto dispatched_row_sum = xsimd::dispatch<Archs>(RowSum{});
auto dispatched_causal_softmax_row = xsimd::dispatch<Archs>(CausalSoftmaxRow{});
auto dispatched_causal_softmax_backward_row = xsimd::dispatch<Archs>(CausalSoftmaxBackwardRow{});
auto dispatched_gelu_row = xsimd::dispatch<Archs>(GeluRow{});
auto dispatched_gelu_backward_row = xsimd::dispatch<Archs>(GeluBackwardRow{});

}  // namespace

float row_max(const float* row, std::size_t n) { return dispatched_row_max(row, n); }

float exponentiate_row(float* row, std::size_t n, float max) {
  return dispatched_exponentiate_row(row, row, n, max);
}

float exponentiate_row(const float* in, float* out, std::size_t n, float max) {
  return dispatched_exponentiate_row(in, out, n, max);
}

float row_dot(const float* a, const float* b, std::size_t n) { return dispatched_row_dot(a, b, n); }

float row_sum(const float* row, std::size_t n) { return dispatched_row_sum(row, n); }

void causal_softmax_row(float* row, std::size_t visible, std::size_t width, float scale) {
  dispatched_causal_softmax_row(row, visible, width, scale);
}

void causal_softmax_backward_row(const float* p, float* g, std::size_t visible, std::size_t width,
                                 float scale) {
  dispatched_causal_softmax_backward_row(p, g, visible, width, scale);
}

void gelu_row(const float* x, float* out, std::size_t n) { dispatched_gelu_row(x, out, n); }

void gelu_backward_row(const float* h, const float* g, float* d, std::size_t n) {
  dispatched_gelu_backward_row(h, g, d, n);
}

}  // namespace minimodel::simd
