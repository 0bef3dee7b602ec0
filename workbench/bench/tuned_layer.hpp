#pragma once
// The tuned rung of lab 07 that bench-reference times beside the plain reference, as the row
// "lab07_tuned" (workbench/fast_attention). bench-learner has none: a learner's code is timed as
// the learner wrote it, and only the reference has a tuned twin.
#include <cstddef>

#include "minimodel/attention/attention.hpp"

namespace workbench {

/// What a call runs: the whole layer, or for `bench-reference --bounds` (issue 28) its four
/// projections alone or its attention core alone (fast::FastOptions::Part).
enum class TunedPart { whole, projections, core };

/// How the tuned layer runs: on `threads` threads of its own, what part, and its tiles (0 x 0:
/// the tuned path's own choice for this machine, fast::machine_tiles).
struct TunedCall {
  std::size_t threads = 1;
  TunedPart part = TunedPart::whole;
  std::size_t tile_queries = 0, tile_keys = 0;
};

/// Lab 07's tuned efficient_forward for lab 01's layer.
using TunedForward = minimodel::Tensor3 (*)(const minimodel::MultiHeadAttention& layer,
                                            const minimodel::Tensor3& x, bool causal,
                                            const TunedCall& how);

/// This engine's tuned layer: fast_attention's in bench-reference, null in bench-learner.
TunedForward tuned_forward();

}  // namespace workbench
