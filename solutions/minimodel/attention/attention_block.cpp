// Lab 04 reference: the attention block, a residual connection and a LayerNorm around an
// attention sublayer, post-LN or pre-LN.
#include <cmath>
#include <stdexcept>
#include <string>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention_block.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

// The sublayer must be shape-preserving, or the residual sum x + sublayer(...) is meaningless
// (and xtensor would broadcast some mismatches silently instead of failing).
void check_sublayer_output(const Tensor3& x, const Tensor3& out) {
  if (out.shape() != x.shape())
    throw std::invalid_argument("attention_block: sublayer returned " + shape_of(out) +
                                " but x is " + shape_of(x) + "; the sublayer must keep x's shape");
}

}  // namespace

// ---- Block A: LayerNorm ------------------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model), every row (x - mean) / sqrt(var + eps)
Tensor3 layer_norm(const Tensor3& x, float eps) {
  if (x.shape(2) == 0)
    throw std::invalid_argument("layer_norm: x is " + shape_of(x) + "; d_model must be at least 1");
  if (!(eps > 0.0f) || !std::isfinite(eps))  // eps = 0 would turn a constant row into 0/0 = NaN
    throw std::invalid_argument("layer_norm: eps is " + std::to_string(eps) + " but must be > 0");

  // 1. The mean of each row, kept as (B, T, 1) so that it broadcasts over d_model. Evaluated into
  //    a container: in xtensor 0.24, x - xt::mean(x, {2}, xt::keep_dims) written lazily is wrong.
  const Tensor3 mean = xt::mean(x, {2}, xt::keep_dims);  // (B, T, 1)
  // 2. Centre first, then average the squares: the two-pass variance does not cancel
  //    catastrophically for rows with a large mean, as E[x^2] - E[x]^2 would.
  const Tensor3 centred = x - mean;                                     // (B, T, d_model)
  const Tensor3 var = xt::mean(centred * centred, {2}, xt::keep_dims);  // (B, T, 1), biased
  // 3. Normalise. eps keeps a constant row (var = 0) at 0 / sqrt(eps) = 0.
  return centred / xt::sqrt(var + eps);  // (B, T, d_model)
}

// ---- Block B: the residual block ---------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); sublayer keeps the shape
Tensor3 attention_block(const Tensor3& x, Norm norm,
                        const std::function<Tensor3(const Tensor3&)>& sublayer) {
  if (!sublayer) throw std::invalid_argument("attention_block: sublayer is empty");

  if (norm == Norm::post_ln) {
    // Post-LN: 1. the sublayer sees x itself, 2. add the residual, 3. normalise the sum, so the
    // stream that leaves the block is normalised.
    const Tensor3 update = sublayer(x);  // (B, T, d_model)
    check_sublayer_output(x, update);
    return layer_norm(x + update);
  }
  // Pre-LN: 1. normalise a copy for the sublayer, 2. run it, 3. add its output to the untouched
  // x, so the residual path from input to output is the identity.
  const Tensor3 update = sublayer(layer_norm(x));  // (B, T, d_model)
  check_sublayer_output(x, update);
  return x + update;
}

// ---- Block C: the block with multi-head attention ----------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); weights (d_model, d_model); mask (T, T)
Tensor3 mha_block(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k, const Tensor2& w_v,
                  const Tensor2& w_o, std::size_t n_heads, Norm norm,
                  const std::optional<Tensor2>& mask) {
  // Checked here, against x, so that the message names mha_block and x; MultiHeadAttention
  // would only compare the weights with each other, and forward would name the sublayer's input.
  const std::size_t T = x.shape(1), d_model = x.shape(2);
  const std::string square = "(" + std::to_string(d_model) + ", " + std::to_string(d_model) + ")";
  for (const auto& [name, w] :
       {std::pair{"w_q", &w_q}, {"w_k", &w_k}, {"w_v", &w_v}, {"w_o", &w_o}})
    if (w->shape(0) != d_model || w->shape(1) != d_model)
      throw std::invalid_argument("mha_block: " + std::string(name) + " is " + shape_of(*w) +
                                  " but x is " + shape_of(x) +
                                  "; each weight must be (d_model, d_model) = " + square);
  if (mask && (mask->shape(0) != T || mask->shape(1) != T))
    throw std::invalid_argument("mha_block: mask is " + shape_of(*mask) + " but x is " +
                                shape_of(x) + "; the mask must be (T, T) = (" + std::to_string(T) +
                                ", " + std::to_string(T) + ")");

  // 1. Lab 01's layer from the given weights (it checks n_heads), 2. wrapped as the sublayer of
  //    Block B, which places the LayerNorm and the residual.
  MultiHeadAttention mha(w_q, w_k, w_v, w_o, n_heads);
  return attention_block(x, norm, [&](const Tensor3& h) { return mha.forward(h, mask); });
}

}  // namespace minimodel
