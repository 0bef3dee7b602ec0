// Lab 09: the backward pass of attention, checked three ways: against central finite differences
// of the forward in double precision, against PyTorch's autograd on float32 fixtures, and against
// invariants (a softmax gradient row sums to zero, the key bias gets no gradient, a LayerNorm
// gradient is orthogonal to shifts and scalings of its row). The forwards also match labs 00, 01
// and 04.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/attention_block.hpp"
#include "minimodel/attention/backward.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::Fixture;
using testing::kTorchTolerance;
using testing::random_tokens;
using testing::throws_invalid_argument;

// ---- Finite differences -------------------------------------------------------------------------
//
// Every gradient check uses the loss L = sum(y ⊙ R) for a fixed random R, so dL/dy = R, and
// compares the analytic gradient of each input with central differences
// (L(θ + h) − L(θ − h)) / 2h in double precision. With h = 1e-5 the truncation error is about
// h²/6 · |L'''| ≈ 1e-10 and the rounding error about 1e-16 · |L| / h ≈ 1e-10, so a correct gradient
// agrees to ~1e-9 of its scale, max(1, max |numeric|). 1e-6 leaves 1000x headroom, while a wrong
// factor, a missing term or a transposed product errs by far more than 1e-3 (and LayerNorm's eps
// forgotten in the backward, an effect of eps / var ≈ 1e-5, still fails).
constexpr double kStep = 1e-5;
constexpr double kFiniteDifferenceTolerance = 1e-6;

using MatrixD = Matrix<double>;
using VectorD = Vector<double>;

MatrixD random_matrix(std::size_t rows, std::size_t cols, int seed, double scale = 1.0) {
  return xt::view(xt::xtensor<double, 3>(random_tokens(1, rows, cols, seed)), 0) * scale;
}

VectorD random_vector(std::size_t size, int seed, double scale = 1.0) {
  return xt::view(random_matrix(1, size, seed, scale), 0);
}

// The numeric gradient of loss() with respect to every element of `param`, which it perturbs in
// place and restores.
template <class Tensor>
Tensor numeric_gradient(Tensor& param, const std::function<double()>& loss) {
  Tensor grad = xt::zeros_like(param);
  for (std::size_t i = 0; i < param.size(); ++i) {
    const double saved = param.flat(i);
    param.flat(i) = saved + kStep;
    const double up = loss();
    param.flat(i) = saved - kStep;
    const double down = loss();
    param.flat(i) = saved;
    grad.flat(i) = (up - down) / (2 * kStep);
  }
  return grad;
}

// all_close at the gradient's scale, max(1, max |numeric|), naming the gradient.
template <class A, class E>
::testing::AssertionResult close_at_scale(const std::string& what, const A& analytic,
                                          const E& numeric, double tolerance) {
  const xt::xarray<double> a = analytic, n = numeric;
  const double scale = std::max(1.0, double(xt::amax(xt::abs(n))()));
  return all_close(a / scale, n / scale, tolerance)
         << " in " << what << " (at scale " << scale << ")";
}

double weighted_sum(const MatrixD& y, const MatrixD& r) { return xt::sum(y * r)(); }

// (T, T) causal mask in the element type of the lab: 0 on and below the diagonal.
template <class Real>
Matrix<Real> causal(std::size_t T) {
  return xt::cast<Real>(causal_mask(T));
}

MhaParams<double> random_params(std::size_t d_model, std::size_t n_heads, int seed) {
  const double scale = 1.0 / std::sqrt(double(d_model));
  return {random_matrix(d_model, d_model, seed, scale),
          random_matrix(d_model, d_model, seed + 1, scale),
          random_matrix(d_model, d_model, seed + 2, scale),
          random_matrix(d_model, d_model, seed + 3, scale),
          random_vector(d_model, seed + 4, 0.5),
          random_vector(d_model, seed + 5, 0.5),
          random_vector(d_model, seed + 6, 0.5),
          random_vector(d_model, seed + 7, 0.5),
          n_heads};
}

// Lab 01's layer as MhaParams: its weights, zero biases.
MhaParams<float> with_zero_biases(const MultiHeadAttention& layer) {
  const Vector<float> zero = xt::zeros<float>({layer.d_model()});
  return {layer.w_q(), layer.w_k(), layer.w_v(), layer.w_o(),    zero,
          zero,        zero,        zero,        layer.n_heads()};
}

