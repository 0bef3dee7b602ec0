// Lab 01 reference: multi-head attention with one big projection matrix per role.
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

void check_heads(const char* where, std::size_t d_model, std::size_t n_heads) {
  if (n_heads == 0)
    throw std::invalid_argument(std::string(where) + ": n_heads must be at least 1");
  if (d_model % n_heads != 0)
    throw std::invalid_argument(std::string(where) + ": d_model " + std::to_string(d_model) +
                                " is not divisible by n_heads " + std::to_string(n_heads));
}

// x_shape is the caller's own x, so a 2-D input is reported as 2-D.
void check_forward_inputs(const std::string& x_shape, std::size_t width, std::size_t T,
                          std::size_t d_model, const std::optional<Tensor2>& mask) {
  if (width != d_model)
    throw std::invalid_argument("MultiHeadAttention::forward: x is " + x_shape +
                                " but d_model is " + std::to_string(d_model));
  if (mask && (mask->shape(0) != T || mask->shape(1) != T))
    throw std::invalid_argument("MultiHeadAttention::forward: mask is " + shape_of(*mask) +
                                " but x is " + x_shape + "; the mask must be (T, T) = (" +
                                std::to_string(T) + ", " + std::to_string(T) + ")");
}

}  // namespace

// ---- Block A: the weights ----------------------------------------------------------------------

MultiHeadAttention::MultiHeadAttention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed)
    : n_heads_(n_heads) {
  check_heads("MultiHeadAttention", d_model, n_heads);
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Unit-variance inputs keep unit variance through x @ W when W's entries have variance 1/d_model.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model));
  for (Tensor2* w : {&w_q_, &w_k_, &w_v_, &w_o_}) {
    *w = Tensor2({d_model, d_model});
    for (float& value : *w) value = normal(generator) * scale;
  }
}

MultiHeadAttention::MultiHeadAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                                       std::size_t n_heads)
    : w_q_(std::move(w_q)),
      w_k_(std::move(w_k)),
      w_v_(std::move(w_v)),
      w_o_(std::move(w_o)),
      n_heads_(n_heads) {
  if (w_q_.shape(0) != w_q_.shape(1))
    throw std::invalid_argument("MultiHeadAttention: w_q is " + shape_of(w_q_) +
                                " but must be square (d_model, d_model)");
  for (const auto& [name, w] : {std::pair{"w_k", &w_k_}, {"w_v", &w_v_}, {"w_o", &w_o_}})
    if (w->shape() != w_q_.shape())
      throw std::invalid_argument("MultiHeadAttention: w_q is " + shape_of(w_q_) + " but " + name +
                                  " is " + shape_of(*w) + "; all four must be (d_model, d_model)");
  check_heads("MultiHeadAttention", w_q_.shape(0), n_heads);
}

// ---- Block B: split and merge heads ------------------------------------------------------------

// x: (B, T, d_model) -> (B, H, T, d_head)
Tensor4 split_heads(const Tensor3& x, std::size_t n_heads) {
  check_heads("split_heads", x.shape(2), n_heads);
  const std::size_t B = x.shape(0), T = x.shape(1), d_head = x.shape(2) / n_heads;
  // Reshape first (row-major keeps each token's features together), then swap T and H.
  auto by_head = xt::reshape_view(x, std::array<std::size_t, 4>{B, T, n_heads, d_head});
  return xt::transpose(by_head, {0, 2, 1, 3});  // (B, H, T, d_head)
}

// heads: (B, H, T, d_head) -> (B, T, H * d_head)
Tensor3 merge_heads(const Tensor4& heads) {
  const std::size_t B = heads.shape(0), H = heads.shape(1), T = heads.shape(2);
  const std::size_t d_head = heads.shape(3);
  Tensor4 by_token = xt::transpose(heads, {0, 2, 1, 3});  // (B, T, H, d_head), a copy
  return xt::reshape_view(by_token, std::array<std::size_t, 3>{B, T, H * d_head});
}

