// Lab 09 verify, in the order of the blocks: one head's backward and the multi-head layer's
// backward on the toy sentence agree with central finite differences in double precision; the key
// bias gets no gradient; the post-LN and pre-LN blocks' backward agree with finite differences.
// Then two measurements, printed and kept in the manifest but never checked beyond their sign:
// how the softmax saturates without the 1/sqrt(d) scale as d grows (saturation.png), and how the
// gradient's norm changes through 8 post-LN or pre-LN blocks (gradient_flow.png).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/backward.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;
using minimodel::Matrix;
using minimodel::MhaGrads;
using minimodel::MhaParams;
using minimodel::Norm;
using minimodel::Vector;

namespace {

using MatrixD = Matrix<double>;

// Central differences in double with h = 1e-5 agree with a correct gradient to ~1e-9 of its scale
// (the lab 09 tests' reasoning); 1e-6 leaves 1000x headroom. Each tensor is probed at
// kProbes entries drawn at random, enough to catch a wrong formula, few enough for an -O0 build.
constexpr double kStep = 1e-5;
constexpr double kFiniteDifferenceTolerance = 1e-6;
constexpr std::size_t kProbes = 24;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
// The key bias's gradient is zero up to float32 rounding of sums of T · d_model terms of size ~1;
// the query bias's is of order 1. 1e-5 of it separates "zero up to rounding" from "not zero".
constexpr double kKeyBiasRatio = 1e-5;

const std::vector<std::size_t> kSaturationWidths = {4, 16, 64, 256, 1024, 4096, 16384};
constexpr std::size_t kSaturationT = 32, kSaturationTrials = 8;
constexpr std::size_t kBlocks = 8;

// The toy layer of labs 01 and 04 (lab 01's seeded weights), with biases drawn from N(0, 0.25).
MhaParams<float> toy_params(std::uint64_t seed) {
  const minimodel::MultiHeadAttention layer(kDModel, kHeads, seed);
  xt::random::seed(seed + 1);
  const auto bias = [] { return Vector<float>(0.5f * xt::random::randn<float>({kDModel})); };
  return {layer.w_q(), layer.w_k(), layer.w_v(), layer.w_o(), bias(),
          bias(),      bias(),      bias(),      kHeads};
}

MhaParams<double> in_double(const MhaParams<float>& p) {
  return {xt::cast<double>(p.w_q), xt::cast<double>(p.w_k), xt::cast<double>(p.w_v),
          xt::cast<double>(p.w_o), xt::cast<double>(p.b_q), xt::cast<double>(p.b_k),
          xt::cast<double>(p.b_v), xt::cast<double>(p.b_o), p.n_heads};
}

// The largest |analytic − numeric| over kProbes random entries of `param`, divided by
// max(1, max |numeric|) over those entries. `loss` reads `param`, which is perturbed in place and
// restored.
template <class Tensor, class Grad>
double finite_difference_error(Tensor& param, const Grad& analytic,
                               const std::function<double()>& loss, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, param.size() - 1);
  double worst = 0.0, scale = 1.0;
  for (std::size_t probe = 0; probe < kProbes; ++probe) {
    const std::size_t i = pick(rng);
    const double saved = param.flat(i);
    param.flat(i) = saved + kStep;
    const double up = loss();
    param.flat(i) = saved - kStep;
    const double down = loss();
    param.flat(i) = saved;
    const double numeric = (up - down) / (2 * kStep);
    const double diff = std::abs(analytic.flat(i) - numeric);
    worst = std::max(worst, std::isnan(diff) ? kInfinity : diff);  // std::max would drop a NaN
    scale = std::max(scale, std::abs(numeric));
  }
  return worst / scale;
}

// The worst finite-difference error over x and every parameter of a layer whose forward is
// `forward` and whose gradients for dL/dy = r are `grads`.
double layer_error(MhaParams<double>& p, MatrixD& x, const MatrixD& r, const MhaGrads<double>& g,
                   const std::function<MatrixD()>& forward) {
  std::mt19937_64 rng(kSeed);
  const auto loss = [&] { return double(xt::sum(forward() * r)()); };
  double worst = finite_difference_error(x, g.dx, loss, rng);
  worst = std::max(worst, finite_difference_error(p.w_q, g.dw_q, loss, rng));
  worst = std::max(worst, finite_difference_error(p.w_k, g.dw_k, loss, rng));
  worst = std::max(worst, finite_difference_error(p.w_v, g.dw_v, loss, rng));
  worst = std::max(worst, finite_difference_error(p.w_o, g.dw_o, loss, rng));
  worst = std::max(worst, finite_difference_error(p.b_q, g.db_q, loss, rng));
  worst = std::max(worst, finite_difference_error(p.b_k, g.db_k, loss, rng));
  worst = std::max(worst, finite_difference_error(p.b_v, g.db_v, loss, rng));
  return std::max(worst, finite_difference_error(p.b_o, g.db_o, loss, rng));
}