// Checks every gradient of MhaGrads against finite differences of `forward` (x -> y). The
// backward runs last, on the tape of one more forward after the many of the finite differences:
// a forward must replace what its tape held, not add to it.
void expect_gradients_match_finite_differences(
    MhaParams<double>& params, MatrixD& x, const std::function<MatrixD()>& forward,
    const std::function<MhaGrads<double>(const MatrixD&)>& backward) {
  const MatrixD r = random_matrix(x.shape(0), x.shape(1), 99);
  const auto loss = [&] { return weighted_sum(forward(), r); };
  const MatrixD numeric_x = numeric_gradient(x, loss);
  std::vector<MatrixD> numeric_w;
  for (MatrixD* w : {&params.w_q, &params.w_k, &params.w_v, &params.w_o})
    numeric_w.push_back(numeric_gradient(*w, loss));
  std::vector<VectorD> numeric_b;
  for (VectorD* b : {&params.b_q, &params.b_k, &params.b_v, &params.b_o})
    numeric_b.push_back(numeric_gradient(*b, loss));
  forward();
  const MhaGrads<double> g = backward(r);
  EXPECT_TRUE(close_at_scale("dx", g.dx, numeric_x, kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("dw_q", g.dw_q, numeric_w[0], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("dw_k", g.dw_k, numeric_w[1], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("dw_v", g.dw_v, numeric_w[2], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("dw_o", g.dw_o, numeric_w[3], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("db_q", g.db_q, numeric_b[0], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("db_k", g.db_k, numeric_b[1], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("db_v", g.db_v, numeric_b[2], kFiniteDifferenceTolerance));
  EXPECT_TRUE(close_at_scale("db_o", g.db_o, numeric_b[3], kFiniteDifferenceTolerance));
}

// ---- PyTorch autograd ---------------------------------------------------------------------------
//
// Torch ran in float64 on the same float32 inputs and its gradients were rounded to float32. Ours
// run in float32 through a few matrix products of width ≤ 8, each adding a few units in the last
// place (6e-8) of values up to ~10: so kTorchTolerance (support/fixtures.hpp) is applied to the
// scale max(1, max |expected|) here, where it leaves ~20x headroom.

MhaParams<float> fixture_params(const Fixture& fixture) {
  return {fixture.array<2>("w_q"),
          fixture.array<2>("w_k"),
          fixture.array<2>("w_v"),
          fixture.array<2>("w_o"),
          fixture.array<1>("b_q"),
          fixture.array<1>("b_k"),
          fixture.array<1>("b_v"),
          fixture.array<1>("b_o"),
          fixture.meta().at("n_heads").get<std::size_t>()};
}

void expect_grads_match_fixture(const MhaGrads<float>& grads, const Fixture& fixture) {
  EXPECT_TRUE(close_at_scale("dx", grads.dx, fixture.array<2>("dx"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dw_q", grads.dw_q, fixture.array<2>("dw_q"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dw_k", grads.dw_k, fixture.array<2>("dw_k"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dw_v", grads.dw_v, fixture.array<2>("dw_v"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dw_o", grads.dw_o, fixture.array<2>("dw_o"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("db_q", grads.db_q, fixture.array<1>("db_q"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("db_k", grads.db_k, fixture.array<1>("db_k"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("db_v", grads.db_v, fixture.array<1>("db_v"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("db_o", grads.db_o, fixture.array<1>("db_o"), kTorchTolerance));
}

// ---- Block A: softmax and one head --------------------------------------------------------------

MatrixD softmax_rows(const MatrixD& scores) {
  const MatrixD row_max = xt::amax(scores, {1}, xt::keep_dims);  // containers: see lab 04
  const MatrixD e = xt::exp(scores - row_max);
  const MatrixD row_sum = xt::sum(e, {1}, xt::keep_dims);
  return e / row_sum;
}

TEST(SoftmaxBackward, EqualsTheFullJacobianTimesTheGradient) {
  const MatrixD probs = softmax_rows(random_matrix(3, 5, 1));
  const MatrixD d_probs = random_matrix(3, 5, 2);
  MatrixD expected = xt::zeros<double>({3, 5});
  for (std::size_t t = 0; t < 3; ++t)  // row t's Jacobian: dp_i/ds_j = p_i (δ_ij − p_j)
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 5; ++j)
        expected(t, j) += d_probs(t, i) * probs(t, i) * ((i == j) - probs(t, j));
  // The same few products summed in another order: they differ by rounding, ~1e-16 of the values
  // (up to ~50 here).
  EXPECT_TRUE(all_close(softmax_backward(probs, d_probs), expected, 1e-12));
}

TEST(SoftmaxBackward, MatchesFiniteDifferences) {
  MatrixD scores = random_matrix(4, 6, 3, 2.0);
  const MatrixD r = random_matrix(4, 6, 4);
  const MatrixD analytic = softmax_backward<double>(softmax_rows(scores), r);
  const MatrixD numeric =
      numeric_gradient(scores, [&] { return weighted_sum(softmax_rows(scores), r); });
  EXPECT_TRUE(close_at_scale("d_scores", analytic, numeric, kFiniteDifferenceTolerance));
}

TEST(SoftmaxBackward, EveryRowSumsToZero) {
  // Adding a constant to a row leaves the softmax unchanged, so the gradient has no component
  // along (1, …, 1).
  const MatrixD d_scores =
      softmax_backward<double>(softmax_rows(random_matrix(4, 6, 5, 3.0)), random_matrix(4, 6, 6));
  EXPECT_TRUE(all_close(xt::sum(d_scores, {1}), xt::zeros<double>({4}), 1e-15));
}

TEST(SoftmaxBackward, RejectsShapesThatDiffer) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        softmax_backward<float>(Matrix<float>({3, 5}), Matrix<float>({3, 4}));
      },
      {"(3, 4)", "(3, 5)"}));
}

TEST(AttentionForward, MatchesLab00) {
  const Tensor2 q = xt::view(random_tokens(1, 5, 4, 7), 0);
  const Tensor2 k = xt::view(random_tokens(1, 7, 4, 8), 0);
  const Tensor2 v = xt::view(random_tokens(1, 7, 3, 9), 0);
  Tensor2 mask = xt::zeros<float>({5, 7});
  mask(0, 6) = mask(2, 1) = kMaskedScore;
  AttentionTape<float> tape;
  const Tensor2 out = attention_forward<float>(q, k, v, mask, tape);
  const AttentionResult expected = single_head_attention(q, k, v, mask);
  EXPECT_TRUE(all_close(out, expected.output, 1e-6));
  EXPECT_TRUE(all_close(tape.probs, expected.weights, 1e-6));
}

TEST(AttentionBackward, MatchesFiniteDifferences) {
  // T 4 queries, S 6 keys, d_head 5, d_v 3, with two scores masked.
  MatrixD q = random_matrix(4, 5, 10), k = random_matrix(6, 5, 11), v = random_matrix(6, 3, 12);
  MatrixD mask = xt::zeros<double>({4, 6});
  mask(0, 5) = mask(3, 2) = kMaskedScore;
  const MatrixD r = random_matrix(4, 3, 13);
  AttentionTape<double> tape;
  const auto loss = [&] { return weighted_sum(attention_forward<double>(q, k, v, mask, tape), r); };
  loss();
  const AttentionGrads<double> grads = attention_backward(tape, r);
  EXPECT_TRUE(
      close_at_scale("dq", grads.dq, numeric_gradient(q, loss), kFiniteDifferenceTolerance));
  EXPECT_TRUE(
      close_at_scale("dk", grads.dk, numeric_gradient(k, loss), kFiniteDifferenceTolerance));
  EXPECT_TRUE(
      close_at_scale("dv", grads.dv, numeric_gradient(v, loss), kFiniteDifferenceTolerance));
}

TEST(AttentionBackward, AKeyNoQuerySeesGetsNoGradient) {
  // Key 2 is masked for every query: its probability is 0 everywhere, so nothing flows to it.
  const MatrixD q = random_matrix(3, 4, 14), k = random_matrix(5, 4, 15),
                v = random_matrix(5, 4, 16);
  MatrixD mask = xt::zeros<double>({3, 5});
  xt::view(mask, xt::all(), 2) = kMaskedScore;
  AttentionTape<double> tape;
  attention_forward<double>(q, k, v, mask, tape);
  const AttentionGrads<double> grads = attention_backward<double>(tape, random_matrix(3, 4, 17));
  EXPECT_TRUE(all_close(xt::view(grads.dk, 2), xt::zeros<double>({4}), 0.0));
  EXPECT_TRUE(all_close(xt::view(grads.dv, 2), xt::zeros<double>({4}), 0.0));
  EXPECT_GT(xt::amax(xt::abs(xt::view(grads.dk, 1)))(), 1e-3) << "the other keys do get gradient";
}

TEST(AttentionBackward, MatchesTorchAutograd) {
  const Fixture fixture("backward_attention");
  AttentionTape<float> tape;
  const Matrix<float> out =
      attention_forward<float>(fixture.array<2>("q"), fixture.array<2>("k"), fixture.array<2>("v"),
                               fixture.array<2>("mask"), tape);
  EXPECT_TRUE(close_at_scale("out", out, fixture.array<2>("out"), kTorchTolerance));
  const AttentionGrads<float> grads = attention_backward(tape, fixture.array<2>("d_out"));
  EXPECT_TRUE(close_at_scale("dq", grads.dq, fixture.array<2>("dq"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dk", grads.dk, fixture.array<2>("dk"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale("dv", grads.dv, fixture.array<2>("dv"), kTorchTolerance));
}

TEST(AttentionBackward, RejectsADOutOfTheWrongShape) {
  AttentionTape<float> tape;
  attention_forward<float>(Matrix<float>({4, 2}), Matrix<float>({6, 2}), Matrix<float>({6, 3}),
                           std::nullopt, tape);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        attention_backward(tape, Matrix<float>({4, 2}));
      },
      {"(4, 2)", "(4, 3)"}));
}

// ---- Block B: multi-head attention -------------------------------------------------------------

TEST(MhaForward, MatchesLab01WithZeroBiases) {
  const MultiHeadAttention lab01(8, 2, 21);
  const MhaParams<float> params = with_zero_biases(lab01);
  const Tensor2 x = xt::view(random_tokens(1, 5, 8, 22), 0);
  MhaTape<float> tape;
  MultiHeadAttention layer = lab01;
  EXPECT_TRUE(all_close(mha_forward<float>(params, x, causal_mask(5), tape),
                        layer.forward(x, causal_mask(5)), 1e-6));
  for (std::size_t h = 0; h < 2; ++h)
    EXPECT_TRUE(all_close(tape.heads[h].probs, xt::view(layer.attention_weights(), 0, h), 1e-6))
        << "head " << h;
}

TEST(MhaBackward, MatchesFiniteDifferencesForTheInputAndEveryParameter) {
  MhaParams<double> params = random_params(8, 2, 30);
  MatrixD x = random_matrix(5, 8, 40);
  const MatrixD mask = causal<double>(5);
  MhaTape<double> tape;
  const auto forward = [&] { return mha_forward(params, x, std::optional(mask), tape); };
  expect_gradients_match_finite_differences(
      params, x, forward, [&](const MatrixD& r) { return mha_backward(params, tape, r); });
}

TEST(MhaBackward, TheKeyBiasGetsNoGradient) {
  // q · (k_j + b_K) = q · k_j + q · b_K adds the same number to every score of a row, which the
  // softmax ignores: db_K is zero up to rounding. In float32 the sums of ~T·d_model terms of size
  // ~1 leave ~1e-6, far below the query bias's gradient of order 1.
  const MultiHeadAttention lab01(16, 4, 50);
  MhaParams<float> params{lab01.w_q(),
                          lab01.w_k(),
                          lab01.w_v(),
                          lab01.w_o(),
                          Vector<float>(xt::view(random_tokens(1, 1, 16, 51), 0, 0)),
                          Vector<float>(xt::view(random_tokens(1, 1, 16, 52), 0, 0)),
                          Vector<float>(xt::view(random_tokens(1, 1, 16, 53), 0, 0)),
                          Vector<float>(xt::view(random_tokens(1, 1, 16, 54), 0, 0)),
                          4};
  const Tensor2 x = xt::view(random_tokens(1, 9, 16, 55), 0);
  MhaTape<float> tape;
  mha_forward<float>(params, x, causal_mask(9), tape);
  const MhaGrads<float> grads =
      mha_backward<float>(params, tape, xt::view(random_tokens(1, 9, 16, 56), 0));
  EXPECT_LT(xt::amax(xt::abs(grads.db_k))(), 1e-5);
  EXPECT_GT(xt::amax(xt::abs(grads.db_q))(), 1e-2) << "the query bias does get gradient";
}

TEST(MhaBackward, MatchesTorchAutograd) {
  const Fixture fixture("backward_mha");
  const MhaParams<float> params = fixture_params(fixture);
  const Matrix<float> x = fixture.array<2>("x");
  MhaTape<float> tape;
  const Matrix<float> y = mha_forward<float>(params, x, causal_mask(x.shape(0)), tape);
  EXPECT_TRUE(close_at_scale("y", y, fixture.array<2>("y"), kTorchTolerance));
  expect_grads_match_fixture(mha_backward(params, tape, fixture.array<2>("d_out")), fixture);
}

TEST(MhaForward, RejectsWeightsBiasesInputsAndMasksOfTheWrongShape) {
  const MhaParams<float> good{
      xt::zeros<float>({8, 8}), xt::zeros<float>({8, 8}), xt::zeros<float>({8, 8}),
      xt::zeros<float>({8, 8}), xt::zeros<float>({8}),    xt::zeros<float>({8}),
      xt::zeros<float>({8}),    xt::zeros<float>({8}),    2};
  const Matrix<float> x = xt::zeros<float>({5, 8});
  MhaTape<float> tape;
  MhaParams<float> bad = good;
  bad.w_v = xt::zeros<float>({8, 6});
  EXPECT_TRUE(throws_invalid_argument([&] { mha_forward<float>(bad, x, std::nullopt, tape); },
                                      {"(8, 6)", "(8, 8)"}));
  bad = good;
  bad.b_k = xt::zeros<float>({6});
  EXPECT_TRUE(throws_invalid_argument([&] { mha_forward<float>(bad, x, std::nullopt, tape); },
                                      {"(6)", "(8, 8)"}));
  bad = good;
  bad.n_heads = 3;
  EXPECT_TRUE(
      throws_invalid_argument([&] { mha_forward<float>(bad, x, std::nullopt, tape); }, {"3", "8"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        mha_forward<float>(good, Matrix<float>({5, 6}), std::nullopt, tape);
      },
      {"(5, 6)", "(8, 8)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        mha_forward<float>(good, x, Matrix<float>({4, 4}), tape);
      },
      {"(4, 4)", "(5, 8)"}));
}

TEST(MhaBackward, RejectsADOutOrParametersThatDoNotMatchTheForward) {
  const MultiHeadAttention lab01(8, 2, 57);
  const MhaParams<float> params = with_zero_biases(lab01);
  MhaTape<float> tape;
  mha_forward<float>(params, xt::zeros<float>({5, 8}), std::nullopt, tape);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        mha_backward<float>(params, tape, Matrix<float>({4, 8}));
      },
      {"(4, 8)", "(5, 8)"}));
  MhaParams<float> four_heads = params;  // the tape holds 2 heads: reading 4 would run past it
  four_heads.n_heads = 4;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        mha_backward<float>(four_heads, tape, Matrix<float>({5, 8}));
      },
      {"4 heads", "2 heads"}));
}

// ---- Block C: LayerNorm and the residual block --------------------------------------------------

TEST(LayerNormForward, MatchesLab04) {
  const Tensor3 x = random_tokens(1, 5, 8, 60) * 3.0f + 1.0f;
  LayerNormTape<float> tape;
  const Matrix<float> y = layer_norm_forward<float>(xt::view(x, 0), tape);
  EXPECT_TRUE(all_close(y, xt::view(layer_norm(x), 0), 1e-6));
}

TEST(LayerNormBackward, MatchesFiniteDifferences) {
  MatrixD x = random_matrix(4, 8, 61, 2.0) + 0.5;
  const MatrixD r = random_matrix(4, 8, 62);
  LayerNormTape<double> tape;
  const auto loss = [&] { return weighted_sum(layer_norm_forward(x, tape), r); };
  loss();
  const MatrixD analytic = layer_norm_backward(tape, r);
  EXPECT_TRUE(
      close_at_scale("dx", analytic, numeric_gradient(x, loss), kFiniteDifferenceTolerance));
}

TEST(LayerNormBackward, IsOrthogonalToShiftsAndScalingsOfTheRow) {
  // Adding a constant to a row leaves its normalised row unchanged, so the gradient is orthogonal
  // to (1, …, 1). Scaling the row changes it only through eps: dx · x̂ is not 0 but exactly
  // inv_std · (dy · x̂) · eps · inv_std², about 1e-7 here; a backward that dropped eps, or the
  // mean(dy ⊙ x̂) term, misses it by far more than 1e-12.
  const double eps = 1e-5;
  LayerNormTape<double> tape;
  layer_norm_forward<double>(random_matrix(4, 8, 63, 5.0), tape, eps);
  const MatrixD dy = random_matrix(4, 8, 64);
  const MatrixD dx = layer_norm_backward<double>(tape, dy);
  EXPECT_TRUE(all_close(xt::sum(dx, {1}), xt::zeros<double>({4}), 1e-14));
  const VectorD along_x = xt::sum(dx * tape.normalized, {1});
  const VectorD expected = xt::pow(tape.inv_std, 3) * eps * xt::sum(dy * tape.normalized, {1});
  EXPECT_TRUE(all_close(along_x, expected, 1e-12));
}

TEST(LayerNormForward, RejectsAnEmptyRowAndABadEps) {
  LayerNormTape<float> tape;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer_norm_forward<float>(Matrix<float>({3, 0}), tape);
      },
      {"(3, 0)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer_norm_forward<float>(xt::ones<float>({3, 4}), tape, 0.0f);
      },
      {"eps"}));
}

TEST(BlockForward, MatchesLab04PostLnAndPreLn) {
  const MultiHeadAttention lab01(8, 2, 70);
  const MhaParams<float> params = with_zero_biases(lab01);
  const Tensor3 x = random_tokens(1, 5, 8, 71);
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
    BlockTape<float> tape;
    const Matrix<float> y =
        block_forward<float>(params, norm, xt::view(x, 0), causal_mask(5), tape);
    const Tensor3 expected =
        mha_block(x, lab01.w_q(), lab01.w_k(), lab01.w_v(), lab01.w_o(), 2, norm, causal_mask(5));
    EXPECT_TRUE(all_close(y, xt::view(expected, 0), 1e-5))
        << (norm == Norm::post_ln ? "post-LN" : "pre-LN");
  }
}

TEST(BlockBackward, MatchesFiniteDifferencesPostLnAndPreLn) {
  for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
    SCOPED_TRACE(norm == Norm::post_ln ? "post-LN" : "pre-LN");
    MhaParams<double> params = random_params(8, 2, 80);
    MatrixD x = random_matrix(5, 8, 90);
    const MatrixD mask = causal<double>(5);
    BlockTape<double> tape;
    const auto forward = [&] { return block_forward(params, norm, x, std::optional(mask), tape); };
    expect_gradients_match_finite_differences(
        params, x, forward, [&](const MatrixD& r) { return block_backward(params, tape, r); });
  }
}

TEST(BlockBackward, MatchesTorchAutogradPostLnAndPreLn) {
  for (const std::string name : {"backward_block_post_ln", "backward_block_pre_ln"}) {
    SCOPED_TRACE("fixture " + name);
    const Fixture fixture(name);
    const MhaParams<float> params = fixture_params(fixture);
    const Norm norm = fixture.meta().at("norm") == "post_ln" ? Norm::post_ln : Norm::pre_ln;
    const Matrix<float> x = fixture.array<2>("x");
    BlockTape<float> tape;
    const Matrix<float> y = block_forward<float>(params, norm, x, causal_mask(x.shape(0)), tape);
    EXPECT_TRUE(close_at_scale("y", y, fixture.array<2>("y"), kTorchTolerance));
    expect_grads_match_fixture(block_backward(params, tape, fixture.array<2>("d_out")), fixture);
  }
}

TEST(BlockBackward, RejectsADYOfTheWrongShape) {
  const MultiHeadAttention lab01(8, 2, 72);
  const MhaParams<float> params = with_zero_biases(lab01);
  BlockTape<float> tape;
  block_forward<float>(params, Norm::pre_ln, xt::ones<float>({5, 8}), std::nullopt, tape);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        block_backward<float>(params, tape, Matrix<float>({5, 4}));
      },
      {"(5, 4)", "(5, 8)"}));
}

}  // namespace
}  // namespace minimodel
