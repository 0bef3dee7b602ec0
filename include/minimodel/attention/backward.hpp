#pragma once
// The API of lab 09: the backward pass of attention, written by hand. Each forward function
// records on a tape what its backward needs (the inputs it multiplies and the softmax's
// probabilities), and each backward turns the gradient of a loss with respect to the output into
// gradients with respect to the inputs and parameters. Locked by the "Lab 09" section of
// BLUEPRINT.md beside this file.
//
// Everything is a template over the element type `Real`, instantiated for float (training, and
// parity with PyTorch's autograd) and for double (finite-difference checks). One sequence at a
// time, no batch axis: T queries, S keys, d_model model width, H heads, d_head = d_model / H.
// Projections are applied as x @ W + b, as in labs 01 and 03.
#include <cstddef>
#include <optional>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "minimodel/attention/attention_block.hpp"

namespace minimodel {

template <class Real>
using Matrix = xt::xtensor<Real, 2>;
template <class Real>
using Vector = xt::xtensor<Real, 1>;

// ---- Block A: softmax and one head --------------------------------------------------------------

/// Block A. The gradient of a loss with respect to the scores, from its gradient with respect to
/// probs = softmax(scores) (row-wise): d_scores = probs ⊙ (d_probs − rowsum(d_probs ⊙ probs)).
/// This is the Jacobian-vector product, O(T·S); the (S, S) Jacobian of each row is never formed.
/// probs, d_probs: (T, S) -> (T, S).
/// @throws std::invalid_argument if the shapes differ (the message names both).
template <class Real>
Matrix<Real> softmax_backward(const Matrix<Real>& probs, const Matrix<Real>& d_probs);

/// What one head's forward keeps for its backward.
template <class Real>
struct AttentionTape {
  Matrix<Real> q, k, v;  ///< the inputs: (T, d_head), (S, d_head), (S, d_v)
  Matrix<Real> probs;    ///< softmax(q kᵀ / sqrt(d_head) + mask): (T, S)
};

/// Block A. softmax(q kᵀ / sqrt(d_head) + mask) v, as lab 00's single_head_attention, recording
/// the inputs and the probabilities on `tape`. q (T, d_head), k (S, d_head), v (S, d_v), mask
/// optional additive (T, S) -> (T, d_v).
/// @throws std::invalid_argument as single_head_attention (both shapes named).
template <class Real>
Matrix<Real> attention_forward(const Matrix<Real>& q, const Matrix<Real>& k, const Matrix<Real>& v,
                               const std::optional<Matrix<Real>>& mask, AttentionTape<Real>& tape);

/// Gradients of the loss with respect to one head's inputs.
template <class Real>
struct AttentionGrads {
  Matrix<Real> dq, dk, dv;  ///< shaped as q, k, v
};

/// Block A. From d_out = dL/d(output), (T, d_v): dv = probsᵀ d_out, d_probs = d_out vᵀ, d_scores
/// = softmax_backward(probs, d_probs), dq = d_scores k / sqrt(d_head), dk = d_scoresᵀ q /
/// sqrt(d_head). The mask is a constant: a removed score has probability 0 and so no gradient.
/// @throws std::invalid_argument if d_out is not (T, d_v) of the tape's forward.
template <class Real>
AttentionGrads<Real> attention_backward(const AttentionTape<Real>& tape, const Matrix<Real>& d_out);

// ---- Block B: multi-head attention -------------------------------------------------------------

/// The parameters of one multi-head attention layer: y = concat_h(head_h) W_O + b_O with
/// head_h = attention(x W_Q + b_Q, x W_K + b_K, x W_V + b_V) on column block h. Weights are
/// (d_model, d_model), biases (d_model); zero biases give lab 01's layer.
template <class Real>
struct MhaParams {
  Matrix<Real> w_q, w_k, w_v, w_o;
  Vector<Real> b_q, b_k, b_v, b_o;
  std::size_t n_heads = 1;
};

/// What mha_forward keeps for mha_backward.
template <class Real>
struct MhaTape {
  Matrix<Real> x;                          ///< the input, (T, d_model)
  std::vector<AttentionTape<Real>> heads;  ///< one per head, of that head's q, k, v
  Matrix<Real> merged;                     ///< the heads side by side, (T, d_model): W_O's input
};

/// Gradients of the loss with respect to a layer's input and every parameter; each is shaped as
/// what it is the gradient of.
template <class Real>
struct MhaGrads {
  Matrix<Real> dx;
  Matrix<Real> dw_q, dw_k, dw_v, dw_o;
  Vector<Real> db_q, db_k, db_v, db_o;
};

/// Block B. x: (T, d_model) -> (T, d_model), with the optional additive (T, T) mask shared by
/// every head; records on `tape`.
/// @throws std::invalid_argument if a weight is not (d_model, d_model), a bias not (d_model),
///         n_heads is 0 or does not divide d_model, x is not (·, d_model) or the mask not (T, T);
///         the message names the two shapes or numbers.
template <class Real>
Matrix<Real> mha_forward(const MhaParams<Real>& params, const Matrix<Real>& x,
                         const std::optional<Matrix<Real>>& mask, MhaTape<Real>& tape);

/// Block B. From d_out = dL/dy, (T, d_model): every gradient of MhaGrads, using only what the
/// tape holds (no forward is recomputed).
/// @throws std::invalid_argument if d_out is not shaped as the tape's x, or params are not the
///         forward's (another number of heads, or a W_O of another width than x).
template <class Real>
MhaGrads<Real> mha_backward(const MhaParams<Real>& params, const MhaTape<Real>& tape,
                            const Matrix<Real>& d_out);

// ---- Block C: LayerNorm and the residual block --------------------------------------------------

/// What layer_norm_forward keeps: the normalised rows and 1 / sqrt(var + eps) of each row.
template <class Real>
struct LayerNormTape {
  Matrix<Real> normalized;  ///< (T, d_model)
  Vector<Real> inv_std;     ///< (T)
};

/// Block C. Lab 04's layer_norm on one sequence (no gain or bias, biased variance):
/// (T, d_model) -> (T, d_model), recording on `tape`.
/// @throws std::invalid_argument if d_model is 0 or eps is not positive and finite.
template <class Real>
Matrix<Real> layer_norm_forward(const Matrix<Real>& x, LayerNormTape<Real>& tape,
                                Real eps = Real(1e-5));

/// Block C. dx = inv_std ⊙ (d_y − mean(d_y) − normalized ⊙ mean(d_y ⊙ normalized)), each mean
/// over the row. d_y: (T, d_model) -> (T, d_model).
/// @throws std::invalid_argument if d_y is not shaped as the tape's rows.
template <class Real>
Matrix<Real> layer_norm_backward(const LayerNormTape<Real>& tape, const Matrix<Real>& d_y);

/// What block_forward keeps.
template <class Real>
struct BlockTape {
  Norm norm = Norm::pre_ln;
  LayerNormTape<Real> ln;
  MhaTape<Real> mha;
};

/// Block C. Lab 04's attention block around mha_forward, on one sequence:
///   post-LN: layer_norm(x + mha(x));   pre-LN: x + mha(layer_norm(x)).
/// x: (T, d_model) -> (T, d_model); mask optional additive (T, T).
/// @throws std::invalid_argument as mha_forward.
template <class Real>
Matrix<Real> block_forward(const MhaParams<Real>& params, Norm norm, const Matrix<Real>& x,
                           const std::optional<Matrix<Real>>& mask, BlockTape<Real>& tape);

/// Block C. The gradients of the block's input and of its attention layer's parameters. The
/// residual path adds d_y (pre-LN) or the LayerNorm's input gradient (post-LN) to dx.
/// @throws std::invalid_argument if d_y is not shaped as the tape's x.
template <class Real>
MhaGrads<Real> block_backward(const MhaParams<Real>& params, const BlockTape<Real>& tape,
                              const Matrix<Real>& d_y);

// The explicit instantiations each implementation ends its file with, inside namespace minimodel:
// MINIMODEL_LAB09_INSTANTIATE(float) to train and match PyTorch, (double) for finite differences.
#define MINIMODEL_LAB09_INSTANTIATE(Real)                                                          \
  template Matrix<Real> softmax_backward(const Matrix<Real>&, const Matrix<Real>&);                \
  template Matrix<Real> attention_forward(const Matrix<Real>&, const Matrix<Real>&,                \
                                          const Matrix<Real>&, const std::optional<Matrix<Real>>&, \
                                          AttentionTape<Real>&);                                   \
  template AttentionGrads<Real> attention_backward(const AttentionTape<Real>&,                     \
                                                   const Matrix<Real>&);                           \
  template Matrix<Real> mha_forward(const MhaParams<Real>&, const Matrix<Real>&,                   \
                                    const std::optional<Matrix<Real>>&, MhaTape<Real>&);           \
  template MhaGrads<Real> mha_backward(const MhaParams<Real>&, const MhaTape<Real>&,               \
                                       const Matrix<Real>&);                                       \
  template Matrix<Real> layer_norm_forward(const Matrix<Real>&, LayerNormTape<Real>&, Real);       \
  template Matrix<Real> layer_norm_backward(const LayerNormTape<Real>&, const Matrix<Real>&);      \
  template Matrix<Real> block_forward(const MhaParams<Real>&, Norm, const Matrix<Real>&,           \
                                      const std::optional<Matrix<Real>>&, BlockTape<Real>&);       \
  template MhaGrads<Real> block_backward(const MhaParams<Real>&, const BlockTape<Real>&,           \
                                         const Matrix<Real>&);

}  // namespace minimodel