double frobenius(const MatrixD& m) { return std::sqrt(double(xt::sum(m * m)())); }

// What `workbook diff 09` compares, in float32 (the precision lab 10 trains in): every gradient of
// `g` as "<function>_<gradient>", of Block `block`. kTorchTolerance of tests/lab09_test.cpp:
// float32 agrees with PyTorch to 1e-5 of max(1, max |value|), and these values are below 10.
constexpr double kRecordTolerance = 1e-5;

void record_grads(workbench::VerifyRun& run, const std::string& function, const MhaGrads<float>& g,
                  const std::string& block) {
  const std::pair<const char*, const Matrix<float>*> weights[] = {
      {"dx", &g.dx}, {"dw_q", &g.dw_q}, {"dw_k", &g.dw_k}, {"dw_v", &g.dw_v}, {"dw_o", &g.dw_o}};
  for (const auto& [name, value] : weights)
    run.record(function + "_" + name, *value, kRecordTolerance, block);
  const std::pair<const char*, const Vector<float>*> biases[] = {
      {"db_q", &g.db_q}, {"db_k", &g.db_k}, {"db_v", &g.db_v}, {"db_o", &g.db_o}};
  for (const auto& [name, value] : biases)
    run.record(function + "_" + name, *value, kRecordTolerance, block);
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const nlohmann::json config = lab_setup::toy_config(
      {{"finite_difference_step", kStep},
       {"probes_per_tensor", kProbes},
       {"saturation",
        {{"widths", kSaturationWidths}, {"T", kSaturationT}, {"trials", kSaturationTrials}}},
       {"gradient_flow_blocks", kBlocks}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Matrix<float> x = embed_tokens(tokens);  // (T, d_model)
    const Matrix<float> causal = minimodel::causal_mask(T);
    const MhaParams<float> params = toy_params(kSeed + 1);
    xt::random::seed(kSeed + 3);
    const MatrixD r = xt::random::randn<double>({T, kDModel});  // dL/dy: L = sum(y ⊙ r)

    // ---- Block A: one head ----
    run.print(
        "Check 1 (Block A). Head 0 of the toy layer on <bos> I work , you work , he (causal): "
        "attention_backward against central finite differences in double (h = 1e-5), at 24 "
        "random entries of each of q, k, v; errors divided by max(1, max |numeric|).");
    {
      const std::size_t d_head = kDModel / kHeads;
      auto head = xt::range(0, d_head);
      MatrixD xd = xt::cast<double>(x);
      const MhaParams<double> pd = in_double(params);
      MatrixD q = xt::view(xt::linalg::dot(xd, pd.w_q), xt::all(), head);
      MatrixD k = xt::view(xt::linalg::dot(xd, pd.w_k), xt::all(), head);
      MatrixD v = xt::view(xt::linalg::dot(xd, pd.w_v), xt::all(), head);
      const MatrixD mask = xt::cast<double>(causal);
      const MatrixD r_head = xt::view(r, xt::all(), head);
      minimodel::AttentionTape<double> tape;
      const auto forward = [&] {
        return minimodel::attention_forward<double>(q, k, v, mask, tape);
      };
      forward();
      const minimodel::AttentionGrads<double> g = minimodel::attention_backward(tape, r_head);
      std::mt19937_64 rng(kSeed);
      const auto loss = [&] { return double(xt::sum(forward() * r_head)()); };
      double worst = finite_difference_error(q, g.dq, loss, rng);
      worst = std::max(worst, finite_difference_error(k, g.dk, loss, rng));
      worst = std::max(worst, finite_difference_error(v, g.dv, loss, rng));
      run.check_max_abs_diff("dq, dk, dv agree with finite differences", worst,
                             kFiniteDifferenceTolerance);

      // The same head in float32, for `workbook diff`: each of Block A's functions' outputs.
      const Matrix<float> q32 = xt::cast<float>(q), k32 = xt::cast<float>(k),
                          v32 = xt::cast<float>(v), r32 = xt::cast<float>(r_head);
      minimodel::AttentionTape<float> tape32;
      run.record("attention_forward",
                 minimodel::attention_forward<float>(q32, k32, v32, causal, tape32),
                 kRecordTolerance, "A");
      run.record("softmax_backward",
                 minimodel::softmax_backward<float>(tape32.probs,
                                                    xt::linalg::dot(r32, xt::transpose(v32))),
                 kRecordTolerance, "A");
      const minimodel::AttentionGrads<float> g32 = minimodel::attention_backward(tape32, r32);
      run.record("attention_backward_dq", g32.dq, kRecordTolerance, "A");
      run.record("attention_backward_dk", g32.dk, kRecordTolerance, "A");
      run.record("attention_backward_dv", g32.dv, kRecordTolerance, "A");
    }

    // ---- Block B: the multi-head layer ----
    run.print(
        "Checks 2-3 (Block B). The toy layer (d_model 64, H 4, lab 01's seeded weights, biases "
        "from N(0, 0.25)), causal: mha_backward against finite differences at 24 random entries "
        "of x and of each parameter; then the key bias's gradient in float32.");
    {
      MhaParams<double> pd = in_double(params);
      MatrixD xd = xt::cast<double>(x);
      const MatrixD mask = xt::cast<double>(causal);
      minimodel::MhaTape<double> tape;
      const auto forward = [&] {
        return minimodel::mha_forward(pd, xd, std::optional(mask), tape);
      };
      forward();
      const MhaGrads<double> g = minimodel::mha_backward(pd, tape, r);
      run.check_max_abs_diff("dx and every dW, db agree with finite differences",
                             layer_error(pd, xd, r, g, forward), kFiniteDifferenceTolerance);

      minimodel::MhaTape<float> tape32;
      run.record("mha_forward", minimodel::mha_forward<float>(params, x, causal, tape32),
                 kRecordTolerance, "B");
      const MhaGrads<float> g32 =
          minimodel::mha_backward<float>(params, tape32, xt::cast<float>(r));
      record_grads(run, "mha_backward", g32, "B");
      // The weights the tape keeps for the backward pass, for the attention explorer: `workbook
      // explore 09`.
      minimodel::Tensor4 probs = xt::zeros<float>({std::size_t{1}, kHeads, T, T});  // (1, H, T, T)
      for (std::size_t h = 0; h < kHeads; ++h) xt::view(probs, 0, h) = tape32.heads[h].probs;
      workbench::save_page_data(
          run.artifact("explore.json"),
          workbench::lab_page("Lab 09: the toy layer's causal weights as its tape keeps them for "
                              "the backward pass (seeded weights, biases)",
                              tokens, {probs}));
      const double key = xt::amax(xt::abs(g32.db_k))(), query = xt::amax(xt::abs(g32.db_q))();
      run.check("the key bias gets no gradient: max |db_K| <= 1e-5 · max |db_Q|",
                key <= kKeyBiasRatio * query, key / query,
                "max |db_K| = " + workbench::scientific(key) +
                    ", max |db_Q| = " + workbench::scientific(query));
    }

    // ---- Block C: the residual block ----
    run.print(
        "Checks 4-5 (Block C). The toy layer in lab 04's block, causal: block_backward against "
        "finite differences, as above.");
    for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
      MhaParams<double> pd = in_double(params);
      MatrixD xd = xt::cast<double>(x);
      const MatrixD mask = xt::cast<double>(causal);
      minimodel::BlockTape<double> tape;
      const auto forward = [&] {
        return minimodel::block_forward(pd, norm, xd, std::optional(mask), tape);
      };
      forward();
      const MhaGrads<double> g = minimodel::block_backward(pd, tape, r);
      const std::string name = norm == Norm::post_ln ? "post-LN" : "pre-LN";
      run.check_max_abs_diff(name + " block: dx and every dW, db agree with finite differences",
                             layer_error(pd, xd, r, g, forward), kFiniteDifferenceTolerance);

      // In float32, for `workbook diff`: LayerNorm's forward and backward once, then each block.
      const Matrix<float> r32 = xt::cast<float>(r);
      if (norm == Norm::post_ln) {
        minimodel::LayerNormTape<float> ln_tape;
        run.record("layer_norm_forward", minimodel::layer_norm_forward<float>(x, ln_tape),
                   kRecordTolerance, "C");
        run.record("layer_norm_backward_dx", minimodel::layer_norm_backward<float>(ln_tape, r32),
                   kRecordTolerance, "C");
      }
      const std::string prefix = norm == Norm::post_ln ? "post_ln_" : "pre_ln_";
      minimodel::BlockTape<float> tape32;
      run.record(prefix + "block_forward",
                 minimodel::block_forward<float>(params, norm, x, causal, tape32), kRecordTolerance,
                 "C");
      record_grads(run, prefix + "block_backward",
                   minimodel::block_backward<float>(params, tape32, r32), "C");
    }

    // ---- Measurement: saturation without the scale ----
    run.print();
    run.print(
        "Softmax saturation (measured; only its direction is checked). q, k rows and dL/dP "
        "from N(0, 1), T = S = 32, mean of 8 draws; logits q kᵀ / sqrt(d) or q kᵀ. "
        "‖∂L/∂logits‖ = ‖softmax_backward(P, dL/dP)‖ is the gradient at the softmax's input; "
        "max p is a row's largest probability.");
    run.print("       d   ‖∂L/∂logits‖ scaled   unscaled    max p scaled   unscaled");
    std::vector<double> widths, grad_scaled, grad_unscaled, max_p_scaled, max_p_unscaled;
    nlohmann::json saturation = nlohmann::json::array();
    xt::random::seed(kSeed + 4);
    for (const std::size_t d : kSaturationWidths) {
      double g[2] = {0, 0}, p[2] = {0, 0};
      for (std::size_t trial = 0; trial < kSaturationTrials; ++trial) {
        const MatrixD q = xt::random::randn<double>({kSaturationT, d});
        const MatrixD k = xt::random::randn<double>({kSaturationT, d});
        // dL/dP from N(0, 1) whatever d is, so that only the softmax changes with d.
        const MatrixD d_probs = xt::random::randn<double>({kSaturationT, kSaturationT});
        const MatrixD raw = xt::linalg::dot(q, xt::transpose(k));
        for (int scaled = 0; scaled < 2; ++scaled) {
          const MatrixD logits = scaled ? MatrixD(raw / std::sqrt(double(d))) : raw;
          const MatrixD row_max = xt::amax(logits, {1}, xt::keep_dims);  // containers: lab 04
          const MatrixD exps = xt::exp(logits - row_max);
          const MatrixD row_sum = xt::sum(exps, {1}, xt::keep_dims);
          const MatrixD probs = exps / row_sum;
          g[scaled] += frobenius(minimodel::softmax_backward(probs, d_probs)) / kSaturationTrials;
          p[scaled] += double(xt::mean(xt::amax(probs, {1}))()) / kSaturationTrials;
        }
      }
      widths.push_back(double(d));
      grad_scaled.push_back(g[1]);
      grad_unscaled.push_back(g[0]);
      max_p_scaled.push_back(p[1]);
      max_p_unscaled.push_back(p[0]);
      char line[128];
      std::snprintf(line, sizeof line, "  %6zu   %18.4g %10.4g    %12.3f %10.3f", d, g[1], g[0],
                    p[1], p[0]);
      run.print(line);
      saturation.push_back({{"d", d},
                            {"grad_logits_scaled", g[1]},
                            {"grad_logits_unscaled", g[0]},
                            {"max_p_scaled", p[1]},
                            {"max_p_unscaled", p[0]}});
    }
    run.measure("saturation", saturation);
    run.check("at d = 16384 the unscaled softmax passes back less gradient than the scaled one",
              grad_unscaled.back() < grad_scaled.back(), grad_unscaled.back() / grad_scaled.back(),
              "ratio unscaled / scaled = " + number(grad_unscaled.back() / grad_scaled.back()));
    workbench::LinePlot grad_plot, max_p_plot;
    grad_plot.title = "gradient at the softmax's input";
    grad_plot.x_label = "head width d";
    grad_plot.y_label = "‖∂L/∂logits‖ (mean of 8 draws)";
    grad_plot.log_x = grad_plot.log_y = true;
    grad_plot.series = {{widths, grad_scaled, "scores / sqrt(d)"},
                        {widths, grad_unscaled, "scores unscaled"}};
    max_p_plot.title = "largest probability of a row";
    max_p_plot.x_label = "head width d";
    max_p_plot.y_label = "mean max p";
    max_p_plot.log_x = true;
    max_p_plot.series = {{widths, max_p_scaled, "scores / sqrt(d)"},
                         {widths, max_p_unscaled, "scores unscaled"}};
    workbench::render_line_plots(run.artifact("saturation.png"),
                                 "Lab 09: the softmax saturates without the 1/sqrt(d) scale "
                                 "(T = S = 32, q, k, dL/dP from N(0, 1))",
                                 {grad_plot, max_p_plot});

    // ---- Measurement: gradient flow through 8 blocks ----
    run.print();
    run.print(
        "Gradient flow (measured, not checked): 8 blocks of the toy layer's size, each with lab "
        "01's weights for seed 2025 + i and zero biases, causal, on the toy sentence; L = sum(y ⊙ "
        "r). ‖∂L/∂x_i‖ at the input of block i (row 8: the output y), and ‖∂L/∂W_Q‖ of block i.");
    std::vector<double> depth, post_dx, pre_dx, post_dw, pre_dw;
    for (const Norm norm : {Norm::post_ln, Norm::pre_ln}) {
      std::vector<MhaParams<float>> layers;
      for (std::size_t i = 0; i < kBlocks; ++i) {
        MhaParams<float> p = toy_params(kSeed + 1 + i);
        p.b_q = p.b_k = p.b_v = p.b_o = xt::zeros<float>({kDModel});
        layers.push_back(std::move(p));
      }
      std::vector<minimodel::BlockTape<float>> tapes(kBlocks);
      Matrix<float> h = x;
      for (std::size_t i = 0; i < kBlocks; ++i)
        h = minimodel::block_forward<float>(layers[i], norm, h, causal, tapes[i]);
      std::vector<double> dx(kBlocks + 1), dw(kBlocks);
      Matrix<float> grad = xt::cast<float>(r);
      dx[kBlocks] = frobenius(xt::cast<double>(grad));
      for (std::size_t i = kBlocks; i-- > 0;) {
        const MhaGrads<float> g = minimodel::block_backward<float>(layers[i], tapes[i], grad);
        grad = g.dx;
        dx[i] = frobenius(xt::cast<double>(g.dx));
        dw[i] = frobenius(xt::cast<double>(g.dw_q));
      }
      (norm == Norm::post_ln ? post_dx : pre_dx) = dx;
      (norm == Norm::post_ln ? post_dw : pre_dw) = dw;
    }
    run.print("  block i   ‖∂L/∂x_i‖ post-LN   pre-LN    ‖∂L/∂W_Q‖ post-LN   pre-LN");
    nlohmann::json flow = nlohmann::json::array();
    for (std::size_t i = 0; i <= kBlocks; ++i) {
      depth.push_back(double(i));
      char line[128];
      if (i < kBlocks)
        std::snprintf(line, sizeof line, "  %7zu   %17.4g %8.4g    %17.4g %8.4g", i, post_dx[i],
                      pre_dx[i], post_dw[i], pre_dw[i]);
      else
        std::snprintf(line, sizeof line, "  %7zu   %17.4g %8.4g    (the output)", i, post_dx[i],
                      pre_dx[i]);
      run.print(line);
      nlohmann::json row = {{"block", i}, {"dx_post_ln", post_dx[i]}, {"dx_pre_ln", pre_dx[i]}};
      if (i < kBlocks) {
        row["dw_q_post_ln"] = post_dw[i];
        row["dw_q_pre_ln"] = pre_dw[i];
      }
      flow.push_back(row);
    }
    run.measure("gradient_flow", flow);
    const std::vector<double> blocks(depth.begin(), depth.end() - 1);
    workbench::LinePlot dx_plot, dw_plot;
    dx_plot.title = "gradient at each block's input";
    dx_plot.x_label = "block i (8 = the output)";
    dx_plot.y_label = "‖∂L/∂x_i‖";
    dx_plot.log_y = true;
    dx_plot.series = {{depth, post_dx, "post-LN"}, {depth, pre_dx, "pre-LN"}};
    dw_plot.title = "gradient of each block's W_Q";
    dw_plot.x_label = "block i";
    dw_plot.y_label = "‖∂L/∂W_Q‖";
    dw_plot.log_y = true;
    dw_plot.series = {{blocks, post_dw, "post-LN"}, {blocks, pre_dw, "pre-LN"}};
    workbench::render_line_plots(run.artifact("gradient_flow.png"),
                                 "Lab 09: gradient norms through 8 attention blocks (d_model 64, "
                                 "H 4, causal, random weights)",
                                 {dx_plot, dw_plot});
  });
}
