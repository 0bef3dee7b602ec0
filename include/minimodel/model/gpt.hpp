#pragma once
// The API of lab 13: a GPT that writes. GPT-2's architecture, small: a token embedding tied to the
// unembedding, learned positions, n_layers pre-LN blocks of causal multi-head attention (lab 09's,
// with biases) and an MLP (Linear -> GELU -> Linear), a final LayerNorm. Trained with AdamW, a
// warm-up + cosine schedule and global-norm clipping on random windows of lab 12's tokens, and
// sampled token by token through a KV cache. Locked by the "Lab 13" section of BLUEPRINT.md beside
// this file.
//
// Shape names: B sequences in a batch, T tokens in each, N = B·T rows, V the vocabulary, d_model
// the width (d for short), H heads of width d_head = d / H. Activations are (N, ·) matrices whose
// row b·T + t is token t of sequence b, so that every linear layer is one matrix product over the
// whole batch. Forward and backward write into a tape the caller keeps (GptTape): after the first
// step nothing is allocated. Model, loss and gradients are templates over Real (float to train,
// double for finite differences); the optimiser, training and sampling work in float.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "minimodel/attention/backward.hpp"  // Matrix<Real>, Vector<Real>
#include "minimodel/tokenizer/bpe.hpp"       // TokenId

