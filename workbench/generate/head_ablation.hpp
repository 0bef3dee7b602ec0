#pragma once
// `workbook evaluate --ablate`: a head of lab 13's GPT switched off by zeroing, in memory, the rows
// of its layer's attn.w_o that its output multiplies.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "generate/evaluate_options.hpp"
#include "minimodel/model/gpt.hpp"

namespace workbench {

/// Zeroes, for each head (l, h) of `heads`, rows h·d_head … (h+1)·d_head − 1 of layer l's
/// attn.w_o: the rows that multiply head h's output in concat_h(head_h) W_O, so the head adds
/// nothing to the residual stream (b_O, shared by every head, stays). No heads: `params` unchanged.
/// @throws std::invalid_argument naming the head and the model's layers or heads if one is out of
///         range (nothing is zeroed then).
inline void ablate_heads(minimodel::GptParams<float>& params, const std::vector<HeadRef>& heads) {
  const minimodel::GptConfig& c = params.config;
  for (const HeadRef& h : heads) {
    const std::string name = "--ablate " + head_names({h});
    if (h.layer >= c.n_layers)
      throw std::invalid_argument(name + ": the model has " + std::to_string(c.n_layers) +
                                  " layers, 0 to " + std::to_string(c.n_layers - 1));
    if (h.head >= c.n_heads)
      throw std::invalid_argument(name + ": each layer has " + std::to_string(c.n_heads) +
                                  " heads, 0 to " + std::to_string(c.n_heads - 1));
  }
  const std::size_t d_head = c.d_model / c.n_heads;
  for (const HeadRef& h : heads) {
    minimodel::Matrix<float>& w_o = params.layers[h.layer].attn.w_o;  // (d_model, d_model)
    for (std::size_t row = h.head * d_head; row < (h.head + 1) * d_head; ++row)
      for (std::size_t col = 0; col < c.d_model; ++col) w_o(row, col) = 0.0f;
  }
}

}  // namespace workbench
