// Lab 10: a tiny attention-only transformer, trained by hand.
// Read labs/10-induction-heads.md first. The API and its shapes are in tiny_transformer.hpp. The
// model and its backward are templates over Real; the two lines at the end compile them for float
// and double: keep them.
#include "minimodel/model/tiny_transformer.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: the model and its loss -----------------------------------------------------------

// -> embedding (V, d_model), positions (max_len, d_model), n_layers × 4 (d_model, d_model),
//    unembedding (d_model, V)
ModelParams<float> init_model(const ModelConfig& config, std::uint64_t seed) {
  // TODO(lab 10, Block A): check the sizes, then draw every tensor in tensors_of's order from one
  // generator, scaling the weights and the unembedding by 1 / sqrt(d_model) — see
  // labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block A): check the sizes, then draw every tensor in tensors_of's order from "
      "one generator, scaling the weights and the unembedding by 1 / sqrt(d_model) — see "
      "labs/10-induction-heads.md");
}

// batch: B sequences of T tokens -> logits (B, T, V); tape: the tokens, each block's and the final
// LayerNorm's tapes
template <class Real>
xt::xtensor<Real, 3> model_forward(const ModelParams<Real>& params, std::size_t n_heads,
                                   const TokenBatch& batch, ModelTape<Real>& tape) {
  // TODO(lab 10, Block A): check the parameters and the batch, then per sequence: embed and add
  // positions, run the pre-LN blocks with a causal mask, the final LayerNorm and the unembedding —
  // see labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block A): check the parameters and the batch, then per sequence: embed and "
      "add positions, run the pre-LN blocks with a causal mask, the final LayerNorm and the "
      "unembedding — see labs/10-induction-heads.md");
}

// logits (B, T, V) -> losses (B, T − 1); d_logits (B, T, V)
template <class Real>
Matrix<Real> next_token_loss(const xt::xtensor<Real, 3>& logits, const TokenBatch& batch,
                             xt::xtensor<Real, 3>& d_logits) {
  // TODO(lab 10, Block A): −log softmax at each next token, stably, and the gradient of the mean
  // (softmax − one_hot) / (B · (T − 1)) — see labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block A): −log softmax at each next token, stably, and the gradient of the "
      "mean (softmax − one_hot) / (B · (T − 1)) — see labs/10-induction-heads.md");
}

// ---- Block B: the model's backward --------------------------------------------------------------

// d_logits (B, T, V) -> the gradient of every parameter, summed over the batch
template <class Real>
ModelParams<Real> model_backward(const ModelParams<Real>& params, std::size_t n_heads,
                                 const ModelTape<Real>& tape,
                                 const xt::xtensor<Real, 3>& d_logits) {
  // TODO(lab 10, Block B): the unembedding, the final LayerNorm, the blocks in reverse with lab
  // 09's block_backward, then scatter each position's gradient into its token's and its
  // position's rows — see labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block B): the unembedding, the final LayerNorm, the blocks in reverse with lab "
      "09's block_backward, then scatter each position's gradient into its token's and its "
      "position's rows — see labs/10-induction-heads.md");
}

// ---- Block C: Adam and a training step ----------------------------------------------------------

void adam_update(Matrix<float>& param, const Matrix<float>& grad, Matrix<float>& m,
                 Matrix<float>& v, std::size_t t, const AdamOptions& options) {
  // TODO(lab 10, Block C): check the shapes and t, update both moments, then the parameter with
  // the bias-corrected moments — see labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block C): check the shapes and t, update both moments, then the parameter with "
      "the bias-corrected moments — see labs/10-induction-heads.md");
}

Adam::Adam(const ModelParams<float>& params, AdamOptions options) : options_(options) {
  // TODO(lab 10, Block C): zero moments m_ and v_ shaped as params — see
  // labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block C): zero moments m_ and v_ shaped as params — see "
      "labs/10-induction-heads.md");
}

void Adam::step(ModelParams<float>& params, const ModelParams<float>& grads) {
  // TODO(lab 10, Block C): check every tensor's shape, then count the step and adam_update every
  // tensor with its gradient and moments — see labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block C): check every tensor's shape, then count the step and adam_update "
      "every "
      "tensor with its gradient and moments — see labs/10-induction-heads.md");
}

Matrix<float> train_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                         const TokenBatch& batch) {
  // TODO(lab 10, Block C): forward, loss, backward, one Adam step; return the losses — see
  // labs/10-induction-heads.md
  throw Todo(
      "TODO(lab 10, Block C): forward, loss, backward, one Adam step; return the losses — see "
      "labs/10-induction-heads.md");
}

MINIMODEL_LAB10_INSTANTIATE(float)
MINIMODEL_LAB10_INSTANTIATE(double)

}  // namespace minimodel