namespace minimodel {

// ---- The model's parameters ---------------------------------------------------------------------

/// The model's sizes. Token ids are 0 … vocab − 1; a sequence holds at most max_len tokens (the
/// context). The defaults are the lab's default model.
struct GptConfig {
  std::size_t vocab = 2048;
  std::size_t max_len = 128;
  std::size_t d_model = 128;
  std::size_t n_heads = 4;
  std::size_t n_layers = 4;
};

/// One layer's causal self-attention, lab 09's MhaParams without n_heads: y = concat_h(head_h) W_O
/// + b_O, head_h on column block h of x W_Q + b_Q, x W_K + b_K, x W_V + b_V.
template <class Real>
struct GptAttention {
  Matrix<Real> w_q, w_k, w_v, w_o;  ///< (d, d) each, applied as x @ W
  Vector<Real> b_q, b_k, b_v, b_o;  ///< (d) each
};

/// One layer's MLP: y = gelu(x W_fc + b_fc) W_proj + b_proj.
template <class Real>
struct GptMlp {
  Matrix<Real> w_fc;    ///< (d, 4d)
  Vector<Real> b_fc;    ///< (4d)
  Matrix<Real> w_proj;  ///< (4d, d)
  Vector<Real> b_proj;  ///< (d)
};

/// One pre-LN block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)). LayerNorm(x) = gain ⊙ x̂ + bias.
template <class Real>
struct GptLayer {
  Vector<Real> ln_1_gain, ln_1_bias;  ///< (d) each
  GptAttention<Real> attn;
  Vector<Real> ln_2_gain, ln_2_bias;  ///< (d) each
  GptMlp<Real> mlp;
};

/// Every parameter of the model. The same struct holds their gradients, each shaped as its
/// parameter; `config` says the sizes (and n_heads, which no tensor shows).
template <class Real>
struct GptParams {
  GptConfig config;
  Matrix<Real> wte;                    ///< (V, d): row t is token t's vector, and the unembedding
  Matrix<Real> wpe;                    ///< (max_len, d): row p is added at position p
  std::vector<GptLayer<Real>> layers;  ///< n_layers
  Vector<Real> ln_f_gain, ln_f_bias;   ///< (d) each
};

/// Zero tensors of every shape `config` gives: the container init_gpt fills, and gradients'.
/// @throws std::invalid_argument if a size is 0 or n_heads does not divide d_model.
template <class Real>
GptParams<Real> zero_gpt(const GptConfig& config) {
  if (config.vocab == 0 || config.max_len == 0 || config.d_model == 0 || config.n_layers == 0 ||
      config.n_heads == 0)
    throw std::invalid_argument("GptConfig: vocab " + std::to_string(config.vocab) + ", max_len " +
                                std::to_string(config.max_len) + ", d_model " +
                                std::to_string(config.d_model) + ", n_heads " +
                                std::to_string(config.n_heads) + " and n_layers " +
                                std::to_string(config.n_layers) + " must all be positive");
  if (config.d_model % config.n_heads != 0)
    throw std::invalid_argument("GptConfig: n_heads " + std::to_string(config.n_heads) +
                                " does not divide d_model " + std::to_string(config.d_model));
  const std::size_t d = config.d_model;
  const auto matrix = [](std::size_t rows, std::size_t cols) {
    return Matrix<Real>(xt::zeros<Real>({rows, cols}));
  };
  const auto vector = [](std::size_t n) { return Vector<Real>(xt::zeros<Real>({n})); };
  GptParams<Real> params;
  params.config = config;
  params.wte = matrix(config.vocab, d);
  params.wpe = matrix(config.max_len, d);
  params.layers.resize(config.n_layers);
  for (GptLayer<Real>& layer : params.layers) {
    layer.ln_1_gain = layer.ln_1_bias = layer.ln_2_gain = layer.ln_2_bias = vector(d);
    layer.attn.w_q = layer.attn.w_k = layer.attn.w_v = layer.attn.w_o = matrix(d, d);
    layer.attn.b_q = layer.attn.b_k = layer.attn.b_v = layer.attn.b_o = vector(d);
    layer.mlp.w_fc = matrix(d, 4 * d);
    layer.mlp.b_fc = vector(4 * d);
    layer.mlp.w_proj = matrix(4 * d, d);
    layer.mlp.b_proj = vector(d);
  }
  params.ln_f_gain = params.ln_f_bias = vector(d);
  return params;
}

/// One parameter tensor seen flat: its name (a checkpoint's file name without .npy), its elements
/// (row-major), its shape, and whether AdamW decays it. T is Real or const Real.
template <class T>
struct ParamTensor {
  std::string name;
  T* data = nullptr;
  std::vector<std::size_t> shape;
  bool decay = false;  ///< true for the weight matrices of attention and MLP only
  std::size_t size() const {
    std::size_t n = 1;
    for (const std::size_t s : shape) n *= s;
    return n;
  }
};

/// Every tensor of `params` (const for const params), in the order wte, wpe, then per layer l
/// "h{l}.ln_1.gain", "h{l}.ln_1.bias", "h{l}.attn.w_q", "h{l}.attn.b_q", "h{l}.attn.w_k",
/// "h{l}.attn.b_k", "h{l}.attn.w_v", "h{l}.attn.b_v", "h{l}.attn.w_o", "h{l}.attn.b_o",
/// "h{l}.ln_2.gain", "h{l}.ln_2.bias", "h{l}.mlp.w_fc", "h{l}.mlp.b_fc", "h{l}.mlp.w_proj",
/// "h{l}.mlp.b_proj", then "ln_f.gain", "ln_f.bias": 4 + 16·n_layers tensors. The order of
/// init_gpt's draws, of AdamW's moments, of clipping and of a checkpoint's files. decay is true
/// for w_q, w_k, w_v, w_o, w_fc and w_proj, false for biases, LayerNorms and both embeddings.
template <class Params>  // GptParams<Real>, const or not
auto parameter_tensors(Params& params) {
  using Real = std::remove_reference_t<decltype(*params.wte.data())>;  // const for const params
  std::vector<ParamTensor<Real>> all;
  const auto add = [&all](std::string name, auto& tensor, bool decay) {
    all.push_back({std::move(name), tensor.data(),
                   std::vector<std::size_t>(tensor.shape().begin(), tensor.shape().end()), decay});
  };
  add("wte", params.wte, false);
  add("wpe", params.wpe, false);
  for (std::size_t l = 0; l < params.layers.size(); ++l) {
    auto& layer = params.layers[l];
    const std::string h = "h" + std::to_string(l) + ".";
    add(h + "ln_1.gain", layer.ln_1_gain, false);
    add(h + "ln_1.bias", layer.ln_1_bias, false);
    add(h + "attn.w_q", layer.attn.w_q, true);
    add(h + "attn.b_q", layer.attn.b_q, false);
    add(h + "attn.w_k", layer.attn.w_k, true);
    add(h + "attn.b_k", layer.attn.b_k, false);
    add(h + "attn.w_v", layer.attn.w_v, true);
    add(h + "attn.b_v", layer.attn.b_v, false);
    add(h + "attn.w_o", layer.attn.w_o, true);
    add(h + "attn.b_o", layer.attn.b_o, false);
    add(h + "ln_2.gain", layer.ln_2_gain, false);
    add(h + "ln_2.bias", layer.ln_2_bias, false);
    add(h + "mlp.w_fc", layer.mlp.w_fc, true);
    add(h + "mlp.b_fc", layer.mlp.b_fc, false);
    add(h + "mlp.w_proj", layer.mlp.w_proj, true);
    add(h + "mlp.b_proj", layer.mlp.b_proj, false);
  }
  add("ln_f.gain", params.ln_f_gain, false);
  add("ln_f.bias", params.ln_f_bias, false);
  return all;
}

/// The parameters converted element by element to another type (float -> double for finite
/// differences, and back).
template <class To, class From>
GptParams<To> cast_gpt(const GptParams<From>& from) {
  GptParams<To> to = zero_gpt<To>(from.config);
  const auto source = parameter_tensors(from);
  const auto target = parameter_tensors(to);
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i].shape != target[i].shape)
      throw std::invalid_argument("cast_gpt: tensor " + source[i].name +
                                  " is not shaped as its config says");
    for (std::size_t j = 0; j < source[i].size(); ++j) target[i].data[j] = To(source[i].data[j]);
  }
  return to;
}

