// Lab 03: GPT-2's attention with one fused QKV projection (c_attn) and c_proj.
// Read labs/03-fused-qkv.md first. The API and its shapes are in gpt2_attention.hpp.
#include <array>
#include <random>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/gpt2_attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: the weights ----------------------------------------------------------------------

GPT2Attention::GPT2Attention(std::size_t d_model, std::size_t n_heads, std::uint64_t seed) {
  // TODO(lab 03, Block A): check n_heads, then draw c_attn_weight and c_proj_weight from N(0,
  // 0.02²) with the seeded generator; biases zero — see labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block A): check n_heads, then draw c_attn_weight and c_proj_weight from N(0, "
      "0.02²) with the seeded generator; biases zero — see labs/03-fused-qkv.md");
}

GPT2Attention::GPT2Attention(Tensor2 c_attn_weight, Tensor1 c_attn_bias, Tensor2 c_proj_weight,
                             Tensor1 c_proj_bias, std::size_t n_heads) {
  // TODO(lab 03, Block A): check the four Conv1D tensors and n_heads, then keep them — see
  // labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block A): check the four Conv1D tensors and n_heads, then keep them — see "
      "labs/03-fused-qkv.md");
}

// ---- Block B: split the fused projection -------------------------------------------------------

// fused: (B, T, 3 d_model) -> q, k, v: (B, T, d_model) each
QKV split_qkv(const Tensor3& fused) {
  // TODO(lab 03, Block B): implement split_qkv, the three column blocks of the fused projection —
  // see labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block B): implement split_qkv, the three column blocks of the fused projection "
      "— see labs/03-fused-qkv.md");
}

// ---- Block C: forward --------------------------------------------------------------------------

// x: (B, T, d_model) -> (B, T, d_model); weights_: (B, H, T, T)
Tensor3 GPT2Attention::forward(const Tensor3& x, bool causal) {
  // TODO(lab 03, Block C): implement GPT2Attention::forward (c_attn, split_qkv, split heads, attend
  // per head, merge, c_proj) — see labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block C): implement GPT2Attention::forward (c_attn, split_qkv, split heads, "
      "attend per head, merge, c_proj) — see labs/03-fused-qkv.md");
}

// x: (T, d_model) -> (T, d_model); weights_: (1, H, T, T)
Tensor2 GPT2Attention::forward(const Tensor2& x, bool causal) {
  // TODO(lab 03, Block C): implement the 2-D forward as a batch of one — see labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block C): implement the 2-D forward as a batch of one — see "
      "labs/03-fused-qkv.md");
}

// ---- Block D: parameter count ------------------------------------------------------------------

// 4 d_model² + 4 d_model, from what is held rather than from a formula.
std::size_t GPT2Attention::parameter_count() const {
  // TODO(lab 03, Block D): count the parameters of the four tensors held — see labs/03-fused-qkv.md
  throw Todo(
      "TODO(lab 03, Block D): count the parameters of the four tensors held — see "
      "labs/03-fused-qkv.md");
}

}  // namespace minimodel
