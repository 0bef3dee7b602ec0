// Lab 13, Block D: sampling with temperature, top-k and top-p, and generation one token at a time
// through a KV cache. Reference solution.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "minimodel/model/gpt.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {

namespace {

// LayerNorm of one row, eps 1e-5: out = gain ⊙ (x − mean) / sqrt(var + eps) + bias.
void layer_norm_row(const float* x, const Vector<float>& gain, const Vector<float>& bias,
                    float* out, std::size_t d) {
  float mean = 0, var = 0;
  for (std::size_t j = 0; j < d; ++j) mean += x[j];
  mean /= float(d);
  for (std::size_t j = 0; j < d; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= float(d);
  const float inv_std = 1.0f / std::sqrt(var + 1e-5f);
  for (std::size_t j = 0; j < d; ++j) out[j] = (x[j] - mean) * inv_std * gain(j) + bias(j);
}

// out (n) = x (k) @ w (k, n) + b (n): one matrix-vector product, wᵀ x.
void row_times(const float* x, const Matrix<float>& w, const Vector<float>& b, float* out) {
  const std::size_t k = w.shape(0), n = w.shape(1);
  std::copy(b.begin(), b.end(), out);
  cblas_sgemv(CblasRowMajor, CblasTrans, int(k), int(n), 1.0f, w.data(), int(n), x, 1, 1.0f, out,
              1);
}

}  // namespace

// ---- Block D: sampling --------------------------------------------------------------------------

Vector<float> sampling_distribution(const Vector<float>& logits, const SamplingOptions& options) {
  const std::size_t V = logits.size();
  if (V == 0) throw std::invalid_argument("sampling_distribution: the logits are empty");
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature))
    throw std::invalid_argument("sampling_distribution: temperature " +
                                std::to_string(options.temperature) +
                                " must be finite and >= 0 (0 is greedy)");
  if (!(options.top_p > 0 && options.top_p <= 1))
    throw std::invalid_argument("sampling_distribution: top_p " + std::to_string(options.top_p) +
                                " must be in (0, 1]");
  Vector<float> p = xt::zeros<float>({V});
  const std::size_t best =
      std::size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (options.temperature == 0) {  // greedy: the first of the largest logits
    p(best) = 1;
    return p;
  }
  // softmax(logits / temperature), stable
  const float top = logits(best);
  double sum = 0;
  for (std::size_t i = 0; i < V; ++i) {
    p(i) = std::exp((logits(i) - top) / options.temperature);
    sum += p(i);
  }
  for (float& x : p) x = float(x / sum);
  if (options.top_k == 0 && options.top_p == 1.0f) return p;  // nothing to cut
  // the tokens from most to least likely, ties toward the lower id (only the top k need sorting)
  std::size_t kept = V;
  if (options.top_k > 0 && options.top_k < V) kept = options.top_k;
  std::vector<std::size_t> order(V);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::partial_sort(
      order.begin(), order.begin() + std::ptrdiff_t(kept), order.end(),
      [&p](std::size_t a, std::size_t b) { return p(a) > p(b) || (p(a) == p(b) && a < b); });
  // top-p: the shortest prefix (of the kept) whose probability reaches top_p of the kept total
  double kept_total = 0;
  for (std::size_t i = 0; i < kept; ++i) kept_total += p(order[i]);
  double before = 0;
  std::size_t nucleus = 0;
  while (nucleus < kept && (nucleus == 0 || before < double(options.top_p) * kept_total))
    before += p(order[nucleus++]);
  for (std::size_t i = nucleus; i < V; ++i) p(order[i]) = 0;
  for (float& x : p) x = float(x / before);
  return p;
}

TokenId sample_token(const Vector<float>& logits, const SamplingOptions& options,
                     std::mt19937_64& rng) {
  const Vector<float> p = sampling_distribution(logits, options);
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double target = u * std::accumulate(p.begin(), p.end(), 0.0);
  double cumulative = 0;
  std::size_t last = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p(i) == 0) continue;
    cumulative += p(i);
    last = i;
    if (cumulative > target) return TokenId(i);
  }
  return TokenId(last);  // rounding left the sum a hair below target
}

// ---- Block D: generation through the KV cache ---------------------------------------------------

