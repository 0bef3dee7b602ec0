// Lab 03 reference: GPT-2's attention with one fused QKV projection (c_attn) and c_proj.
#include <array>
#include <random>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/gpt2_attention.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

// GPT-2's initializer_range: every weight ~ N(0, 0.02²).
constexpr float kInitStd = 0.02f;

void check_heads(std::size_t d_model, std::size_t n_heads) {
  if (n_heads == 0) throw std::invalid_argument("GPT2Attention: n_heads must be at least 1");
  if (d_model % n_heads != 0)
    throw std::invalid_argument("GPT2Attention: d_model " + std::to_string(d_model) +
                                " is not divisible by n_heads " + std::to_string(n_heads));
}

// x: (B, T, d_in) -> x @ w + bias: (B, T, d_out), as one GEMM over all B*T tokens (Conv1D).
Tensor3 conv1d(const Tensor3& x, const Tensor2& w, const Tensor1& bias) {
  const std::size_t B = x.shape(0), T = x.shape(1);
  Tensor2 rows = xt::reshape_view(x, std::array<std::size_t, 2>{B * T, x.shape(2)});
  Tensor2 projected = xt::linalg::dot(rows, w);  // (B*T, d_out)
  projected += bias;                             // (d_out) broadcasts over the rows
  return xt::reshape_view(projected, std::array<std::size_t, 3>{B, T, w.shape(1)});
}

}  // namespace

// ---- Block A: the weights ----------------------------------------------------------------------

GPT2Attention::GPT2Attention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed)
    : n_heads_(n_heads) {
  check_heads(d_model, n_heads);
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  c_attn_weight_ = Tensor2({d_model, 3 * d_model});
  c_proj_weight_ = Tensor2({d_model, d_model});
  // One generator, c_attn first: the order is part of the blueprint, so figures reproduce.
  for (Tensor2* w : {&c_attn_weight_, &c_proj_weight_})
    for (float& value : *w) value = normal(generator) * kInitStd;
  c_attn_bias_ = xt::zeros<float>({3 * d_model});
  c_proj_bias_ = xt::zeros<float>({d_model});
}

GPT2Attention::GPT2Attention(Tensor2 c_attn_weight, Tensor1 c_attn_bias, Tensor2 c_proj_weight,
                             Tensor1 c_proj_bias, std::size_t n_heads)
    : c_attn_weight_(std::move(c_attn_weight)),
      c_attn_bias_(std::move(c_attn_bias)),
      c_proj_weight_(std::move(c_proj_weight)),
      c_proj_bias_(std::move(c_proj_bias)),
      n_heads_(n_heads) {
  // c_attn_weight fixes d_model; every other tensor is checked against it.
  const std::size_t d = c_attn_weight_.shape(0);
  const std::string attn = "GPT2Attention: c_attn_weight is " + shape_of(c_attn_weight_);
  if (c_attn_weight_.shape(1) != 3 * d)
    throw std::invalid_argument(attn + " but must be (d_model, 3 d_model) = (" + std::to_string(d) +
                                ", " + std::to_string(3 * d) + ")");
  if (c_attn_bias_.shape(0) != 3 * d)
    throw std::invalid_argument(attn + " but c_attn_bias is " + shape_of(c_attn_bias_) +
                                "; it must be (3 d_model) = (" + std::to_string(3 * d) + ")");
  if (c_proj_weight_.shape(0) != d || c_proj_weight_.shape(1) != d)
    throw std::invalid_argument(attn + " but c_proj_weight is " + shape_of(c_proj_weight_) +
                                "; it must be (d_model, d_model) = (" + std::to_string(d) + ", " +
                                std::to_string(d) + ")");
  if (c_proj_bias_.shape(0) != d)
    throw std::invalid_argument(attn + " but c_proj_bias is " + shape_of(c_proj_bias_) +
                                "; it must be (d_model) = (" + std::to_string(d) + ")");
  check_heads(d, n_heads);
}

// ---- Block B: split the fused projection -------------------------------------------------------

// fused: (B, T, 3 d_model) -> q, k, v: (B, T, d_model) each
QKV split_qkv(const Tensor3& fused) {
  if (fused.shape(2) % 3 != 0)
    throw std::invalid_argument("split_qkv: fused is " + shape_of(fused) + " but its width " +
                                std::to_string(fused.shape(2)) + " is not a multiple of 3");
  const std::size_t d = fused.shape(2) / 3;
  // Column block r of the last axis is role r; assigning to Tensor3 copies each into a container.
  auto block = [&](std::size_t r) -> Tensor3 {
    return xt::view(fused, xt::all(), xt::all(), xt::range(r * d, (r + 1) * d));
  };
  return {block(0), block(1), block(2)};
}

// ---- Block C: forward --------------------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); weights_: (B, H, T, T)
Tensor3 GPT2Attention::forward(const Tensor3& x, bool causal) {
  if (x.shape(2) != d_model())
    throw std::invalid_argument("GPT2Attention::forward: x is " + shape_of(x) + " but d_model is " +
                                std::to_string(d_model()));
  const std::size_t B = x.shape(0), T = x.shape(1), H = n_heads_;

  // 1. One GEMM for all three roles: x @ c_attn_weight + c_attn_bias.
  const QKV qkv = split_qkv(conv1d(x, c_attn_weight_, c_attn_bias_));  // 2. (B, T, d_model) each

  // 3. Lab 01's split: column block h of each role is head h.
  const Tensor4 q = split_heads(qkv.q, H);  // (B, H, T, d_head)
  const Tensor4 k = split_heads(qkv.k, H);
  const Tensor4 v = split_heads(qkv.v, H);

  // 4. Every head of every sequence attends alone (lab 00), with lab 02's mask when causal.
  const std::optional<Tensor2> mask =
      causal ? std::optional<Tensor2>(causal_mask(T)) : std::nullopt;
  Tensor4 context({B, H, T, d_model() / H});
  weights_ = Tensor4({B, H, T, T});
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < H; ++h) {
      AttentionResult head =
          single_head_attention(xt::view(q, b, h), xt::view(k, b, h), xt::view(v, b, h), mask);
      xt::view(context, b, h) = head.output;    // (T, d_head)
      xt::view(weights_, b, h) = head.weights;  // (T, T)
    }
  }

  // 5. Concatenate the heads (lab 01) and 6. mix them with c_proj.
  return conv1d(merge_heads(context), c_proj_weight_, c_proj_bias_);  // (B, T, d_model)
}

// x: (T, d_model) -> (T, d_model); weights_: (1, H, T, T)
Tensor2 GPT2Attention::forward(const Tensor2& x, bool causal) {
  // Checked here so that the message names the 2-D shape the caller passed.
  if (x.shape(1) != d_model())
    throw std::invalid_argument("GPT2Attention::forward: x is " + shape_of(x) + " but d_model is " +
                                std::to_string(d_model()));
  const std::size_t T = x.shape(0), d = x.shape(1);
  Tensor3 batch = xt::reshape_view(x, std::array<std::size_t, 3>{1, T, d});
  Tensor3 y = forward(batch, causal);
  return xt::reshape_view(y, std::array<std::size_t, 2>{T, d});
}

// ---- Block D: parameter count ------------------------------------------------------------------

// 4 d_model² + 4 d_model, from what is held rather than from a formula.
std::size_t GPT2Attention::parameter_count() const {
  return c_attn_weight_.size() + c_attn_bias_.size() + c_proj_weight_.size() + c_proj_bias_.size();
}

}  // namespace minimodel
