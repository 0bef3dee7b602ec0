// Lab 09: the backward pass of attention, by hand. Reference solution.
#include "minimodel/attention/backward.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/shapes.hpp"

namespace minimodel {

namespace {

template <class Real>
void require_same_shape(const char* where, const char* what, const Matrix<Real>& actual,
                        const char* of, const Matrix<Real>& expected) {
  if (actual.shape() != expected.shape())
    throw std::invalid_argument(std::string(where) + ": " + what + " is " + shape_of(actual) +
                                " but " + of + " is " + shape_of(expected) + "; they must match");
}

// mᵀ, copied by a plain loop: assigning xt::transpose(m) walks the view with xtensor's generic
// stepper, which was a quarter of lab 10's training.
template <class Real>
Matrix<Real> transposed(const Matrix<Real>& m) {
  const std::size_t rows = m.shape(0), cols = m.shape(1);
  Matrix<Real> t({cols, rows});
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t.data()[j * rows + i] = m.data()[i * cols + j];
  return t;
}

// The sum of each column: a bias's gradient is the sum of its output's gradient over the rows.
template <class Real>
Vector<Real> column_sums(const Matrix<Real>& m) {
  return xt::sum(m, {0});
}

template <class Real>
Matrix<Real> affine(const Matrix<Real>& x, const Matrix<Real>& w, const Vector<Real>& b) {
  Matrix<Real> y = xt::linalg::dot(x, w);
  y += xt::view(b, xt::newaxis(), xt::all());
  return y;
}

// "1e-07" rather than std::to_string's "0.000000".
template <class Real>
std::string number_text(Real value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

// ---- Block A: softmax and one head --------------------------------------------------------------

template <class Real>
Matrix<Real> softmax_backward(const Matrix<Real>& probs, const Matrix<Real>& d_probs) {
  require_same_shape("softmax_backward", "d_probs", d_probs, "probs", probs);
  // Each row's Jacobian is diag(p) − p pᵀ; times d_probs that is p ⊙ (d_probs − (d_probs · p)).
  const Matrix<Real> row_dot = xt::sum(d_probs * probs, {1}, xt::keep_dims);
  return probs * (d_probs - row_dot);
}

template <class Real>
Matrix<Real> attention_forward(const Matrix<Real>& q, const Matrix<Real>& k, const Matrix<Real>& v,
                               const std::optional<Matrix<Real>>& mask, AttentionTape<Real>& tape) {
  if (q.shape(1) != k.shape(1))
    throw std::invalid_argument("attention_forward: q is " + shape_of(q) + " but k is " +
                                shape_of(k) + "; their widths must match");
  if (k.shape(0) != v.shape(0))
    throw std::invalid_argument("attention_forward: k is " + shape_of(k) + " but v is " +
                                shape_of(v) + "; they must have the same length");
  if (mask && (mask->shape(0) != q.shape(0) || mask->shape(1) != k.shape(0)))
    throw std::invalid_argument("attention_forward: mask is " + shape_of(*mask) +
                                " but must be (T, S) = (" + std::to_string(q.shape(0)) + ", " +
                                std::to_string(k.shape(0)) + ")");
  const Real scale = Real(1) / std::sqrt(Real(q.shape(1)));
  Matrix<Real> scores = xt::linalg::dot(q, transposed(k));
  scores *= scale;
  if (mask) scores += *mask;
  // Stable: the largest exponent of a row is 0. Row statistics go into containers before use:
  // in xtensor 0.24 a keep_dims reduction inside a lazy expression gives wrong values (lab 04).
  const Matrix<Real> row_max = xt::amax(scores, {1}, xt::keep_dims);
  Matrix<Real> probs = xt::exp(scores - row_max);
  const Matrix<Real> row_sum = xt::sum(probs, {1}, xt::keep_dims);
  probs /= row_sum;
  tape.q = q;
  tape.k = k;
  tape.v = v;
  tape.probs = std::move(probs);
  return xt::linalg::dot(tape.probs, v);
}

template <class Real>
AttentionGrads<Real> attention_backward(const AttentionTape<Real>& tape,
                                        const Matrix<Real>& d_out) {
  if (d_out.shape(0) != tape.q.shape(0) || d_out.shape(1) != tape.v.shape(1))
    throw std::invalid_argument(
        "attention_backward: d_out is " + shape_of(d_out) + " but the forward's output was (" +
        std::to_string(tape.q.shape(0)) + ", " + std::to_string(tape.v.shape(1)) + ")");
  const Real scale = Real(1) / std::sqrt(Real(tape.q.shape(1)));
  AttentionGrads<Real> grads;
  grads.dv = xt::linalg::dot(transposed(tape.probs), d_out);
  const Matrix<Real> d_probs = xt::linalg::dot(d_out, transposed(tape.v));
  Matrix<Real> d_scores = softmax_backward(tape.probs, d_probs);
  d_scores *= scale;  // the scale sits between the scores and q kᵀ
  grads.dq = xt::linalg::dot(d_scores, tape.k);
  grads.dk = xt::linalg::dot(transposed(d_scores), tape.q);
  return grads;
}

// ---- Block B: multi-head attention -------------------------------------------------------------

template <class Real>
Matrix<Real> mha_forward(const MhaParams<Real>& params, const Matrix<Real>& x,
                         const std::optional<Matrix<Real>>& mask, MhaTape<Real>& tape) {
  const std::size_t d_model = params.w_q.shape(0), n_heads = params.n_heads;
  for (const Matrix<Real>* w : {&params.w_q, &params.w_k, &params.w_v, &params.w_o})
    if (w->shape(0) != d_model || w->shape(1) != d_model)
      throw std::invalid_argument("mha_forward: a weight is " + shape_of(*w) + " but W_Q is " +
                                  shape_of(params.w_q) + "; each must be (d_model, d_model)");
  for (const Vector<Real>* b : {&params.b_q, &params.b_k, &params.b_v, &params.b_o})
    if (b->shape(0) != d_model)
      throw std::invalid_argument("mha_forward: a bias is " + shape_of(*b) + " but W_Q is " +
                                  shape_of(params.w_q) + "; each must be (d_model)");
  if (n_heads == 0 || d_model % n_heads != 0)
    throw std::invalid_argument("mha_forward: n_heads " + std::to_string(n_heads) +
                                " does not divide d_model " + std::to_string(d_model));
  if (x.shape(1) != d_model)
    throw std::invalid_argument("mha_forward: x is " + shape_of(x) + " but W_Q is " +
                                shape_of(params.w_q) + "; x must be (T, d_model)");
  const std::size_t T = x.shape(0), d_head = d_model / n_heads;
  if (mask && (mask->shape(0) != T || mask->shape(1) != T))
    throw std::invalid_argument("mha_forward: mask is " + shape_of(*mask) + " but x is " +
                                shape_of(x) + "; the mask must be (T, T)");

  const Matrix<Real> q = affine(x, params.w_q, params.b_q);
  const Matrix<Real> k = affine(x, params.w_k, params.b_k);
  const Matrix<Real> v = affine(x, params.w_v, params.b_v);
  tape.x = x;
  tape.heads.assign(n_heads, {});
  tape.merged = Matrix<Real>({T, d_model});
  for (std::size_t h = 0; h < n_heads; ++h) {
    auto block = xt::range(h * d_head, (h + 1) * d_head);  // head h's columns
    xt::view(tape.merged, xt::all(), block) =
        attention_forward<Real>(xt::view(q, xt::all(), block), xt::view(k, xt::all(), block),
                                xt::view(v, xt::all(), block), mask, tape.heads[h]);
  }
  return affine(tape.merged, params.w_o, params.b_o);
}

template <class Real>
MhaGrads<Real> mha_backward(const MhaParams<Real>& params, const MhaTape<Real>& tape,
                            const Matrix<Real>& d_out) {
  require_same_shape("mha_backward", "d_out", d_out, "the forward's x", tape.x);
  const std::size_t T = tape.x.shape(0), d_model = tape.x.shape(1);
  if (params.n_heads != tape.heads.size() || params.w_o.shape(0) != d_model)
    throw std::invalid_argument("mha_backward: params have " + std::to_string(params.n_heads) +
                                " heads and W_O " + shape_of(params.w_o) + " but the tape holds " +
                                std::to_string(tape.heads.size()) + " heads and x " +
                                shape_of(tape.x) + "; pass the forward's parameters");
  const std::size_t d_head = d_model / params.n_heads;
  MhaGrads<Real> grads;
  grads.dw_o = xt::linalg::dot(transposed(tape.merged), d_out);
  grads.db_o = column_sums(d_out);
  const Matrix<Real> d_merged = xt::linalg::dot(d_out, transposed(params.w_o));

  Matrix<Real> dq({T, d_model}), dk({T, d_model}), dv({T, d_model});
  for (std::size_t h = 0; h < params.n_heads; ++h) {
    auto block = xt::range(h * d_head, (h + 1) * d_head);
    const AttentionGrads<Real> head =
        attention_backward<Real>(tape.heads[h], xt::view(d_merged, xt::all(), block));
    xt::view(dq, xt::all(), block) = head.dq;
    xt::view(dk, xt::all(), block) = head.dk;
    xt::view(dv, xt::all(), block) = head.dv;
  }
  const Matrix<Real> x_t = transposed(tape.x);
  grads.dw_q = xt::linalg::dot(x_t, dq);
  grads.dw_k = xt::linalg::dot(x_t, dk);
  grads.dw_v = xt::linalg::dot(x_t, dv);
  grads.db_q = column_sums(dq);
  grads.db_k = column_sums(dk);
  grads.db_v = column_sums(dv);
  // x feeds all three projections: its gradient is the sum of the three paths.
  grads.dx = xt::linalg::dot(dq, transposed(params.w_q));
  grads.dx += xt::linalg::dot(dk, transposed(params.w_k));
  grads.dx += xt::linalg::dot(dv, transposed(params.w_v));
  return grads;
}

// ---- Block C: LayerNorm and the residual block --------------------------------------------------

template <class Real>
Matrix<Real> layer_norm_forward(const Matrix<Real>& x, LayerNormTape<Real>& tape, Real eps) {
  if (x.shape(1) == 0)
    throw std::invalid_argument("layer_norm_forward: x is " + shape_of(x) +
                                "; d_model must be positive");
  if (!(eps > 0) || !std::isfinite(eps))
    throw std::invalid_argument("layer_norm_forward: eps is " + number_text(eps) +
                                "; it must be positive and finite");
  const Matrix<Real> mean = xt::mean(x, {1}, xt::keep_dims);  // a container, as in Block A
  const Matrix<Real> centered = x - mean;
  const Vector<Real> variance = xt::mean(centered * centered, {1});
  tape.inv_std = Real(1) / xt::sqrt(variance + eps);
  tape.normalized = centered * xt::view(tape.inv_std, xt::all(), xt::newaxis());
  return tape.normalized;
}

template <class Real>
Matrix<Real> layer_norm_backward(const LayerNormTape<Real>& tape, const Matrix<Real>& d_y) {
  require_same_shape("layer_norm_backward", "d_y", d_y, "the forward's x", tape.normalized);
  // The mean and the variance depend on every element of the row: these two means are the
  // gradient flowing back through them.
  const Matrix<Real> mean_dy = xt::mean(d_y, {1}, xt::keep_dims);
  const Matrix<Real> mean_dy_xhat = xt::mean(d_y * tape.normalized, {1}, xt::keep_dims);
  return xt::view(tape.inv_std, xt::all(), xt::newaxis()) *
         (d_y - mean_dy - tape.normalized * mean_dy_xhat);
}

template <class Real>
Matrix<Real> block_forward(const MhaParams<Real>& params, Norm norm, const Matrix<Real>& x,
                           const std::optional<Matrix<Real>>& mask, BlockTape<Real>& tape) {
  tape.norm = norm;
  if (norm == Norm::post_ln) {
    const Matrix<Real> sum = x + mha_forward(params, x, mask, tape.mha);
    return layer_norm_forward(sum, tape.ln);
  }
  return x + mha_forward(params, layer_norm_forward(x, tape.ln), mask, tape.mha);
}

template <class Real>
MhaGrads<Real> block_backward(const MhaParams<Real>& params, const BlockTape<Real>& tape,
                              const Matrix<Real>& d_y) {
  require_same_shape("block_backward", "d_y", d_y, "the forward's x", tape.mha.x);
  if (tape.norm == Norm::post_ln) {
    const Matrix<Real> d_sum = layer_norm_backward(tape.ln, d_y);
    MhaGrads<Real> grads = mha_backward(params, tape.mha, d_sum);
    grads.dx += d_sum;  // the residual path
    return grads;
  }
  MhaGrads<Real> grads = mha_backward(params, tape.mha, d_y);
  grads.dx = d_y + layer_norm_backward(tape.ln, grads.dx);
  return grads;
}

MINIMODEL_LAB09_INSTANTIATE(float)
MINIMODEL_LAB09_INSTANTIATE(double)

}  // namespace minimodel