// ---- Block C: project and forward --------------------------------------------------------------

// x: (B, T, d_in) @ w: (d_in, d_out) -> (B, T, d_out)
Tensor3 project(const Tensor3& x, const Tensor2& w) {
  if (x.shape(2) != w.shape(0))
    throw std::invalid_argument("project: x is " + shape_of(x) + " but w is " + shape_of(w) +
                                "; x's width must be w's row count");
  const std::size_t B = x.shape(0), T = x.shape(1), d_out = w.shape(1);
  if (B * T == 1) {  // one token: a GEMV reads W once; a one-row GEMM would first pack all of W
    const Tensor1 token = xt::flatten(x);                           // (d_in)
    const xt::xarray<float> projected = xt::linalg::dot(token, w);  // (d_out)
    Tensor3 out = Tensor3::from_shape({1, 1, d_out});
    std::copy(projected.begin(), projected.end(), out.begin());
    return out;
  }
  Tensor2 rows = xt::reshape_view(x, std::array<std::size_t, 2>{B * T, x.shape(2)});
  Tensor2 projected = xt::linalg::dot(rows, w);  // (B*T, d_out), one GEMM
  return xt::reshape_view(projected, std::array<std::size_t, 3>{B, T, d_out});
}

// x: (B, T, d_in) @ w: (d_in, d_out) + bias: (d_out) -> (B, T, d_out)
Tensor3 project(const Tensor3& x, const Tensor2& w, const Tensor1& bias) {
  if (bias.size() != w.shape(1))
    throw std::invalid_argument("project: w is " + shape_of(w) + " but bias is " + shape_of(bias) +
                                "; it must be (d_out) = (" + std::to_string(w.shape(1)) + ")");
  Tensor3 projected = project(x, w);  // (B, T, d_out)
  projected += bias;                  // (d_out) broadcasts over the tokens
  return projected;
}

// x: (B, T, d_model) -> (B, T, d_model); weights_: (B, H, T, T)
Tensor3 MultiHeadAttention::forward(const Tensor3& x, const std::optional<Tensor2>& mask) {
  check_forward_inputs(shape_of(x), x.shape(2), x.shape(1), d_model(), mask);
  const std::size_t B = x.shape(0), T = x.shape(1), H = n_heads_;

  // 1. Project every token with one matrix per role, then 2. split the columns into heads.
  Tensor4 q = split_heads(project(x, w_q_), H);  // (B, H, T, d_head)
  Tensor4 k = split_heads(project(x, w_k_), H);  // (B, H, T, d_head)
  Tensor4 v = split_heads(project(x, w_v_), H);  // (B, H, T, d_head)

  // 3. Each head of each sequence attends on its own: lab 00's single_head_attention.
  Tensor4 context({B, H, T, d_head()});
  weights_ = Tensor4({B, H, T, T});
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < H; ++h) {
      AttentionResult head =
          single_head_attention(xt::view(q, b, h), xt::view(k, b, h), xt::view(v, b, h), mask);
      xt::view(context, b, h) = head.output;    // (T, d_head)
      xt::view(weights_, b, h) = head.weights;  // (T, T)
    }
  }

  // 4. Concatenate the heads again and 5. mix them with W_O.
  return project(merge_heads(context), w_o_);  // (B, T, d_model)
}

// x: (T, d_model) -> (T, d_model); weights_: (1, H, T, T)
Tensor2 MultiHeadAttention::forward(const Tensor2& x, const std::optional<Tensor2>& mask) {
  check_forward_inputs(shape_of(x), x.shape(1), x.shape(0), d_model(), mask);
  const std::size_t T = x.shape(0), d = x.shape(1);
  Tensor3 batch = xt::reshape_view(x, std::array<std::size_t, 3>{1, T, d});
  Tensor3 y = forward(batch, mask);
  return xt::reshape_view(y, std::array<std::size_t, 2>{T, d});
}

}  // namespace minimodel
