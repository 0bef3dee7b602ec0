// Lab 09: the backward pass of attention, by hand.
// Read labs/09-backward-pass.md first. The API and its shapes are in backward.hpp. Every function
// is a template over Real; the two lines at the end compile it for float and double: keep them.
#include "minimodel/attention/backward.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: softmax and one head --------------------------------------------------------------

// probs, d_probs: (T, S) -> d_scores (T, S)
template <class Real>
Matrix<Real> softmax_backward(const Matrix<Real>& probs, const Matrix<Real>& d_probs) {
  // TODO(lab 09, Block A): check the shapes, then return probs ⊙ (d_probs − rowsum(d_probs ⊙
  // probs)) — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block A): check the shapes, then return probs ⊙ (d_probs − rowsum(d_probs ⊙ "
      "probs)) — see labs/09-backward-pass.md");
}

// q (T, d_head), k (S, d_head), v (S, d_v), mask (T, S) -> (T, d_v); tape: q, k, v, probs
template <class Real>
Matrix<Real> attention_forward(const Matrix<Real>& q, const Matrix<Real>& k, const Matrix<Real>& v,
                               const std::optional<Matrix<Real>>& mask, AttentionTape<Real>& tape) {
  // TODO(lab 09, Block A): lab 00's single_head_attention in Real, keeping q, k, v and the
  // probabilities on the tape — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block A): lab 00's single_head_attention in Real, keeping q, k, v and the "
      "probabilities on the tape — see labs/09-backward-pass.md");
}

// d_out (T, d_v) -> dq (T, d_head), dk (S, d_head), dv (S, d_v)
template <class Real>
AttentionGrads<Real> attention_backward(const AttentionTape<Real>& tape,
                                        const Matrix<Real>& d_out) {
  // TODO(lab 09, Block A): dv, then d_probs, d_scores, dq and dk, from the tape alone — see
  // labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block A): dv, then d_probs, d_scores, dq and dk, from the tape alone — see "
      "labs/09-backward-pass.md");
}

// ---- Block B: multi-head attention -------------------------------------------------------------

// x (T, d_model) -> (T, d_model); tape: x, each head's tape, the merged heads
template <class Real>
Matrix<Real> mha_forward(const MhaParams<Real>& params, const Matrix<Real>& x,
                         const std::optional<Matrix<Real>>& mask, MhaTape<Real>& tape) {
  // TODO(lab 09, Block B): check the parameters and x, project with biases, run
  // attention_forward on each head's column block, merge, project with W_O and b_O — see
  // labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block B): check the parameters and x, project with biases, run "
      "attention_forward on each head's column block, merge, project with W_O and b_O — see "
      "labs/09-backward-pass.md");
}

// d_out (T, d_model) -> dx and the gradient of every parameter
template <class Real>
MhaGrads<Real> mha_backward(const MhaParams<Real>& params, const MhaTape<Real>& tape,
                            const Matrix<Real>& d_out) {
  // TODO(lab 09, Block B): W_O and b_O first, then attention_backward per head, then the three
  // projections; dx sums the three paths — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block B): W_O and b_O first, then attention_backward per head, then the three "
      "projections; dx sums the three paths — see labs/09-backward-pass.md");
}

// ---- Block C: LayerNorm and the residual block --------------------------------------------------

// x (T, d_model) -> (T, d_model); tape: the normalised rows and 1 / sqrt(var + eps) per row
template <class Real>
Matrix<Real> layer_norm_forward(const Matrix<Real>& x, LayerNormTape<Real>& tape, Real eps) {
  // TODO(lab 09, Block C): check x and eps, then lab 04's layer_norm, keeping what the backward
  // needs — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block C): check x and eps, then lab 04's layer_norm, keeping what the backward "
      "needs — see labs/09-backward-pass.md");
}

// d_y (T, d_model) -> dx (T, d_model)
template <class Real>
Matrix<Real> layer_norm_backward(const LayerNormTape<Real>& tape, const Matrix<Real>& d_y) {
  // TODO(lab 09, Block C): inv_std ⊙ (d_y − mean(d_y) − x̂ ⊙ mean(d_y ⊙ x̂)), row by row — see
  // labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block C): inv_std ⊙ (d_y − mean(d_y) − x̂ ⊙ mean(d_y ⊙ x̂)), row by row — see "
      "labs/09-backward-pass.md");
}

// x (T, d_model) -> (T, d_model), post-LN or pre-LN around mha_forward
template <class Real>
Matrix<Real> block_forward(const MhaParams<Real>& params, Norm norm, const Matrix<Real>& x,
                           const std::optional<Matrix<Real>>& mask, BlockTape<Real>& tape) {
  // TODO(lab 09, Block C): lab 04's attention_block with layer_norm_forward and mha_forward,
  // recording both tapes and the arrangement — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block C): lab 04's attention_block with layer_norm_forward and mha_forward, "
      "recording both tapes and the arrangement — see labs/09-backward-pass.md");
}

// d_y (T, d_model) -> the block's dx and its attention layer's parameter gradients
template <class Real>
MhaGrads<Real> block_backward(const MhaParams<Real>& params, const BlockTape<Real>& tape,
                              const Matrix<Real>& d_y) {
  // TODO(lab 09, Block C): walk the block backwards: the LayerNorm, the sublayer, and the
  // residual path added to dx — see labs/09-backward-pass.md
  throw Todo(
      "TODO(lab 09, Block C): walk the block backwards: the LayerNorm, the sublayer, and the "
      "residual path added to dx — see labs/09-backward-pass.md");
}

MINIMODEL_LAB09_INSTANTIATE(float)
MINIMODEL_LAB09_INSTANTIATE(double)

}  // namespace minimodel