/// The number of parameters (wte counted once: it is also the unembedding).
template <class Real>
std::size_t parameter_count(const GptParams<Real>& params) {
  std::size_t n = 0;
  for (const auto& tensor : parameter_tensors(params)) n += tensor.size();
  return n;
}

/// Token ids of a batch: (B, T), row b is sequence b.
using BatchTokens = xt::xtensor<TokenId, 2>;

// ---- The tapes: what a forward keeps for its backward, allocated once ---------------------------

/// A LayerNorm over rows: out = gain ⊙ normalized + bias, normalized = (x − mean) · inv_std.
template <class Real>
struct LayerNormRows {
  Matrix<Real> normalized;  ///< (N, d): x̂
  Vector<Real> inv_std;     ///< (N): 1 / sqrt(var + 1e-5), biased variance
  Matrix<Real> out;         ///< (N, d)
};

/// What mlp_forward keeps, and mlp_backward's workspace.
template <class Real>
struct MlpTape {
  Matrix<Real> x;    ///< (N, d): the input
  Matrix<Real> h;    ///< (N, 4d): x W_fc + b_fc, GELU's input
  Matrix<Real> g;    ///< (N, 4d): gelu(h), W_proj's input
  Matrix<Real> out;  ///< (N, d): g W_proj + b_proj
  Matrix<Real> d_h;  ///< (N, 4d): backward's workspace, dL/dh
  Matrix<Real> dx;   ///< (N, d): backward's result, dL/dx
};

/// What gpt_block_forward keeps (B sequences of T tokens), and gpt_block_backward's workspace.
template <class Real>
struct GptBlockTape {
  std::size_t batch = 0, length = 0;  ///< B and T
  Matrix<Real> x;                     ///< (N, d): the block's input, the residual stream
  LayerNormRows<Real> ln_1;           ///< ln_1(x): attention's input
  Matrix<Real> q, k, v;               ///< (N, d) each: ln_1 W + b, head h in column block h
  xt::xtensor<Real, 4> probs;  ///< (B, H, T, T): softmax of the causal scores, 0 above the diagonal
  Matrix<Real> merged;         ///< (N, d): the heads side by side, W_O's input
  Matrix<Real> mid;            ///< (N, d): x + attention, the MLP's residual input
  LayerNormRows<Real> ln_2;    ///< ln_2(mid): the MLP's input
  MlpTape<Real> mlp;
  Matrix<Real> out;  ///< (N, d): mid + mlp(ln_2(mid))
  // gpt_block_backward's workspace and result
  Matrix<Real> d_mid, d_ln, d_q, d_k, d_v, d_merged;  ///< (N, d) each
  Matrix<Real>
      d_scores;     ///< (T, T) per (sequence, head) at work: the reference keeps one per thread
  Matrix<Real> dx;  ///< (N, d): dL/dx, the result
};

