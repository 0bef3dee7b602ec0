// libxsmm is column-major: a row-major (m, n) matrix is its (n, m) transpose, so the row-major
// product c = op(a) b is the column-major cᵀ = bᵀ op(a)ᵀ, the operands swapped, and a transposed
// row-major a is libxsmm's transposed second operand.
#include "small_gemm.hpp"

#include <cblas.h>

namespace minimodel {

SmallGemm::SmallGemm(bool trans_a, std::size_t m, std::size_t n, std::size_t k, std::size_t lda,
                     std::size_t ldb, std::size_t ldc, bool accumulate, Products products)
    : trans_a_(trans_a),
      m_(int(m)),
      n_(int(n)),
      k_(int(k)),
      lda_(int(lda)),
      ldb_(int(ldb)),
      ldc_(int(ldc)),
      beta_(accumulate ? 1.0f : 0.0f) {
  if (products == Products::openblas) return;
  const libxsmm_blasint ldb_x = ldb_, lda_x = lda_, ldc_x = ldc_;
  const float alpha = 1.0f;
  const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
  const int prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
  kernel_ =
      libxsmm_smmdispatch(n_, m_, k_, &ldb_x, &lda_x, &ldc_x, &alpha, &beta_, &flags, &prefetch);
  avx_ = libxsmm_get_target_archid() >= LIBXSMM_X86_AVX;
}

void SmallGemm::operator()(const float* a, const float* b, float* c) const {
  if (kernel_ != nullptr) {
    kernel_(b, a, c);
    // The kernels leave the upper halves of the vector registers in use: clear them, or each
    // SSE instruction compiled for any x86-64 (the rest of the code) waits on them.
    if (avx_) asm volatile("vzeroupper" ::: "memory");
  } else {
    cblas_sgemm(CblasRowMajor, trans_a_ ? CblasTrans : CblasNoTrans, CblasNoTrans, m_, n_, k_, 1.0f,
                a, lda_, b, ldb_, beta_, c, ldc_);
  }
}

}  // namespace minimodel
