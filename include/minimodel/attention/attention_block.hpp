#pragma once
// The attention block of lab 04: a residual connection and a LayerNorm around an attention
// sublayer, in the post-LN (Vaswani et al. 2017) or the pre-LN (GPT-2) arrangement. Locked by
// BLUEPRINT.md beside this file ("Lab 04").
//
// Shape names as in attention.hpp: B batch, T tokens, d_model model width, H heads.
#include <cstddef>
#include <functional>
#include <optional>

#include "minimodel/attention/attention.hpp"

namespace minimodel {

// ---- Lab 04: residual + LayerNorm ---------------------------------------------------------------

/// Where the LayerNorm sits: post-LN (Vaswani et al. 2017) or pre-LN (GPT-2).
enum class Norm { post_ln, pre_ln };

/// Block A. LayerNorm over the last axis, without learned gain or bias:
/// each row becomes (x - mean) / sqrt(var + eps), with the biased variance (divide by d_model).
/// x: (B, T, d_model) -> (B, T, d_model). A constant row becomes all zeros, never NaN.
/// @throws std::invalid_argument if d_model is 0 or eps is not positive (and finite); the message
///         names x's shape or eps.
Tensor3 layer_norm(const Tensor3& x, float eps = 1e-5f);

/// Block B. The residual block around any attention sublayer:
///   post-LN: layer_norm(x + sublayer(x));   pre-LN: x + sublayer(layer_norm(x)).
/// x: (B, T, d_model) -> (B, T, d_model); sublayer: (B, T, d_model) -> (B, T, d_model).
/// @throws std::invalid_argument if sublayer is empty, or returns another shape than x (the
///         message names both shapes).
Tensor3 attention_block(const Tensor3& x, Norm norm,
                        const std::function<Tensor3(const Tensor3&)>& sublayer);

/// Block C. attention_block with lab 01's MultiHeadAttention, built from these weights, as the
/// sublayer. x: (B, T, d_model) -> (B, T, d_model); w_q, w_k, w_v, w_o: each (d_model, d_model);
/// mask: optional additive (T, T), as in lab 02 (e.g. causal_mask(T)).
/// @throws std::invalid_argument if a weight is not (d_model, d_model) or the mask is not (T, T)
///         (the message names the weight or mask and x), or if n_heads is 0 or does not divide
///         d_model (from MultiHeadAttention, naming both numbers).
Tensor3 mha_block(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k, const Tensor2& w_v,
                  const Tensor2& w_o, std::size_t n_heads, Norm norm,
                  const std::optional<Tensor2>& mask = std::nullopt);

}  // namespace minimodel
