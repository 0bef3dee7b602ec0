// Lab 10: a tiny attention-only transformer, trained by hand. Reference solution.
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

namespace minimodel {

namespace {

// Lab 09's layer with this model's weights and no biases.
template <class Real>
MhaParams<Real> bias_free(const AttentionWeights<Real>& w, std::size_t n_heads) {
  const Vector<Real> zero = xt::zeros<Real>({w.w_q.shape(0)});
  return {w.w_q, w.w_k, w.w_v, w.w_o, zero, zero, zero, zero, n_heads};
}

// Every sequence of one length, every token below vocab.
void check_batch(const char* where, const TokenBatch& batch, std::size_t vocab) {
  if (batch.empty() || batch[0].empty())
    throw std::invalid_argument(std::string(where) + ": the batch is empty");
  for (std::size_t b = 0; b < batch.size(); ++b) {
    if (batch[b].size() != batch[0].size())
      throw std::invalid_argument(std::string(where) + ": sequence " + std::to_string(b) + " has " +
                                  std::to_string(batch[b].size()) + " tokens but sequence 0 has " +
                                  std::to_string(batch[0].size()) + "; they must have one length");
    for (const std::size_t token : batch[b])
      if (token >= vocab)
        throw std::invalid_argument(std::string(where) + ": token " + std::to_string(token) +
                                    " in sequence " + std::to_string(b) +
                                    " but the vocabulary has " + std::to_string(vocab));
  }
}

}  // namespace

// ---- Block A: the model and its loss -----------------------------------------------------------

ModelParams<float> init_model(const ModelConfig& config, std::uint64_t seed) {
  if (config.vocab == 0 || config.max_len == 0 || config.d_model == 0 || config.n_layers == 0)
    throw std::invalid_argument("init_model: vocab " + std::to_string(config.vocab) + ", max_len " +
                                std::to_string(config.max_len) + ", d_model " +
                                std::to_string(config.d_model) + " and n_layers " +
                                std::to_string(config.n_layers) + " must all be positive");
  if (config.n_heads == 0 || config.d_model % config.n_heads != 0)
    throw std::invalid_argument("init_model: n_heads " + std::to_string(config.n_heads) +
                                " does not divide d_model " + std::to_string(config.d_model));
  const std::size_t d = config.d_model;
  ModelParams<float> params;
  params.embedding = Matrix<float>({config.vocab, d});
  params.positions = Matrix<float>({config.max_len, d});
  params.layers.resize(config.n_layers);
  for (AttentionWeights<float>& layer : params.layers)
    layer.w_q = layer.w_k = layer.w_v = layer.w_o = Matrix<float>({d, d});
  params.unembedding = Matrix<float>({d, config.vocab});

  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(float(d));
  for (Matrix<float>* tensor : tensors_of(params)) {
    const bool table = tensor == &params.embedding || tensor == &params.positions;
    for (float& value : *tensor) value = table ? normal(rng) : normal(rng) * scale;
  }
  return params;
}

template <class Real>
xt::xtensor<Real, 3> model_forward(const ModelParams<Real>& params, std::size_t n_heads,
                                   const TokenBatch& batch, ModelTape<Real>& tape) {
  const std::size_t vocab = params.embedding.shape(0), d = params.embedding.shape(1);
  if (params.positions.shape(1) != d || params.unembedding.shape(0) != d ||
      params.unembedding.shape(1) != vocab)
    throw std::invalid_argument("model_forward: the embedding is " + shape_of(params.embedding) +
                                ", the position table " + shape_of(params.positions) +
                                " and the unembedding " + shape_of(params.unembedding) +
                                "; they must be (V, d_model), (max_len, d_model), (d_model, V)");
  for (const AttentionWeights<Real>& w : params.layers)
    for (const Matrix<Real>* weight : {&w.w_q, &w.w_k, &w.w_v, &w.w_o})
      if (weight->shape(0) != d || weight->shape(1) != d)
        throw std::invalid_argument("model_forward: a layer's weight is " + shape_of(*weight) +
                                    " but the embedding is " + shape_of(params.embedding) +
                                    "; each must be (d_model, d_model)");
  if (n_heads == 0 || d % n_heads != 0)
    throw std::invalid_argument("model_forward: n_heads " + std::to_string(n_heads) +
                                " does not divide d_model " + std::to_string(d));
  check_batch("model_forward", batch, vocab);
  const std::size_t B = batch.size(), T = batch[0].size();
  if (T > params.positions.shape(0))
    throw std::invalid_argument("model_forward: the sequences have " + std::to_string(T) +
                                " tokens but the position table is " + shape_of(params.positions) +
                                ": at most max_len tokens");
  std::vector<MhaParams<Real>> layers;
  for (const AttentionWeights<Real>& w : params.layers) layers.push_back(bias_free(w, n_heads));
  const std::optional<Matrix<Real>> mask = Matrix<Real>(xt::cast<Real>(causal_mask(T)));

  tape.batch = batch;
  tape.blocks.assign(B, std::vector<BlockTape<Real>>(layers.size()));
  tape.final_norm.assign(B, {});
  xt::xtensor<Real, 3> logits({B, T, vocab});
  for (std::size_t b = 0; b < B; ++b) {
    Matrix<Real> x({T, d});
    for (std::size_t t = 0; t < T; ++t)
      xt::view(x, t) = xt::view(params.embedding, batch[b][t]) + xt::view(params.positions, t);
    for (std::size_t l = 0; l < layers.size(); ++l)
      x = block_forward(layers[l], Norm::pre_ln, x, mask, tape.blocks[b][l]);
    xt::view(logits, b) =
        xt::linalg::dot(layer_norm_forward(x, tape.final_norm[b]), params.unembedding);
  }
  return logits;
}

template <class Real>
Matrix<Real> next_token_loss(const xt::xtensor<Real, 3>& logits, const TokenBatch& batch,
                             xt::xtensor<Real, 3>& d_logits) {
  if (batch.empty() || logits.shape(0) != batch.size() || logits.shape(1) != batch[0].size())
    throw std::invalid_argument("next_token_loss: logits are " + shape_of(logits) +
                                " but the batch is " + std::to_string(batch.size()) +
                                " sequences of " +
                                std::to_string(batch.empty() ? 0 : batch[0].size()) + " tokens");
  const std::size_t B = logits.shape(0), T = logits.shape(1), vocab = logits.shape(2);
  if (T < 2)
    throw std::invalid_argument("next_token_loss: logits are " + shape_of(logits) +
                                "; a sequence needs 2 tokens for one prediction");
  check_batch("next_token_loss", batch, vocab);
  Matrix<Real> losses({B, T - 1});
  d_logits = xt::zeros<Real>(logits.shape());
  const Real count = Real(B * (T - 1));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t + 1 < T; ++t) {
      const auto row = xt::view(logits, b, t);
      const Real top = xt::amax(row)();
      const Vector<Real> exps = xt::exp(row - top);
      const Real sum = xt::sum(exps)();
      const std::size_t target = batch[b][t + 1];
      // −log softmax = log Σ exp(l − max) − (l_target − max), without forming the probabilities.
      losses(b, t) = std::log(sum) - (logits(b, t, target) - top);
      xt::view(d_logits, b, t) = exps / (sum * count);
      d_logits(b, t, target) -= Real(1) / count;
    }
  return losses;
}

