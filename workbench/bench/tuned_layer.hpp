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

/// Lab 07's tuned efficient_forward for lab 01's layer, on `threads` threads of its own.
using TunedForward = minimodel::Tensor3 (*)(const minimodel::MultiHeadAttention& layer,
                                            const minimodel::Tensor3& x, bool causal,
                                            std::size_t threads, TunedPart part);

/// This engine's tuned layer: fast_attention's in bench-reference, null in bench-learner.
TunedForward tuned_forward();

}  // namespace workbench