Vector<float> gpt_decode_step(const GptParams<float>& params, TokenId token, GptKVCache& cache) {
  const GptConfig& c = params.config;
  const std::size_t d = c.d_model, H = c.n_heads, dh = d / H, V = c.vocab;
  if (token < 0 || std::size_t(token) >= V)
    throw std::invalid_argument("gpt_decode_step: token " + std::to_string(token) +
                                " but the vocabulary has " + std::to_string(V));
  const std::array<std::size_t, 4> shape = {c.n_layers, H, c.max_len, dh};
  if (!std::equal(shape.begin(), shape.end(), cache.keys.shape().begin()) ||
      !std::equal(shape.begin(), shape.end(), cache.values.shape().begin()))
    throw std::invalid_argument("gpt_decode_step: the cache is " + shape_of(cache.keys) +
                                " but the model needs (" + std::to_string(c.n_layers) + ", " +
                                std::to_string(H) + ", " + std::to_string(c.max_len) + ", " +
                                std::to_string(dh) + ")");
  if (cache.length >= c.max_len)
    throw std::invalid_argument("gpt_decode_step: the cache holds " + std::to_string(cache.length) +
                                " tokens, max_len " + std::to_string(c.max_len) + ": it is full");
  const std::size_t pos = cache.length;
  const float scale = 1.0f / std::sqrt(float(dh));
  std::vector<float> x(d), ln(d), q(d), k(d), v(d), merged(d), attn(d), scores(pos + 1);
  for (std::size_t j = 0; j < d; ++j) x[j] = params.wte(std::size_t(token), j) + params.wpe(pos, j);
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const GptLayer<float>& layer = params.layers[l];
    // attention: this token's q, k, v; k and v into the cache at row pos; attend to rows 0 … pos
    layer_norm_row(x.data(), layer.ln_1_gain, layer.ln_1_bias, ln.data(), d);
    row_times(ln.data(), layer.attn.w_q, layer.attn.b_q, q.data());
    row_times(ln.data(), layer.attn.w_k, layer.attn.b_k, k.data());
    row_times(ln.data(), layer.attn.w_v, layer.attn.b_v, v.data());
    for (std::size_t h = 0; h < H; ++h) {
      float* keys = &cache.keys(l, h, 0, 0);  // (max_len, d_head)
      float* values = &cache.values(l, h, 0, 0);
      std::copy(k.begin() + h * dh, k.begin() + (h + 1) * dh, keys + pos * dh);
      std::copy(v.begin() + h * dh, v.begin() + (h + 1) * dh, values + pos * dh);
      float top = -INFINITY;
      for (std::size_t s = 0; s <= pos; ++s) {
        float dot = 0;
        for (std::size_t i = 0; i < dh; ++i) dot += q[h * dh + i] * keys[s * dh + i];
        scores[s] = dot * scale;
        top = std::max(top, scores[s]);
      }
      float sum = 0;
      for (std::size_t s = 0; s <= pos; ++s) sum += scores[s] = std::exp(scores[s] - top);
      std::fill(merged.begin() + h * dh, merged.begin() + (h + 1) * dh, 0.0f);
      for (std::size_t s = 0; s <= pos; ++s) {
        const float weight = scores[s] / sum;
        for (std::size_t i = 0; i < dh; ++i) merged[h * dh + i] += weight * values[s * dh + i];
      }
    }
    row_times(merged.data(), layer.attn.w_o, layer.attn.b_o, attn.data());
    for (std::size_t j = 0; j < d; ++j) x[j] += attn[j];
    // MLP
    Matrix<float> ln_2({1, d});
    layer_norm_row(x.data(), layer.ln_2_gain, layer.ln_2_bias, ln_2.data(), d);
    MlpTape<float> tape;
    const Matrix<float>& out = mlp_forward(layer.mlp, ln_2, tape);
    for (std::size_t j = 0; j < d; ++j) x[j] += out(0, j);
  }
  layer_norm_row(x.data(), params.ln_f_gain, params.ln_f_bias, ln.data(), d);
  Vector<float> logits = xt::zeros<float>({V});  // wte (V, d) ln_f(x): the tied unembedding
  cblas_sgemv(CblasRowMajor, CblasNoTrans, int(V), int(d), 1.0f, params.wte.data(), int(d),
              ln.data(), 1, 0.0f, logits.data(), 1);
  ++cache.length;
  return logits;
}

std::vector<TokenId> generate(const GptParams<float>& params, const std::vector<TokenId>& prompt,
                              std::size_t max_new, const SamplingOptions& options,
                              std::mt19937_64& rng, const std::function<void(TokenId)>& on_token) {
  const GptConfig& c = params.config;
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt is empty");
  for (const TokenId token : prompt)
    if (token < 0 || std::size_t(token) >= c.vocab)
      throw std::invalid_argument("generate: prompt token " + std::to_string(token) +
                                  " but the vocabulary has " + std::to_string(c.vocab));
  GptKVCache cache = make_kv_cache(c);
  std::vector<TokenId> text, generated;
  Vector<float> logits;
  const auto feed = [&](TokenId token) {
    if (cache.length == c.max_len) {  // full: keep the last max_len / 2 tokens as the context
      cache.length = 0;
      for (std::size_t i = text.size() - c.max_len / 2; i < text.size(); ++i)
        gpt_decode_step(params, text[i], cache);
    }
    logits = gpt_decode_step(params, token, cache);
    text.push_back(token);
  };
  for (const TokenId token : prompt) feed(token);
  for (std::size_t i = 0; i < max_new; ++i) {
    const TokenId next = sample_token(logits, options, rng);
    generated.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 < max_new) feed(next);
  }
  return generated;
}

}  // namespace minimodel