/// What gpt_forward keeps for gpt_backward, and the logits it returns. Keep one across steps: a
/// forward of the same (B, T) reuses every buffer.
template <class Real>
struct GptTape {
  BatchTokens tokens;                      ///< (B, T): the forward's input
  std::vector<GptBlockTape<Real>> layers;  ///< n_layers; layers[0].x = wte[tokens] + wpe[t]
  LayerNormRows<Real> ln_f;                ///< ln_f(the last block's out): the unembedding's input
  xt::xtensor<Real, 3> logits;             ///< (B, T, V) = ln_f.out @ wteᵀ
  xt::xtensor<Real, 3> d_logits;  ///< (B, T, V): where train_step puts cross_entropy's gradient
  Matrix<Real> d_x;               ///< (N, d): backward's workspace, dL/d(residual stream)
};

/// The attention weights of sequence b after a forward: [layer][head], each (T, T), row t the
/// weights query t gives keys 0 … t (0 after t).
/// @throws std::invalid_argument if b >= B of the tape's forward.
template <class Real>
std::vector<std::vector<Matrix<Real>>> attention_maps(const GptTape<Real>& tape, std::size_t b) {
  if (tape.layers.empty() || b >= tape.layers[0].probs.shape(0))
    throw std::invalid_argument(
        "attention_maps: sequence " + std::to_string(b) + " but the tape's forward had " +
        std::to_string(tape.layers.empty() ? 0 : tape.layers[0].probs.shape(0)) + " sequences");
  std::vector<std::vector<Matrix<Real>>> maps(tape.layers.size());
  for (std::size_t l = 0; l < tape.layers.size(); ++l) {
    const auto& probs = tape.layers[l].probs;  // (B, H, T, T)
    const std::size_t H = probs.shape(1), T = probs.shape(2);
    for (std::size_t h = 0; h < H; ++h) {
      Matrix<Real> map({T, T});
      const Real* source = probs.data() + ((b * H + h) * T) * T;
      std::copy(source, source + T * T, map.data());
      maps[l].push_back(std::move(map));
    }
  }
  return maps;
}

// ---- Block A: GELU, the MLP, the block, the model and its loss ---------------------------------

/// Block A. GPT-2's GELU, elementwise: 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
/// x: (N, k) -> (N, k).
template <class Real>
Matrix<Real> gelu(const Matrix<Real>& x);

/// Block A. dL/dx from dL/dy for y = gelu(x): d_y ⊙ gelu'(x), with gelu'(x) = 0.5 (1 + tanh u) +
/// 0.5 x (1 − tanh² u) sqrt(2/π) (1 + 3 · 0.044715 x²), u = sqrt(2/π) (x + 0.044715 x³).
/// @throws std::invalid_argument if x and d_y differ in shape (both named).
template <class Real>
Matrix<Real> gelu_backward(const Matrix<Real>& x, const Matrix<Real>& d_y);

/// Block A. x: (N, d) -> (N, d): gelu(x W_fc + b_fc) W_proj + b_proj. Writes tape.x, h, g, out
/// and returns tape.out.
/// @throws std::invalid_argument if a weight or bias is not shaped (d, 4d), (4d), (4d, d), (d) for
///         x's d, naming both shapes.
template <class Real>
const Matrix<Real>& mlp_forward(const GptMlp<Real>& mlp, const Matrix<Real>& x,
                                MlpTape<Real>& tape);

