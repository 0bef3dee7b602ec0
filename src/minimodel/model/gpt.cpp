// Lab 13: a GPT that writes. Block A: GELU, the MLP, the pre-LN block, the model and its loss.
// Read labs/13-gpt.md first. The API and its shapes are in include/minimodel/model/gpt.hpp and its
// BLUEPRINT.md. The templates are compiled for float and double by the two lines at the end: keep
// them. Blocks B and C are in gpt_training.cpp, Block D in gpt_sampling.cpp.
#include "minimodel/model/gpt.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

template <class Real>
Matrix<Real> gelu(const Matrix<Real>& x) {
  // TODO(lab 13, Block A): GPT-2's tanh GELU, element by element — see labs/13-gpt.md
  throw Todo("TODO(lab 13, Block A): GPT-2's tanh GELU, element by element — see labs/13-gpt.md");
}

template <class Real>
Matrix<Real> gelu_backward(const Matrix<Real>& x, const Matrix<Real>& d_y) {
  // TODO(lab 13, Block A): check the shapes, then d_y times gelu'(x), element by element — see
  // labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): check the shapes, then d_y times gelu'(x), element by element — see "
      "labs/13-gpt.md");
}

template <class Real>
const Matrix<Real>& mlp_forward(const GptMlp<Real>& mlp, const Matrix<Real>& x,
                                MlpTape<Real>& tape) {
  // TODO(lab 13, Block A): check the shapes, then x W_fc + b_fc, GELU, W_proj + b_proj, each
  // into the tape; return tape.out — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): check the shapes, then x W_fc + b_fc, GELU, W_proj + b_proj, each "
      "into the tape; return tape.out — see labs/13-gpt.md");
}

template <class Real>
const Matrix<Real>& mlp_backward(const GptMlp<Real>& mlp, MlpTape<Real>& tape,
                                 const Matrix<Real>& d_out, GptMlp<Real>& grads) {
  // TODO(lab 13, Block A): the two linear layers' gradients and GELU's between them; return
  // tape.dx — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): the two linear layers' gradients and GELU's between them; return "
      "tape.dx — see labs/13-gpt.md");
}

template <class Real>
const Matrix<Real>& gpt_block_forward(const GptLayer<Real>& layer, std::size_t n_heads,
                                      std::size_t batch, const Matrix<Real>& x,
                                      GptBlockTape<Real>& tape) {
  // TODO(lab 13, Block A): ln_1, causal attention per sequence and head, the residual, ln_2,
  // the MLP, the residual, each into the tape; return tape.out — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): ln_1, causal attention per sequence and head, the residual, ln_2, "
      "the MLP, the residual, each into the tape; return tape.out — see labs/13-gpt.md");
}

template <class Real>
const Matrix<Real>& gpt_block_backward(const GptLayer<Real>& layer, std::size_t n_heads,
                                       GptBlockTape<Real>& tape, const Matrix<Real>& d_out,
                                       GptLayer<Real>& grads) {
  // TODO(lab 13, Block A): the block's forward in reverse: the MLP, ln_2, the residual, W_O,
  // attention, W_Q, W_K, W_V, ln_1, the residual; return tape.dx — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): the block's forward in reverse: the MLP, ln_2, the residual, W_O, "
      "attention, W_Q, W_K, W_V, ln_1, the residual; return tape.dx — see labs/13-gpt.md");
}

GptParams<float> init_gpt(const GptConfig& config, std::uint64_t seed) {
  // TODO(lab 13, Block A): zero_gpt, gains 1, then draw wte, wpe and every weight matrix in
  // parameter_tensors' order, 0.02 and 0.02 / sqrt(2 n_layers) for the residual projections —
  // see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): zero_gpt, gains 1, then draw wte, wpe and every weight matrix in "
      "parameter_tensors' order, 0.02 and 0.02 / sqrt(2 n_layers) for the residual projections — "
      "see labs/13-gpt.md");
}

template <class Real>
const xt::xtensor<Real, 3>& gpt_forward(const GptParams<Real>& params, const BatchTokens& tokens,
                                        GptTape<Real>& tape) {
  // TODO(lab 13, Block A): check the tokens and parameters, embed and add positions, run the
  // blocks, ln_f and the tied unembedding; return tape.logits — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): check the tokens and parameters, embed and add positions, run the "
      "blocks, ln_f and the tied unembedding; return tape.logits — see labs/13-gpt.md");
}

template <class Real>
Real cross_entropy(const xt::xtensor<Real, 3>& logits, const BatchTokens& targets,
                   xt::xtensor<Real, 3>& d_logits) {
  // TODO(lab 13, Block A): the mean of −log softmax at each target, stably, and its gradient
  // (softmax − one_hot) / (B·T) — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): the mean of −log softmax at each target, stably, and its gradient "
      "(softmax − one_hot) / (B·T) — see labs/13-gpt.md");
}

template <class Real>
void gpt_backward(const GptParams<Real>& params, GptTape<Real>& tape,
                  const xt::xtensor<Real, 3>& d_logits, GptParams<Real>& grads) {
  // TODO(lab 13, Block A): the unembedding, ln_f, the blocks in reverse, then scatter-add into
  // wte and wpe; wte's gradient is the sum of both uses — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block A): the unembedding, ln_f, the blocks in reverse, then scatter-add into "
      "wte and wpe; wte's gradient is the sum of both uses — see labs/13-gpt.md");
}

MINIMODEL_LAB13_INSTANTIATE(float)
MINIMODEL_LAB13_INSTANTIATE(double)

}  // namespace minimodel
