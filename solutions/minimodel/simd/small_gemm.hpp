#pragma once
// Matrix products by libxsmm's kernels: generated at run time for one product's exact sizes and
// this CPU's instruction set (JIT), they read their operands where they lie. OpenBLAS first copies
// both operands into panels of its own on every call: on lab 13's products (2048 rows of width
// 128 to 512, the attention's tiles of 32) the kernels ran 10 to 18 % faster on a Zen 4, as
// lab 07's tuned tiles found before them (workbench/fast_attention).
#include <cstddef>

#include <libxsmm.h>

namespace minimodel {

/// Who computes a product: libxsmm's kernel, or OpenBLAS, whose copies of the operands into its
/// own panels pay for themselves on some products (their callers say which, and why).
enum class Products { small_gemm, openblas };

/// Row-major c (m, n) = op(a) (m, k) b (k, n), plus c if accumulate; op(a) = aᵀ if trans_a (a is
/// then stored (k, m)). Made once for its sizes, called on any operands of them. Where libxsmm
/// makes no kernel (another build or CPU), or if products asks for it, OpenBLAS computes it.
class SmallGemm {
 public:
  SmallGemm(bool trans_a, std::size_t m, std::size_t n, std::size_t k, std::size_t lda,
            std::size_t ldb, std::size_t ldc, bool accumulate,
            Products products = Products::small_gemm);

  void operator()(const float* a, const float* b, float* c) const;

 private:
  bool trans_a_;
  int m_, n_, k_, lda_, ldb_, ldc_;
  float beta_;
  libxsmm_smmfunction kernel_ = nullptr;
  bool avx_ = false;  // the kernels use AVX registers
};

}  // namespace minimodel
