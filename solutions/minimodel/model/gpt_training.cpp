// Lab 13, Blocks B and C: AdamW, the learning-rate schedule, clipping by the global norm, random
// windows of a token stream, a training step, evaluation and bits per byte. Reference solution.
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "minimodel/model/gpt.hpp"
#include "minimodel/shapes.hpp"
#include "simd_rows.hpp"

namespace minimodel {

// ---- Block B: the optimiser ---------------------------------------------------------------------

AdamW::AdamW(const std::vector<ParamTensor<const float>>& params, AdamWOptions options)
    : options_(options) {
  for (const ParamTensor<const float>& tensor : params) {
    m_.push_back(xt::zeros<float>({tensor.size()}));
    v_.push_back(xt::zeros<float>({tensor.size()}));
  }
}

void AdamW::step(const std::vector<ParamTensor<float>>& params,
                 const std::vector<ParamTensor<const float>>& grads, double lr) {
  if (params.size() != m_.size() || grads.size() != m_.size())
    throw std::invalid_argument("AdamW::step: " + std::to_string(params.size()) +
                                " parameters and " + std::to_string(grads.size()) +
                                " gradients but the optimiser was made for " +
                                std::to_string(m_.size()) + " tensors");
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (params[i].size() != m_[i].size() || grads[i].size() != m_[i].size())
      throw std::invalid_argument("AdamW::step: tensor " + std::to_string(i) + " (" +
                                  params[i].name + ") has " + std::to_string(params[i].size()) +
                                  " elements and its gradient " + std::to_string(grads[i].size()) +
                                  " but the optimiser was made for " +
                                  std::to_string(m_[i].size()));
  ++steps_;
  const AdamWOptions& o = options_;
  const double t = double(steps_);
  // torch's scalars: Python floats, used as float by the float tensors' kernels
  const float beta1 = float(o.beta1), beta2 = float(o.beta2);
  const float one_minus_beta1 = float(1 - o.beta1), one_minus_beta2 = float(1 - o.beta2);
  const float decay = float(1 - lr * o.weight_decay);
  const float bias_correction2_sqrt = float(std::sqrt(1 - std::pow(o.beta2, t)));
  const float neg_step_size = float(-(lr / (1 - std::pow(o.beta1, t))));
  const float eps = float(o.eps);
  for (std::size_t i = 0; i < m_.size(); ++i) {
    float* p = params[i].data;
    const float* g = grads[i].data;
    float* m = m_[i].data();
    float* v = v_[i].data();
    // p · 1 is p: a tensor without decay takes the same loop, which has no branch to vectorise
    const float shrink = params[i].decay && o.weight_decay != 0 ? decay : 1.0f;
    for (std::size_t j = 0; j < m_[i].size(); ++j) {
      p[j] *= shrink;
      m[j] = m[j] * beta1;
      m[j] = m[j] + one_minus_beta1 * g[j];
      v[j] = v[j] * beta2;
      v[j] = v[j] + one_minus_beta2 * g[j] * g[j];
      const float denom = std::sqrt(v[j]) / bias_correction2_sqrt + eps;
      p[j] = p[j] + neg_step_size * m[j] / denom;
    }
  }
}

double learning_rate(const LrSchedule& s, std::size_t step) {
  if (!(s.lr_min >= 0) || !(s.lr_min <= s.lr_max) || s.warmup >= s.max_steps)
    throw std::invalid_argument("learning_rate: lr_min " + std::to_string(s.lr_min) + ", lr_max " +
                                std::to_string(s.lr_max) + ", warmup " + std::to_string(s.warmup) +
                                " and max_steps " + std::to_string(s.max_steps) +
                                "; they need 0 <= lr_min <= lr_max and warmup < max_steps");
  if (step < s.warmup) return s.lr_max * double(step + 1) / double(s.warmup);
  if (step > s.max_steps) return s.lr_min;
  const double ratio = double(step - s.warmup) / double(s.max_steps - s.warmup);
  const double pi = 3.141592653589793;
  return s.lr_min + 0.5 * (1 + std::cos(pi * ratio)) * (s.lr_max - s.lr_min);
}

float clip_grad_norm(const std::vector<ParamTensor<float>>& grads, float max_norm) {
  if (!(max_norm > 0))
    throw std::invalid_argument("clip_grad_norm: max_norm is " + std::to_string(max_norm) +
                                "; it must be positive");
  double sum = 0;  // of each tensor's Σ g², summed in float lanes as torch sums each tensor's norm
  for (const ParamTensor<float>& g : grads) sum += double(simd::row_dot(g.data, g.data, g.size()));
  const float norm = float(std::sqrt(sum));
  const float coef = (1.0f / (norm + 1e-6f)) * max_norm;  // torch: max_norm / (norm + 1e-6)
  if (coef < 1.0f)
    for (const ParamTensor<float>& g : grads)
      for (std::size_t j = 0; j < g.size(); ++j) g.data[j] *= coef;
  return norm;
}

// ---- Block C: training --------------------------------------------------------------------------

GptBatch random_batch(const std::vector<TokenId>& stream, std::size_t batch, std::size_t length,
                      std::mt19937_64& rng) {
  if (batch == 0 || length == 0 || stream.size() < length + 1)
    throw std::invalid_argument("random_batch: " + std::to_string(batch) + " windows of " +
                                std::to_string(length) + " + 1 tokens from a stream of " +
                                std::to_string(stream.size()) +
                                "; B and T must be positive and the stream hold T + 1 tokens");
  GptBatch out{BatchTokens({batch, length}), BatchTokens({batch, length})};
  std::uniform_int_distribution<std::size_t> start(0, stream.size() - length - 1);
  for (std::size_t b = 0; b < batch; ++b) {
    const TokenId* window = stream.data() + start(rng);
    std::copy(window, window + length, out.inputs.data() + b * length);
    std::copy(window + 1, window + length + 1, out.targets.data() + b * length);
  }
  return out;
}

StepStats train_step(GptParams<float>& params, GptParams<float>& grads, AdamW& adamw,
                     GptTape<float>& tape, const GptBatch& batch, const TrainOptions& options) {
  StepStats stats;
  stats.lr = learning_rate(options.schedule, adamw.steps());
  const xt::xtensor<float, 3>& logits = gpt_forward(params, batch.inputs, tape);
  stats.loss = cross_entropy(logits, batch.targets, tape.d_logits);
  gpt_backward(params, tape, tape.d_logits, grads);
  stats.grad_norm = clip_grad_norm(parameter_tensors(grads), options.max_grad_norm);
  const GptParams<float>& const_grads = grads;
  adamw.step(parameter_tensors(params), parameter_tensors(const_grads), stats.lr);
  return stats;
}

double bits_per_byte(double total_nats, std::size_t bytes) {
  if (bytes == 0)
    throw std::invalid_argument("bits_per_byte: 0 bytes; the tokens must decode to some text");
  return total_nats / (std::log(2.0) * double(bytes));
}

Evaluation evaluate(const GptParams<float>& params, const std::vector<TokenId>& stream,
                    std::size_t length, std::size_t batch, std::size_t max_windows,
                    const std::vector<std::size_t>& token_bytes, GptTape<float>& tape) {
  const GptConfig& c = params.config;
  if (length == 0 || length > c.max_len || batch == 0 || stream.size() < length + 1)
    throw std::invalid_argument("evaluate: windows of " + std::to_string(length) + " + 1 tokens, " +
                                std::to_string(batch) + " at a time, from a stream of " +
                                std::to_string(stream.size()) + " for a model of max_len " +
                                std::to_string(c.max_len) +
                                "; need 0 < T <= max_len, B > 0 and T + 1 tokens");
  if (!token_bytes.empty() && token_bytes.size() != c.vocab)
    throw std::invalid_argument("evaluate: token_bytes has " + std::to_string(token_bytes.size()) +
                                " entries but the vocabulary " + std::to_string(c.vocab));
  const std::size_t windows = std::min(max_windows, (stream.size() - 1) / length);
  Evaluation result;
  double total = 0;
  for (std::size_t first = 0; first < windows; first += batch) {
    const std::size_t rows = std::min(batch, windows - first);
    BatchTokens inputs({rows, length}), targets({rows, length});
    for (std::size_t b = 0; b < rows; ++b) {
      const TokenId* window = stream.data() + (first + b) * length;
      std::copy(window, window + length, inputs.data() + b * length);
      std::copy(window + 1, window + length + 1, targets.data() + b * length);
    }
    const float loss = cross_entropy(gpt_forward(params, inputs, tape), targets, tape.d_logits);
    total += double(loss) * double(rows * length);
    result.tokens += rows * length;
    if (!token_bytes.empty())
      for (const TokenId target : targets) result.bytes += token_bytes[std::size_t(target)];
  }
  result.loss = result.tokens ? total / double(result.tokens) : 0;
  if (result.bytes > 0) result.bits_per_byte = bits_per_byte(total, result.bytes);
  return result;
}

}  // namespace minimodel
