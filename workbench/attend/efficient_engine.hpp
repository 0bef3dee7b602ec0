#pragma once
// Lab 07's efficient_forward as this engine runs it when no weights are asked for: attend-learner
// runs the learner's own; attend-reference the tuned twin of lab 07's reference
// (workbench/fast_attention), which `workbook bench` times as "lab07_tuned" and
// tests/fast_attention_test.cpp checks against the plain reference.
#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"

namespace workbench {

/// Lab 01's layer: x (B, T, d_model) -> (B, T, d_model).
minimodel::Tensor3 efficient_attention(const minimodel::MultiHeadAttention& layer,
                                       const minimodel::Tensor3& x, bool causal);

/// Lab 06's layer, output only: query (B, T, d_model), key and value (B, S, d_model).
minimodel::Tensor3 efficient_attention(const minimodel::MultiheadCrossAttention& layer,
                                       const minimodel::Tensor3& query,
                                       const minimodel::Tensor3& key,
                                       const minimodel::Tensor3& value,
                                       const minimodel::CrossAttentionOptions& options,
                                       bool causal);

}  // namespace workbench
