// bench-reference's tuned layer: workbench/fast_attention's efficient_forward.
#include "bench/tuned_layer.hpp"
#include "fast_attention/fast_attention.hpp"

namespace workbench {
namespace {

minimodel::Tensor3 fast_forward(const minimodel::MultiHeadAttention& layer,
                                const minimodel::Tensor3& x, bool causal, const TunedCall& how) {
  using Part = minimodel::fast::FastOptions::Part;
  minimodel::fast::FastOptions options;
  options.threads = how.threads;
  options.part = how.part == TunedPart::projections ? Part::projections
                 : how.part == TunedPart::core      ? Part::core
                                                    : Part::whole;
  if (how.tile_queries > 0) options.tiles = minimodel::Tiles{how.tile_queries, how.tile_keys};
  return minimodel::fast::efficient_forward(layer, x, causal, options);
}

}  // namespace

TunedForward tuned_forward() { return fast_forward; }

}  // namespace workbench
