// attend-reference's lab 07 path: the tuned twin of the reference (workbench/fast_attention), on as
// many threads of its own as attend gave OpenBLAS (--threads), with OpenBLAS set to one thread for
// the call, as fast_attention.hpp asks; this program owns its process.
#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include <algorithm>

#include "attend/efficient_engine.hpp"
#include "fast_attention/fast_attention.hpp"

namespace workbench {
namespace {

// The engine's thread count for the tuned path's own threads; OpenBLAS on one while it lives.
class TunedThreads {
 public:
  TunedThreads() : blas_threads_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~TunedThreads() { openblas_set_num_threads(blas_threads_); }
  TunedThreads(const TunedThreads&) = delete;
  TunedThreads& operator=(const TunedThreads&) = delete;

  minimodel::fast::FastOptions options() const {
    minimodel::fast::FastOptions options;
    options.threads = std::size_t(std::max(1, blas_threads_));
    return options;
  }

 private:
  int blas_threads_;
};

}  // namespace

minimodel::Tensor3 efficient_attention(const minimodel::MultiHeadAttention& layer,
                                       const minimodel::Tensor3& x, bool causal) {
  const TunedThreads threads;
  return minimodel::fast::efficient_forward(layer, x, causal, threads.options());
}

minimodel::Tensor3 efficient_attention(const minimodel::MultiheadCrossAttention& layer,
                                       const minimodel::Tensor3& query,
                                       const minimodel::Tensor3& key,
                                       const minimodel::Tensor3& value,
                                       const minimodel::CrossAttentionOptions& options,
                                       bool causal) {
  const TunedThreads threads;
  return minimodel::fast::efficient_forward(layer, query, key, value, options, causal,
                                            threads.options());
}

}  // namespace workbench
