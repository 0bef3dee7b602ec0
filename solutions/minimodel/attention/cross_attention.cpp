// Lab 06 reference: cross-attention with key-padding and additive masks, biases, dropout on the
// attention weights and Xavier-uniform initialisation.
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {
namespace {

constexpr const char* kWhere = "MultiheadCrossAttention";
constexpr const char* kForward = "MultiheadCrossAttention::forward";

void check_heads_and_dropout(std::size_t d_model, std::size_t n_heads, float dropout) {
  const std::string where = kWhere;
  if (d_model == 0) throw std::invalid_argument(where + ": d_model must be at least 1");
  if (n_heads == 0) throw std::invalid_argument(where + ": n_heads must be at least 1");
  if (d_model % n_heads != 0)
    throw std::invalid_argument(where + ": d_model " + std::to_string(d_model) +
                                " is not divisible by n_heads " + std::to_string(n_heads));
  if (!(dropout >= 0.0f && dropout < 1.0f))  // also rejects NaN
    throw std::invalid_argument(where + ": dropout " + std::to_string(dropout) +
                                " is not in [0, 1)");
}

// "(2 or 1, 1, 4, 6)": the attn_mask shapes that broadcast over (B, H, T, S).
std::string attn_mask_shape(std::size_t B, std::size_t T, std::size_t S) {
  return "(" + std::to_string(B) + " or 1, 1, " + std::to_string(T) + ", " + std::to_string(S) +
         ")";
}

bool attn_mask_fits(const Tensor4& mask, std::size_t B, std::size_t T, std::size_t S) {
  return (mask.shape(0) == B || mask.shape(0) == 1) && mask.shape(1) == 1 && mask.shape(2) == T &&
         mask.shape(3) == S;
}

}  // namespace

// Shared with lab 07's efficient_forward (cross_attention.hpp): a position scheme's transform,
// checked to keep the heads' shapes.
void detail::apply_transform_qk(const char* where, const CrossAttentionOptions& options, Tensor4& q,
                                Tensor4& k) {
  if (!options.transform_qk) return;
  const auto q_shape = q.shape(), k_shape = k.shape();
  const std::string before = shape_of(q) + " and " + shape_of(k);
  options.transform_qk(q, k);
  if (q.shape() != q_shape || k.shape() != k_shape)
    throw std::invalid_argument(std::string(where) + ": transform_qk changed q and k from " +
                                before + " to " + shape_of(q) + " and " + shape_of(k) +
                                "; it must keep their shapes");
}

// Shared with lab 07's efficient_forward (cross_attention.hpp): the same checks, under its name.
void detail::check_cross_attention_inputs(const char* where_name, const Tensor3& query,
                                          const Tensor3& key, const Tensor3& value,
                                          std::size_t d_model,
                                          const CrossAttentionOptions& options) {
  const std::string where = where_name;
  for (const auto& [name, x] : {std::pair{"query", &query}, {"key", &key}, {"value", &value}})
    if (x->shape(2) != d_model)
      throw std::invalid_argument(where + ": " + name + " is " + shape_of(*x) + " but d_model is " +
                                  std::to_string(d_model));
  if (key.shape(0) != query.shape(0) || value.shape(0) != query.shape(0))
    throw std::invalid_argument(where + ": query is " + shape_of(query) + " but key is " +
                                shape_of(key) + " and value is " + shape_of(value) +
                                "; the batch sizes must match");
  if (value.shape(1) != key.shape(1))
    throw std::invalid_argument(where + ": key is " + shape_of(key) + " but value is " +
                                shape_of(value) + "; they need one row per key");
  const std::size_t B = query.shape(0), T = query.shape(1), S = key.shape(1);
  if (const auto& m = options.key_padding_mask; m && (m->shape(0) != B || m->shape(1) != S))
    throw std::invalid_argument(where + ": key_padding_mask is " + shape_of(*m) + " but key is " +
                                shape_of(key) + "; it must be (B, S) = (" + std::to_string(B) +
                                ", " + std::to_string(S) + ")");
  if (const auto& m = options.attn_mask; m && !attn_mask_fits(*m, B, T, S))
    throw std::invalid_argument(where + ": attn_mask is " + shape_of(*m) + " but query is " +
                                shape_of(query) + " and key is " + shape_of(key) +
                                "; it must be (B or 1, 1, T, S) = " + attn_mask_shape(B, T, S));
}

// ---- Block A: the weights ----------------------------------------------------------------------

MultiheadCrossAttention::MultiheadCrossAttention(std::size_t d_model, std::size_t n_heads,
                                                 std::uint64_t seed, bool bias, float dropout)
    : n_heads_(n_heads), dropout_(dropout), generator_(seed) {
  check_heads_and_dropout(d_model, n_heads, dropout);
  // Xavier-uniform: Var = a^2 / 3 = 2 / (fan_in + fan_out) keeps activations and gradients O(1).
  const float bound = std::sqrt(6.0f / static_cast<float>(d_model + d_model));
  std::uniform_real_distribution<float> uniform(-bound, bound);
  for (Tensor2* w : {&w_q_, &w_k_, &w_v_, &w_o_}) {
    *w = Tensor2({d_model, d_model});
    for (float& value : *w) value = uniform(generator_);
  }
  if (bias)
    for (std::optional<Tensor1>* b : {&b_q_, &b_k_, &b_v_, &b_o_}) *b = xt::zeros<float>({d_model});
  // generator_ goes on to drive dropout.
}

MultiheadCrossAttention::MultiheadCrossAttention(Tensor2 w_q, Tensor2 w_k, Tensor2 w_v, Tensor2 w_o,
                                                 std::optional<Tensor1> b_q,
                                                 std::optional<Tensor1> b_k,
                                                 std::optional<Tensor1> b_v,
                                                 std::optional<Tensor1> b_o, std::size_t n_heads,
                                                 float dropout, std::uint64_t dropout_seed)
    : w_q_(std::move(w_q)),
      w_k_(std::move(w_k)),
      w_v_(std::move(w_v)),
      w_o_(std::move(w_o)),
      b_q_(std::move(b_q)),
      b_k_(std::move(b_k)),
      b_v_(std::move(b_v)),
      b_o_(std::move(b_o)),
      n_heads_(n_heads),
      dropout_(dropout),
      generator_(dropout_seed) {
  const std::string where = kWhere;
  if (w_q_.shape(0) != w_q_.shape(1))
    throw std::invalid_argument(where + ": w_q is " + shape_of(w_q_) +
                                " but must be square (d_model, d_model)");
  for (const auto& [name, w] : {std::pair{"w_k", &w_k_}, {"w_v", &w_v_}, {"w_o", &w_o_}})
    if (w->shape() != w_q_.shape())
      throw std::invalid_argument(where + ": w_q is " + shape_of(w_q_) + " but " + name + " is " +
                                  shape_of(*w) + "; all four must be (d_model, d_model)");
  for (const auto& [name, b] :
       {std::pair{"b_q", &b_q_}, {"b_k", &b_k_}, {"b_v", &b_v_}, {"b_o", &b_o_}})
    if (*b && (*b)->shape(0) != w_q_.shape(0))
      throw std::invalid_argument(where + ": " + name + " is " + shape_of(**b) + " but w_q is " +
                                  shape_of(w_q_) + "; each bias must be (d_model)");
  check_heads_and_dropout(w_q_.shape(0), n_heads, dropout);
}

// ---- Block B: the masks ------------------------------------------------------------------------

// (T, S) -> (1, 1, T, S)
Tensor4 as_attn_mask(const Tensor2& mask) {
  return xt::reshape_view(mask, std::array<std::size_t, 4>{1, 1, mask.shape(0), mask.shape(1)});
}

// -> (B, T, S): true where key s is removed for query t of sequence b
BoolTensor3 removed_keys(const CrossAttentionOptions& options, std::size_t B, std::size_t T,
                         std::size_t S) {
  const auto& padding = options.key_padding_mask;  // (B, S)
  const auto& additive = options.attn_mask;        // (B or 1, 1, T, S)
  if (padding && (padding->shape(0) != B || padding->shape(1) != S))
    throw std::invalid_argument("removed_keys: key_padding_mask is " + shape_of(*padding) +
                                " but must be (B, S) = (" + std::to_string(B) + ", " +
                                std::to_string(S) + ")");
  if (additive && !attn_mask_fits(*additive, B, T, S))
    throw std::invalid_argument("removed_keys: attn_mask is " + shape_of(*additive) +
                                " but must be (B or 1, 1, T, S) = " + attn_mask_shape(B, T, S));

  BoolTensor3 removed = xt::zeros<bool>({B, T, S});
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t mb = additive && additive->shape(0) == 1 ? 0 : b;  // broadcast over B
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t s = 0; s < S; ++s)
        // kMaskedScore and -inf both mean "removed": read from the mask, never from a score.
        removed(b, t, s) =
            (padding && (*padding)(b, s)) || (additive && (*additive)(mb, 0, t, s) <= kMaskedScore);
  }
  return removed;
}