/// Block A. From d_out = dL/dy (N, d): overwrites `grads` (resized to mlp's shapes) with dL/dW_fc,
/// dL/db_fc, dL/dW_proj, dL/db_proj, writes tape.d_h, and returns tape.dx = dL/dx.
/// @throws std::invalid_argument if d_out is not shaped as the forward's output.
template <class Real>
const Matrix<Real>& mlp_backward(const GptMlp<Real>& mlp, MlpTape<Real>& tape,
                                 const Matrix<Real>& d_out, GptMlp<Real>& grads);

/// Block A. One pre-LN block over B sequences of T tokens, x: (B·T, d) -> (B·T, d), causal
/// attention within each sequence: mid = x + attn(ln_1(x)); out = mid + mlp(ln_2(mid)). LayerNorm
/// eps 1e-5. Writes every forward field of `tape` and returns tape.out. x may be tape.x itself.
/// @throws std::invalid_argument if n_heads is 0 or does not divide d, batch is 0 or does not
///         divide x's rows, or a parameter is not shaped for x's d (naming both shapes).
template <class Real>
const Matrix<Real>& gpt_block_forward(const GptLayer<Real>& layer, std::size_t n_heads,
                                      std::size_t batch, const Matrix<Real>& x,
                                      GptBlockTape<Real>& tape);

/// Block A. From d_out = dL/d(out), (B·T, d): overwrites `grads` (resized to layer's shapes) with
/// the gradient of every parameter of the layer, and returns tape.dx = dL/dx. Uses the tape's
/// d_* fields as workspace.
/// @throws std::invalid_argument if d_out is not shaped as the forward's output.
template <class Real>
const Matrix<Real>& gpt_block_backward(const GptLayer<Real>& layer, std::size_t n_heads,
                                       GptBlockTape<Real>& tape, const Matrix<Real>& d_out,
                                       GptLayer<Real>& grads);

/// Block A. Seeded GPT-2 initialisation: every element of wte, wpe and the six weight matrices of
/// each layer is drawn, in parameter_tensors' order and row-major, as std * n with n from one
/// std::normal_distribution<float>(0, 1) driven by one std::mt19937_64(seed); std is 0.02, and
/// 0.02 / sqrt(2 · n_layers) for the residual projections attn.w_o and mlp.w_proj. Biases are 0,
/// LayerNorm gains 1 and biases 0 (nothing is drawn for them).
/// @throws std::invalid_argument as zero_gpt.
GptParams<float> init_gpt(const GptConfig& config, std::uint64_t seed);

/// Block A. Logits (B, T, V) for tokens (B, T): x = wte[token] + wpe[t]; the blocks; ln_f; logits =
/// ln_f(x) @ wteᵀ. Overwrites `tape` (reusing its buffers when B and T are unchanged) and returns
/// tape.logits.
/// @throws std::invalid_argument if tokens are empty, T > max_len, a token is negative or >= V,
///         or the parameters are not shaped as params.config says.
template <class Real>
const xt::xtensor<Real, 3>& gpt_forward(const GptParams<Real>& params, const BatchTokens& tokens,
                                        GptTape<Real>& tape);

/// Block A. The mean next-token cross-entropy in nats over all B·T positions, −log
/// softmax(logits[b, t])[targets(b, t)] (log-sum-exp with the row maximum subtracted, summed in
/// double); overwrites d_logits (resized to logits' shape) with its gradient (softmax − one_hot) /
/// (B·T).
/// @throws std::invalid_argument if targets are not (B, T) of logits (both named) or a target is
///         negative or >= V.
template <class Real>
Real cross_entropy(const xt::xtensor<Real, 3>& logits, const BatchTokens& targets,
                   xt::xtensor<Real, 3>& d_logits);

/// Block A. From d_logits (B, T, V) of the tape's forward: overwrites `grads` (resized to params'
/// shapes) with every parameter's gradient. wte's is the sum of its two uses: the unembedding's
/// d_logitsᵀ ln_f.out, and the embedding rows of the tokens, scatter-added.
/// @throws std::invalid_argument if d_logits is not shaped as the tape's logits, or params have
///         another number of layers than the tape.
template <class Real>
void gpt_backward(const GptParams<Real>& params, GptTape<Real>& tape,
                  const xt::xtensor<Real, 3>& d_logits, GptParams<Real>& grads);

