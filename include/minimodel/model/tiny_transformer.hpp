#pragma once
// The API of lab 10: a tiny attention-only transformer, trained by hand on sequences that end with
// a segment repeated once, until an induction head appears. Token embedding plus a learned position
// table, n_layers pre-LN attention blocks (lab 09's block_forward with lab 01's bias-free layer),
// a final LayerNorm, and an unembedding; next-token cross-entropy; Adam. Locked by the "Lab 10"
// section of BLUEPRINT.md beside lab 09's header.
//
// Shape names: B sequences in a batch, T tokens in each, V the vocabulary, d_model the width.
// Model and gradients are templates over Real (float to train, double for finite differences);
// the optimiser and training work in float.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "minimodel/attention/backward.hpp"

namespace minimodel {

/// The model's sizes. Token ids are 0 … vocab − 1; a sequence holds at most max_len tokens.
struct ModelConfig {
  std::size_t vocab = 16;
  std::size_t max_len = 32;
  std::size_t d_model = 64;
  std::size_t n_heads = 4;
  std::size_t n_layers = 2;
};

/// One attention layer's weights, each (d_model, d_model), as lab 01's layer: no biases.
template <class Real>
struct AttentionWeights {
  Matrix<Real> w_q, w_k, w_v, w_o;
};

/// Every parameter of the model. The same struct holds their gradients, each shaped as its
/// parameter.
template <class Real>
struct ModelParams {
  Matrix<Real> embedding;                      ///< (V, d_model): row t is token t's vector
  Matrix<Real> positions;                      ///< (max_len, d_model): row p is added at position p
  std::vector<AttentionWeights<Real>> layers;  ///< n_layers
  Matrix<Real> unembedding;                    ///< (d_model, V)
};

/// Pointers to every tensor of `params` (const pointers for const params), in the order
/// embedding, positions, each layer's W_Q, W_K, W_V, W_O, unembedding: the order of the seeded
/// draws, of the optimiser and of a checkpoint.
template <class Params>  // ModelParams<Real>, const or not
auto tensors_of(Params& params) {
  std::vector<decltype(&params.embedding)> all = {&params.embedding, &params.positions};
  for (auto& layer : params.layers)
    all.insert(all.end(), {&layer.w_q, &layer.w_k, &layer.w_v, &layer.w_o});
  all.push_back(&params.unembedding);
  return all;
}

/// A batch of token sequences, all of one length.
using TokenBatch = std::vector<std::vector<std::size_t>>;

/// A batch of the copying task: each sequence ends with a segment of `segment[b]` tokens repeated
/// once, so its second copy starts at T − segment[b].
struct CopyBatch {
  TokenBatch tokens;
  std::vector<std::size_t> segment;
};

/// The task: `batch` sequences of `length` tokens, each random tokens followed by a random segment
/// of n tokens and then the same n tokens again, with n drawn per sequence from length / 4 …
/// length / 2. Only copying predicts the second copy, and since the distance to the first copy
/// varies, only matching content finds it: position alone cannot (an induction head can).
inline CopyBatch copy_task(std::size_t batch, std::size_t length, std::size_t vocab,
                           std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> token(0, vocab - 1), segment(length / 4, length / 2);
  CopyBatch copies{TokenBatch(batch, std::vector<std::size_t>(length)), {}};
  for (std::vector<std::size_t>& sequence : copies.tokens) {
    const std::size_t n = segment(rng), second = length - n;
    for (std::size_t t = 0; t < second; ++t) sequence[t] = token(rng);
    for (std::size_t t = second; t < length; ++t) sequence[t] = sequence[t - n];
    copies.segment.push_back(n);
  }
  return copies;
}

// ---- Block A: the model and its loss -----------------------------------------------------------

/// Block A. Draws every tensor from N(0, 1) with one std::mt19937_64(seed), in tensors_of's order,
/// row-major: the embedding and the position table as drawn, each W and the unembedding times
/// 1 / sqrt(d_model).
/// @throws std::invalid_argument if a size is 0 or n_heads does not divide d_model.
ModelParams<float> init_model(const ModelConfig& config, std::uint64_t seed);

/// What model_forward keeps for model_backward: per sequence, the tokens, each block's tape and the
/// final LayerNorm's.
template <class Real>
struct ModelTape {
  TokenBatch batch;
  std::vector<std::vector<BlockTape<Real>>> blocks;  ///< [b][layer]
  std::vector<LayerNormTape<Real>> final_norm;       ///< [b]
};

/// Block A. Logits (B, T, V) for every position of every sequence: x = embedding[token] +
/// positions[t]; each layer x = x + mha(layer_norm(x)) with a causal mask (lab 09's pre-LN
/// block_forward, zero biases); then layer_norm(x) @ unembedding. Records on `tape`.
/// @throws std::invalid_argument if the batch is empty, its sequences differ in length or are
///         longer than max_len (or empty), a token is >= V, or the parameters' shapes disagree.
template <class Real>
xt::xtensor<Real, 3> model_forward(const ModelParams<Real>& params, std::size_t n_heads,
                                   const TokenBatch& batch, ModelTape<Real>& tape);

/// Block A. Next-token cross-entropy: the logits at position t predict token t + 1. Returns the
/// (B, T − 1) losses −log softmax(logits[b, t])[batch[b][t + 1]], and sets d_logits (B, T, V) to
/// the gradient of their mean: (softmax − one_hot) / (B · (T − 1)), zero at the last position.
/// @throws std::invalid_argument if logits are not (B, T, ·) of the batch, T < 2, or a token is
///         >= V.
template <class Real>
Matrix<Real> next_token_loss(const xt::xtensor<Real, 3>& logits, const TokenBatch& batch,
                             xt::xtensor<Real, 3>& d_logits);

// ---- Block B: the model's backward --------------------------------------------------------------

/// Block B. The gradient of every parameter, summed over the batch, from d_logits (B, T, V): the
/// unembedding, the final LayerNorm, the blocks in reverse (lab 09's block_backward), then each
/// position's input gradient added to its token's embedding row and to its position's row.
/// @throws std::invalid_argument if d_logits is not shaped as the tape's forward's logits, or
///         params have another number of layers than the tape.
template <class Real>
ModelParams<Real> model_backward(const ModelParams<Real>& params, std::size_t n_heads,
                                 const ModelTape<Real>& tape, const xt::xtensor<Real, 3>& d_logits);

// ---- Block C: Adam and a training step ----------------------------------------------------------

/// Adam's settings (Kingma and Ba 2015).
struct AdamOptions {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

/// Block C. One Adam update of one tensor, step t = 1, 2, …:
///   m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
///   param −= lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + eps).
/// @throws std::invalid_argument if grad, m or v is not shaped as param, or t is 0.
void adam_update(Matrix<float>& param, const Matrix<float>& grad, Matrix<float>& m,
                 Matrix<float>& v, std::size_t t, const AdamOptions& options);

/// Block C. Adam over every tensor of a model, keeping the two moments of each.
class Adam {
 public:
  /// Zero moments shaped as `params`' tensors.
  Adam(const ModelParams<float>& params, AdamOptions options);