// ---- Block C: forward --------------------------------------------------------------------------

// query: (B, T, d_model), key and value: (B, S, d_model) -> output (B, T, d_model),
// weights (B, H, T, S)
AttentionOutput MultiheadCrossAttention::forward(const Tensor3& query, const Tensor3& key,
                                                 const Tensor3& value,
                                                 const CrossAttentionOptions& options) {
  detail::check_cross_attention_inputs(kForward, query, key, value, d_model(), options);
  const std::size_t B = query.shape(0), T = query.shape(1), S = key.shape(1), H = n_heads_;
  const BoolTensor3 removed = removed_keys(options, B, T, S);  // (B, T, S), Block B

  // 1. Project each role with its own input (queries from the decoder, keys and values from the
  //    encoder), then 2. split the columns into heads: lab 01's split_heads.
  Tensor4 q = split_heads(project(query, w_q_, b_q_), H);  // (B, H, T, d_head)
  Tensor4 k = split_heads(project(key, w_k_, b_k_), H);    // (B, H, S, d_head)
  Tensor4 v = split_heads(project(value, w_v_, b_v_), H);  // (B, H, S, d_head)

  // 3. A position scheme (e.g. RoPE) acts on per-head queries and keys, before the scores.
  detail::apply_transform_qk(kForward, options, q, k);

  const float scale = 1.0f / std::sqrt(static_cast<float>(d_head()));
  const bool drop = training_ && dropout_ > 0.0f;
  std::bernoulli_distribution dropped(dropout_);
  const float keep_scale = 1.0f / (1.0f - dropout_);  // keeps the expected weight unchanged
  constexpr float kRemoved = -std::numeric_limits<float>::infinity();

  Tensor4 context({B, H, T, d_head()});
  Tensor4 weights;  // (B, H, T, S), kept only if asked for: H · T · S floats per sequence
  if (options.need_weights) weights = Tensor4::from_shape({B, H, T, S});
  for (std::size_t b = 0; b < B; ++b) {
    // 4. One additive (T, S) table per sequence, shared by its heads: -inf where a key is removed
    //    (exp gives exactly 0), the attn_mask's value elsewhere. A fully masked row is left at 0
    //    so that the softmax stays finite (all -inf would be 0/0); its weights are zeroed below.
    const std::size_t mb = options.attn_mask && options.attn_mask->shape(0) == 1 ? 0 : b;
    Tensor2 additive = xt::zeros<float>({T, S});
    std::vector<bool> fully_masked(T, true);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t s = 0; s < S; ++s)
        if (!removed(b, t, s)) fully_masked[t] = false;
    for (std::size_t t = 0; t < T; ++t) {
      if (fully_masked[t]) continue;
      for (std::size_t s = 0; s < S; ++s)
        additive(t, s) = removed(b, t, s)    ? kRemoved
                         : options.attn_mask ? (*options.attn_mask)(mb, 0, t, s)
                                             : 0.0f;
    }

    for (std::size_t h = 0; h < H; ++h) {
      const Tensor2 q_bh = xt::view(q, b, h), k_bh = xt::view(k, b, h), v_bh = xt::view(v, b, h);
      // 5. Scores and masks, then lab 00's softmax over the keys.
      Tensor2 scores = xt::linalg::dot(q_bh, xt::transpose(k_bh)) * scale;  // (T, S)
      scores += additive;
      Tensor2 w = softmax(scores);  // (T, S)
      // 6. A query with no key to look at gets no weight and a zero context: never NaN.
      for (std::size_t t = 0; t < T; ++t)
        if (fully_masked[t]) xt::view(w, t) = 0.0f;
      // 7. Dropout, training mode only: zero with probability p, scale the rest by 1 / (1 - p).
      if (drop)
        for (float& weight : w) weight = dropped(generator_) ? 0.0f : weight * keep_scale;
      xt::view(context, b, h) = xt::linalg::dot(w, v_bh);     // (T, d_head)
      if (options.need_weights) xt::view(weights, b, h) = w;  // the dropped ones, as torch returns
    }
  }

  // 8. Concatenate the heads (lab 01's merge_heads) and mix them with W_O (+ b_o).
  Tensor3 output = project(merge_heads(context), w_o_, b_o_);  // (B, T, d_model)
  if (!options.need_weights) return {std::move(output), std::nullopt};
  return {std::move(output), std::move(weights)};
}

}  // namespace minimodel