// ---- Block B: the optimiser ---------------------------------------------------------------------

/// AdamW's settings, torch.optim.AdamW's names; the defaults are GPT-2's (nanoGPT's). Doubles, as
/// torch's Python floats: the update computes its scalars in double and uses them as float.
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

/// Block B. AdamW over a list of tensors, as torch.optim.AdamW (decoupled weight decay), keeping
/// the two moments of each. For step t = steps() after the increment, every tensor:
///   p = p · (1 − lr·wd) (decayed tensors only);  m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
///   p = p − (lr / (1 − β1^t)) · m / (sqrt(v) / sqrt(1 − β2^t) + eps).
class AdamW {
 public:
  /// Block B. Zero moments, one flat vector per tensor of `params`.
  AdamW(const std::vector<ParamTensor<const float>>& params, AdamWOptions options = {});

  /// Block B. One step at learning rate lr on every tensor of `params`, with its gradient in
  /// `grads`; a tensor is decayed if its ParamTensor says so.
  /// @throws std::invalid_argument if params or grads hold another number of tensors, or a tensor
  ///         of another size, than the constructor's; nothing changes then, steps() included.
  void step(const std::vector<ParamTensor<float>>& params,
            const std::vector<ParamTensor<const float>>& grads, double lr);

  /// The moments of tensor i, flat (for a checkpoint), and the steps taken.
  const std::vector<Vector<float>>& m() const { return m_; }
  const std::vector<Vector<float>>& v() const { return v_; }
  std::size_t steps() const { return steps_; }
  const AdamWOptions& options() const { return options_; }

  /// Resumes from a checkpoint: the steps taken and the moments, each sized as the constructor's.
  /// @throws std::invalid_argument if the moments do not match the constructor's tensors.
  void restore(std::size_t steps, std::vector<Vector<float>> m, std::vector<Vector<float>> v) {
    if (m.size() != m_.size() || v.size() != v_.size())
      throw std::invalid_argument("AdamW::restore: " + std::to_string(m.size()) + " and " +
                                  std::to_string(v.size()) + " moments but the optimiser has " +
                                  std::to_string(m_.size()) + " tensors");
    for (std::size_t i = 0; i < m_.size(); ++i)
      if (m[i].size() != m_[i].size() || v[i].size() != v_[i].size())
        throw std::invalid_argument("AdamW::restore: tensor " + std::to_string(i) + " has " +
                                    std::to_string(m_[i].size()) + " elements but its moments " +
                                    std::to_string(m[i].size()) + " and " +
                                    std::to_string(v[i].size()));
    steps_ = steps;
    m_ = std::move(m);
    v_ = std::move(v);
  }

 private:
  AdamWOptions options_;
  std::vector<Vector<float>> m_, v_;
  std::size_t steps_ = 0;
};

/// The learning-rate schedule: linear warm-up, then cosine decay to lr_min (nanoGPT's get_lr).
struct LrSchedule {
  double lr_max = 1e-3;
  double lr_min = 1e-4;  ///< lr_max / 10, GPT-2's and nanoGPT's choice
  std::size_t warmup = 100;
  std::size_t max_steps = 5000;
};

/// Block B. The learning rate of step `step` (0, 1, …): lr_max · (step + 1) / warmup for step <
/// warmup; lr_min + 0.5 (1 + cos(π r)) (lr_max − lr_min), r = (step − warmup) / (max_steps −
/// warmup), up to max_steps; lr_min after.
/// @throws std::invalid_argument unless 0 <= lr_min <= lr_max and warmup < max_steps.
double learning_rate(const LrSchedule& schedule, std::size_t step);

/// Block B. Clipping by the global norm, as torch.nn.utils.clip_grad_norm_: norm = sqrt(Σ g²) over
/// every element of every tensor; if max_norm / (norm + 1e-6) < 1, every gradient is multiplied by
/// it. Returns the norm before clipping.
/// @throws std::invalid_argument if max_norm is not positive.
float clip_grad_norm(const std::vector<ParamTensor<float>>& grads, float max_norm);