  /// One step: adam_update on every tensor of `params` with its gradient in `grads`.
  /// @throws std::invalid_argument if params or grads are not shaped as the parameters given to
  ///         the constructor; nothing is updated then.
  void step(ModelParams<float>& params, const ModelParams<float>& grads);

  std::size_t steps() const { return steps_; }
  const AdamOptions& options() const { return options_; }

 private:
  AdamOptions options_;
  ModelParams<float> m_, v_;
  std::size_t steps_ = 0;
};

/// Block C. One training step: model_forward, next_token_loss, model_backward, adam.step. Returns
/// the (B, T − 1) losses of this batch, before the update.
Matrix<float> train_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                         const TokenBatch& batch);

// The explicit instantiations each implementation ends its file with, inside namespace minimodel.
#define MINIMODEL_LAB10_INSTANTIATE(Real)                                               \
  template xt::xtensor<Real, 3> model_forward(const ModelParams<Real>&, std::size_t,    \
                                              const TokenBatch&, ModelTape<Real>&);     \
  template Matrix<Real> next_token_loss(const xt::xtensor<Real, 3>&, const TokenBatch&, \
                                        xt::xtensor<Real, 3>&);                         \
  template ModelParams<Real> model_backward(const ModelParams<Real>&, std::size_t,      \
                                            const ModelTape<Real>&, const xt::xtensor<Real, 3>&);

}  // namespace minimodel