// ---- Block B: the model's backward --------------------------------------------------------------

template <class Real>
ModelParams<Real> model_backward(const ModelParams<Real>& params, std::size_t n_heads,
                                 const ModelTape<Real>& tape,
                                 const xt::xtensor<Real, 3>& d_logits) {
  const std::size_t B = tape.batch.size(), T = B ? tape.batch[0].size() : 0;
  const std::size_t vocab = params.embedding.shape(0);
  if (d_logits.shape(0) != B || d_logits.shape(1) != T || d_logits.shape(2) != vocab)
    throw std::invalid_argument("model_backward: d_logits is " + shape_of(d_logits) +
                                " but the forward's logits were (" + std::to_string(B) + ", " +
                                std::to_string(T) + ", " + std::to_string(vocab) + ")");
  if (B > 0 && tape.blocks[0].size() != params.layers.size())
    throw std::invalid_argument("model_backward: params have " +
                                std::to_string(params.layers.size()) + " layers but the tape " +
                                std::to_string(tape.blocks[0].size()) +
                                "; pass the forward's parameters");
  std::vector<MhaParams<Real>> layers;
  for (const AttentionWeights<Real>& w : params.layers) layers.push_back(bias_free(w, n_heads));

  ModelParams<Real> grads;
  grads.embedding = xt::zeros_like(params.embedding);
  grads.positions = xt::zeros_like(params.positions);
  grads.unembedding = xt::zeros_like(params.unembedding);
  for (const AttentionWeights<Real>& w : params.layers)
    grads.layers.push_back({xt::zeros_like(w.w_q), xt::zeros_like(w.w_k), xt::zeros_like(w.w_v),
                            xt::zeros_like(w.w_o)});
  const Matrix<Real> unembedding_t = xt::transpose(params.unembedding);
  for (std::size_t b = 0; b < B; ++b) {
    const Matrix<Real> d_out = xt::view(d_logits, b);
    const Matrix<Real>& normalized = tape.final_norm[b].normalized;
    grads.unembedding += xt::linalg::dot(xt::transpose(normalized), d_out);
    const Matrix<Real> d_normalized = xt::linalg::dot(d_out, unembedding_t);
    Matrix<Real> dx = layer_norm_backward(tape.final_norm[b], d_normalized);
    for (std::size_t l = layers.size(); l-- > 0;) {
      MhaGrads<Real> g = block_backward(layers[l], tape.blocks[b][l], dx);
      grads.layers[l].w_q += g.dw_q;
      grads.layers[l].w_k += g.dw_k;
      grads.layers[l].w_v += g.dw_v;
      grads.layers[l].w_o += g.dw_o;
      dx = std::move(g.dx);
    }
    // Each input row was a sum of one embedding row and one position row: both receive it.
    for (std::size_t t = 0; t < T; ++t) {
      xt::view(grads.embedding, tape.batch[b][t]) += xt::view(dx, t);
      xt::view(grads.positions, t) += xt::view(dx, t);
    }
  }
  return grads;
}