// ---- Block C: training --------------------------------------------------------------------------

/// A batch: B windows of T + 1 consecutive tokens, inputs their first T, targets their last T.
struct GptBatch {
  BatchTokens inputs, targets;  ///< (B, T) each; targets(b, t) = inputs(b, t + 1) for t < T − 1
};

/// Block C. B random windows of T + 1 tokens from `stream`: for b = 0 … B − 1 in turn, start =
/// std::uniform_int_distribution<std::size_t>(0, stream.size() − T − 1)(rng).
/// @throws std::invalid_argument if B or T is 0 or the stream has fewer than T + 1 tokens.
GptBatch random_batch(const std::vector<TokenId>& stream, std::size_t batch, std::size_t length,
                      std::mt19937_64& rng);

/// The settings of train_step.
struct TrainOptions {
  LrSchedule schedule;
  float max_grad_norm = 1.0f;
};

/// What one training step measured.
struct StepStats {
  float loss = 0;       ///< the batch's mean cross-entropy, before the update, nats per token
  float grad_norm = 0;  ///< the global gradient norm before clipping
  double lr = 0;        ///< the learning rate the update used
};

/// Block C. One step: gpt_forward, cross_entropy (into tape.d_logits), gpt_backward (into grads),
/// clip_grad_norm, adamw.step at learning_rate(schedule, adamw.steps()) (the steps before this
/// one).
/// @throws std::invalid_argument as the functions it calls.
StepStats train_step(GptParams<float>& params, GptParams<float>& grads, AdamW& adamw,
                     GptTape<float>& tape, const GptBatch& batch, const TrainOptions& options);

/// A model's loss on held-out text.
struct Evaluation {
  double loss = 0;           ///< mean cross-entropy, nats per token
  std::size_t tokens = 0;    ///< the predicted tokens
  std::size_t bytes = 0;     ///< what they decode to (0 without token_bytes)
  double bits_per_byte = 0;  ///< bits_per_byte(loss · tokens, bytes); 0 without token_bytes
};

/// Block C. The bits a model spends per byte of text: total_nats / (ln 2 · bytes).
/// @throws std::invalid_argument if bytes is 0.
double bits_per_byte(double total_nats, std::size_t bytes);

/// Block C. The mean loss over windows of T + 1 tokens of `stream` starting at 0, T, 2T, … (every
/// token after the first predicted once), at most max_windows of them, run `batch` windows at a
/// time (fewer for the last: pass a max_windows that is a multiple of batch to keep the tape's
/// shape, and so its buffers). token_bytes[id], if not empty, is token id's length in bytes, which
/// gives bytes and bits_per_byte.
/// @throws std::invalid_argument if T is 0 or above max_len, batch is 0, the stream has fewer than
///         T + 1 tokens, or token_bytes is neither empty nor of size V.
Evaluation evaluate(const GptParams<float>& params, const std::vector<TokenId>& stream,
                    std::size_t length, std::size_t batch, std::size_t max_windows,
                    const std::vector<std::size_t>& token_bytes, GptTape<float>& tape);

// ---- Block D: sampling --------------------------------------------------------------------------

/// How to pick the next token from the logits.
struct SamplingOptions {
  float temperature = 1.0f;  ///< 0: greedy (the most likely token)
  std::size_t top_k = 0;     ///< keep the k most likely tokens; 0: all
  float top_p = 1.0f;        ///< then keep the smallest most-likely set whose probability >= top_p
};

/// Block D. The distribution sample_token draws from, (V): softmax(logits / temperature); then
/// only the top_k most likely tokens (ties: the lower id first) renormalised; then only the
/// smallest set of most likely tokens whose probability reaches top_p (at least one, as Hugging
/// Face's TopPLogitsWarper) renormalised; removed tokens get exactly 0. Temperature 0 gives
/// probability 1 to the most likely token (the lowest id of a tie).
/// @throws std::invalid_argument if logits are empty, temperature is negative or not finite, or
///         top_p is not in (0, 1].
Vector<float> sampling_distribution(const Vector<float>& logits, const SamplingOptions& options);

