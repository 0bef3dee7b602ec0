// attend-learner's lab 07 path: the learner's efficient_forward, as written.
#include "attend/efficient_engine.hpp"

namespace workbench {

minimodel::Tensor3 efficient_attention(const minimodel::MultiHeadAttention& layer,
                                       const minimodel::Tensor3& x, bool causal) {
  return minimodel::efficient_forward(layer, x, causal);
}

minimodel::Tensor3 efficient_attention(const minimodel::MultiheadCrossAttention& layer,
                                       const minimodel::Tensor3& query,
                                       const minimodel::Tensor3& key,
                                       const minimodel::Tensor3& value,
                                       const minimodel::CrossAttentionOptions& options,
                                       bool causal) {
  return minimodel::efficient_forward(layer, query, key, value, options, causal);
}

}  // namespace workbench