// ---- Block C: Adam and a training step ----------------------------------------------------------

void adam_update(Matrix<float>& param, const Matrix<float>& grad, Matrix<float>& m,
                 Matrix<float>& v, std::size_t t, const AdamOptions& options) {
  if (grad.shape() != param.shape() || m.shape() != param.shape() || v.shape() != param.shape())
    throw std::invalid_argument("adam_update: param is " + shape_of(param) + " but grad is " +
                                shape_of(grad) + ", m " + shape_of(m) + " and v " + shape_of(v));
  if (t == 0) throw std::invalid_argument("adam_update: steps count from 1, t is 0");
  const float correction1 = 1.0f - std::pow(options.beta1, float(t));
  const float correction2 = 1.0f - std::pow(options.beta2, float(t));
  // One pass over the elements: no temporaries, since a training run calls this thousands of times.
  for (std::size_t i = 0; i < param.size(); ++i) {
    const float g = grad.flat(i);
    m.flat(i) = options.beta1 * m.flat(i) + (1.0f - options.beta1) * g;
    v.flat(i) = options.beta2 * v.flat(i) + (1.0f - options.beta2) * g * g;
    param.flat(i) -= options.learning_rate * (m.flat(i) / correction1) /
                     (std::sqrt(v.flat(i) / correction2) + options.eps);
  }
}

Adam::Adam(const ModelParams<float>& params, AdamOptions options)
    : options_(options), m_(params), v_(params) {
  for (Matrix<float>* tensor : tensors_of(m_)) tensor->fill(0.0f);
  for (Matrix<float>* tensor : tensors_of(v_)) tensor->fill(0.0f);
}

void Adam::step(ModelParams<float>& params, const ModelParams<float>& grads) {
  const std::vector<Matrix<float>*> p = tensors_of(params), m = tensors_of(m_), v = tensors_of(v_);
  const std::vector<const Matrix<float>*> g = tensors_of(grads);
  if (g.size() != m.size() || p.size() != m.size())
    throw std::invalid_argument("Adam::step: the gradients hold " + std::to_string(g.size()) +
                                " tensors and the parameters " + std::to_string(p.size()) +
                                " but the optimiser was made for " + std::to_string(m.size()));
  // Every shape first, so that a bad gradient leaves every parameter and the count as they were.
  for (std::size_t i = 0; i < m.size(); ++i)
    if (g[i]->shape() != m[i]->shape() || p[i]->shape() != m[i]->shape())
      throw std::invalid_argument("Adam::step: tensor " + std::to_string(i) + " is " +
                                  shape_of(*p[i]) + " with a gradient " + shape_of(*g[i]) +
                                  " but the optimiser was made for " + shape_of(*m[i]));
  ++steps_;
  for (std::size_t i = 0; i < m.size(); ++i)
    adam_update(*p[i], *g[i], *m[i], *v[i], steps_, options_);
}

Matrix<float> train_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                         const TokenBatch& batch) {
  ModelTape<float> tape;
  const xt::xtensor<float, 3> logits = model_forward(params, n_heads, batch, tape);
  xt::xtensor<float, 3> d_logits;
  Matrix<float> losses = next_token_loss(logits, batch, d_logits);
  adam.step(params, model_backward(params, n_heads, tape, d_logits));
  return losses;
}

MINIMODEL_LAB10_INSTANTIATE(float)
MINIMODEL_LAB10_INSTANTIATE(double)

}  // namespace minimodel