/// Block D. One token drawn from sampling_distribution with one
/// std::uniform_real_distribution<double>(0, 1) draw u (always exactly one, greedy included): the
/// first id in vocabulary order whose cumulative probability exceeds u · (the sum).
/// @throws std::invalid_argument as sampling_distribution.
TokenId sample_token(const Vector<float>& logits, const SamplingOptions& options,
                     std::mt19937_64& rng);

/// Every layer's keys and values of the tokens one sequence has seen (lab 08's idea, one sequence).
struct GptKVCache {
  xt::xtensor<float, 4> keys, values;  ///< (n_layers, H, max_len, d_head): row p is position p
  std::size_t length = 0;              ///< tokens held; the next token goes to position length
};

/// An empty cache for `config`'s model.
inline GptKVCache make_kv_cache(const GptConfig& config) {
  const std::size_t d_head = config.d_model / config.n_heads;
  const std::vector<std::size_t> shape = {config.n_layers, config.n_heads, config.max_len, d_head};
  return {xt::xtensor<float, 4>(xt::zeros<float>(shape)),
          xt::xtensor<float, 4>(xt::zeros<float>(shape)), 0};
}

/// Block D. One token through the model at position cache.length: appends its keys and values in
/// every layer, attends to the cached tokens and itself, and returns the logits (V) predicting the
/// next token. The same numbers as gpt_forward's row at that position.
/// @throws std::invalid_argument if the token is negative or >= V, the cache is full (length ==
///         max_len) or not shaped for params.config.
Vector<float> gpt_decode_step(const GptParams<float>& params, TokenId token, GptKVCache& cache);

/// Block D. Feeds `prompt` through gpt_decode_step, then samples max_new tokens one at a time,
/// calling on_token (if set) on each as it is drawn, and returns them. When the cache is full as a
/// token is to be fed, it is emptied and refilled with the last max_len / 2 tokens before that
/// token, then that token is fed (a sliding context).
/// @throws std::invalid_argument if the prompt is empty or holds an id >= V, or as
///         sample_token.
std::vector<TokenId> generate(const GptParams<float>& params, const std::vector<TokenId>& prompt,
                              std::size_t max_new, const SamplingOptions& options,
                              std::mt19937_64& rng,
                              const std::function<void(TokenId)>& on_token = {});

// The explicit instantiations each implementation ends its files with, inside namespace minimodel:
// MINIMODEL_LAB13_INSTANTIATE(float) to train, (double) for finite differences.
#define MINIMODEL_LAB13_INSTANTIATE(Real)                                                         \
  template Matrix<Real> gelu(const Matrix<Real>&);                                                \
  template Matrix<Real> gelu_backward(const Matrix<Real>&, const Matrix<Real>&);                  \
  template const Matrix<Real>& mlp_forward(const GptMlp<Real>&, const Matrix<Real>&,              \
                                           MlpTape<Real>&);                                       \
  template const Matrix<Real>& mlp_backward(const GptMlp<Real>&, MlpTape<Real>&,                  \
                                            const Matrix<Real>&, GptMlp<Real>&);                  \
  template const Matrix<Real>& gpt_block_forward(const GptLayer<Real>&, std::size_t, std::size_t, \
                                                 const Matrix<Real>&, GptBlockTape<Real>&);       \
  template const Matrix<Real>& gpt_block_backward(const GptLayer<Real>&, std::size_t,             \
                                                  GptBlockTape<Real>&, const Matrix<Real>&,       \
                                                  GptLayer<Real>&);                               \
  template const xt::xtensor<Real, 3>& gpt_forward(const GptParams<Real>&, const BatchTokens&,    \
                                                   GptTape<Real>&);                               \
  template Real cross_entropy(const xt::xtensor<Real, 3>&, const BatchTokens&,                    \
                              xt::xtensor<Real, 3>&);                                             \
  template void gpt_backward(const GptParams<Real>&, GptTape<Real>&, const xt::xtensor<Real, 3>&, \
                             GptParams<Real>&);

}  // namespace minimodel
