// Lab 05: rotary position embeddings (RoPE) and causal self-attention with RoPE.
// Read labs/05-rope.md first. The API and its shapes are in rope.hpp.
#include <cmath>
#include <limits>
#include <stdexcept>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: the frequency tables --------------------------------------------------------------

// -> cos_, sin_: (max_seq_len, d_head / 2)
RotaryPositionalEmbedding::RotaryPositionalEmbedding(float theta, std::size_t d_head,
                                                     std::size_t max_seq_len)
    : theta_(theta), d_head_(d_head), max_seq_len_(max_seq_len) {
  // TODO(lab 05, Block A): check theta, d_head and max_seq_len, then fill the cos and sin tables —
  // see labs/05-rope.md
  throw Todo(
      "TODO(lab 05, Block A): check theta, d_head and max_seq_len, then fill the cos and sin "
      "tables — see labs/05-rope.md");
}

// ---- Block B: rotate ----------------------------------------------------------------------------

// x: (T, d_head), positions: (T) -> (T, d_head)
Tensor2 RotaryPositionalEmbedding::apply(const Tensor2& x, const Positions& positions) const {
  // TODO(lab 05, Block B): check x and positions, then rotate each pair (2k, 2k+1) of row t by
  // angle(positions[t], k) — see labs/05-rope.md
  throw Todo(
      "TODO(lab 05, Block B): check x and positions, then rotate each pair (2k, 2k+1) of row t by "
      "angle(positions[t], k) — see labs/05-rope.md");
}

// x: (B, H, T, d_head), positions: (T) -> (B, H, T, d_head)
Tensor4 RotaryPositionalEmbedding::apply(const Tensor4& x, const Positions& positions) const {
  // TODO(lab 05, Block B): check x and positions, then rotate every batch element and head with the
  // 2-D apply — see labs/05-rope.md
  throw Todo(
      "TODO(lab 05, Block B): check x and positions, then rotate every batch element and head with "
      "the 2-D apply — see labs/05-rope.md");
}

// ---- Block C: causal self-attention with RoPE ---------------------------------------------------

// x: (B, T, d_model) -> output (B, T, d_model), weights (B, H, T, T)
MultiHeadResult rope_self_attention(const Tensor3& x, const Tensor2& w_q, const Tensor2& w_k,
                                    const Tensor2& w_v, const Tensor2& w_o, std::size_t n_heads,
                                    const RotaryPositionalEmbedding& rope,
                                    const Positions& positions) {
  // TODO(lab 05, Block C): implement rope_self_attention (check, project, split heads, rotate q and
  // k, causal attention per head, merge, W_O) — see labs/05-rope.md
  throw Todo(
      "TODO(lab 05, Block C): implement rope_self_attention (check, project, split heads, rotate q "
      "and k, causal attention per head, merge, W_O) — see labs/05-rope.md");
}

}  // namespace minimodel
