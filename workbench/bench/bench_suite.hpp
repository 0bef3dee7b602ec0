#pragma once
// Issue 10's suite of shapes and its FLOP count, in one place: `workbook bench` times the labs'
// layers on it (bench_main.cpp), scripts/bench_torch.py times PyTorch on the shapes that bench
// reports, and lab 07's verify program plots efficient_forward's GF/s on it against PyTorch's.
#include <cstddef>
#include <vector>

namespace workbench {

/// One sequence of T tokens through a layer of width d_model with n_heads heads.
struct BenchShape {
  std::size_t T, d_model, n_heads;
};

inline const std::vector<BenchShape> kBenchSuite = {
    {128, 512, 8}, {512, 512, 8}, {1024, 768, 12}, {2048, 1024, 16}, {4096, 512, 8}};

/// FLOPs of one call, multiply-adds counted twice: Q, K, V and the output projection,
/// 4 · 2·T·d², then Q Kᵀ and P V, 2 · 2·T²·d. Causal attention is counted at the same FLOPs, so
/// skipping the masked half shows as a higher rate.
inline double attention_flops(const BenchShape& s) {
  const double T = double(s.T), d = double(s.d_model);
  return 8.0 * T * d * d + 4.0 * T * T * d;
}

}  // namespace workbench
