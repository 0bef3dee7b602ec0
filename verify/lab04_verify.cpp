// Lab 04 verify: post-LN and pre-LN attention blocks side by side on the 8-token sentence (the
// statistics of their output rows), then a stack of 8 blocks of each kind and the norm of the
// residual stream after every block.
#include <cmath>
#include <cstdio>
#include <vector>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention_block.hpp"
#include "minimodel/shapes.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::MultiHeadAttention;
using minimodel::Norm;
using minimodel::Tensor2;
using minimodel::Tensor3;

namespace {

constexpr std::size_t kDepth = 8;
constexpr std::uint64_t kWeightSeed = kSeed + 1;  // block i of the stack uses kWeightSeed + i

struct RowStats {
  std::vector<double> mean, variance;  // one per position
};

// y: (1, T, d_model) -> the mean and biased variance of each row, in double.
RowStats row_stats(const Tensor3& y) {
  RowStats stats;
  for (std::size_t t = 0; t < y.shape(1); ++t) {
    const xt::xtensor<double, 1> row = xt::cast<double>(xt::view(y, 0, t));
    const double mean = xt::mean(row)();
    stats.mean.push_back(mean);
    stats.variance.push_back(xt::mean(xt::square(row - mean))());
  }
  return stats;
}

// x: (1, T, d_model) -> mean over positions of ||x_t||_2, the size of the residual stream.
double residual_norm(const Tensor3& x) {
  const xt::xtensor<double, 2> x64 = xt::cast<double>(xt::view(x, 0));
  const xt::xtensor<double, 1> squares = xt::sum(xt::square(x64), {1});  // (T,)
  const xt::xtensor<double, 1> norms = xt::sqrt(squares);
  return xt::mean(norms)();
}

Tensor3 block(const Tensor3& x, const MultiHeadAttention& layer, Norm norm) {
  return minimodel::mha_block(x, layer.w_q(), layer.w_k(), layer.w_v(), layer.w_o(), kHeads, norm);
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string padded(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

double max_abs_deviation(const std::vector<double>& values, double target) {
  double worst = 0.0;
  for (double v : values) worst = std::max(worst, std::abs(v - target));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint64_t> stack_seeds;
  for (std::size_t i = 0; i < kDepth; ++i) stack_seeds.push_back(kWeightSeed + i);
  const nlohmann::json config = lab_setup::toy_config(
      {{"layer_norm_eps", 1e-5}, {"stack_depth", kDepth}, {"stack_weight_seeds", stack_seeds}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Tensor2 embedded = embed_tokens(tokens);  // (T, d_model)
    const Tensor3 x = xt::reshape_view(embedded, std::array<std::size_t, 3>{1, T, kDModel});

    // ---- One block of each kind on the sentence ----
    // For `workbook diff`, each block's function; 1e-5 is the lab 04 tests' kTorchTolerance.
    // attention_block on its own gets a sublayer without weights: x -> 0.5 x + 1.
    const auto half_plus_one = [](const Tensor3& in) { return Tensor3(0.5f * in + 1.0f); };
    run.record("layer_norm", minimodel::layer_norm(x), 1e-5, "A");
    run.record("attention_block_post_ln",
               minimodel::attention_block(x, Norm::post_ln, half_plus_one), 1e-5, "B");
    run.record("attention_block_pre_ln", minimodel::attention_block(x, Norm::pre_ln, half_plus_one),
               1e-5, "B");
    const MultiHeadAttention layer(kDModel, kHeads, kWeightSeed);
    const Tensor3 post_out = block(x, layer, Norm::post_ln),
                  pre_out = block(x, layer, Norm::pre_ln);
    run.record("mha_block_post_ln", post_out, 1e-5, "C");
    run.record("mha_block_pre_ln", pre_out, 1e-5, "C");
    const RowStats in = row_stats(x);
    const RowStats post = row_stats(post_out);
    const RowStats pre = row_stats(pre_out);
    run.print("One block, MultiHeadAttention(64, 4, seed 2025), on <bos> I work , you work , he.");
    run.print("Per-position mean and variance of the rows (biased variance over d_model = 64):");
    run.print("  pos  token  |   input mean   var  |  post-LN mean   var  |   pre-LN mean   var");
    for (std::size_t t = 0; t < T; ++t)
      run.print("  " + padded(std::to_string(t), 3) + "  " + padded(tokens[t], 5) + "  |  " +
                padded(fixed(in.mean[t], 4), 10) + padded(fixed(in.variance[t], 4), 8) + "  |  " +
                padded(fixed(post.mean[t], 4), 10) + padded(fixed(post.variance[t], 4), 8) +
                "  |  " + padded(fixed(pre.mean[t], 4), 10) + padded(fixed(pre.variance[t], 4), 8));

    run.print("Checks 1-2. Post-LN normalises every output row.");
    // Means: float32 sums of 64 terms of size <= 4, about 1e-6. Variances: a normalised row has
    // variance var / (var + eps), below 1 by eps / var, which is <= 1e-4 for any row of x + attn(x)
    // with var >= 0.1 (the input rows here have 0.79 to 1.38); rounding adds about 1e-6.
    run.check_max_abs_diff("post-LN: every output row has mean 0",
                           max_abs_deviation(post.mean, 0.0), 1e-5);
    run.check_max_abs_diff("post-LN: every output row has variance 1",
                           max_abs_deviation(post.variance, 1.0), 1e-4);
    run.print("Check 3. Pre-LN leaves the residual stream unnormalised.");
    const double pre_deviation = max_abs_deviation(pre.variance, 1.0);
    run.check("pre-LN: output rows are not normalised", pre_deviation > 0.1, pre_deviation,
              "max |variance - 1| = " + fixed(pre_deviation, 4) + " (> 0.1)");

    run.print("Check 4. Pre-LN with W_O = 0 is the identity (post-LN would give layer_norm(x)).");
    const Tensor2 zero = xt::zeros<float>({kDModel, kDModel});
    const Tensor3 identity =
        minimodel::mha_block(x, layer.w_q(), layer.w_k(), layer.w_v(), zero, kHeads, Norm::pre_ln);
    run.check_max_abs_diff("pre-LN with W_O = 0 returns x", workbench::max_abs_diff(identity, x),
                           0.0);

    // ---- A stack of 8 blocks of each kind ----
    run.print("Checks 5-7. A stack of " + std::to_string(kDepth) +
              " blocks, block i with MultiHeadAttention(64, 4, seed 2025 + i).");
    std::vector<MultiHeadAttention> layers;
    for (std::size_t i = 0; i < kDepth; ++i) layers.emplace_back(kDModel, kHeads, kWeightSeed + i);
    std::vector<double> layer_index, post_norms, pre_norms;
    std::vector<minimodel::Tensor4> pre_weights;  // each block's (1, H, T, T), for the explorer
    Tensor3 post_x = x, pre_x = x;
    for (std::size_t i = 0; i <= kDepth; ++i) {
      if (i > 0) {
        post_x = block(post_x, layers[i - 1], Norm::post_ln);
        // The pre-LN block's attention sees layer_norm of the stream, as inside mha_block.
        layers[i - 1].forward(minimodel::layer_norm(pre_x));
        pre_weights.push_back(layers[i - 1].attention_weights());
        pre_x = block(pre_x, layers[i - 1], Norm::pre_ln);
      }
      layer_index.push_back(double(i));
      post_norms.push_back(residual_norm(post_x));
      pre_norms.push_back(residual_norm(pre_x));
    }
    run.print("Residual-stream norm, mean over positions of ||x_t||_2 (layer 0 = the embedding):");
    run.print("  layer   post-LN    pre-LN");
    for (std::size_t i = 0; i <= kDepth; ++i)
      run.print("  " + padded(std::to_string(i), 5) + padded(fixed(post_norms[i], 4), 10) +
                padded(fixed(pre_norms[i], 4), 10));

    const double sqrt_d = std::sqrt(double(kDModel));
    const std::vector<double> post_after(post_norms.begin() + 1, post_norms.end());
    // A normalised row of 64 values has ||x_t|| = 8 sqrt(var / (var + eps)), below 8 by about
    // 4 eps / var: under 1e-3 for any var >= 0.04, with room for float32 rounding.
    run.check_max_abs_diff("post-LN: the norm stays at sqrt(d_model) = 8 after every block",
                           max_abs_deviation(post_after, sqrt_d), 1e-3);
    double worst_step = INFINITY;
    for (std::size_t i = 1; i <= kDepth; ++i)
      worst_step = std::min(worst_step, pre_norms[i] - pre_norms[i - 1]);
    run.check("pre-LN: with these seeds the norm grows at every block", worst_step >= 0.0,
              worst_step, "smallest step = " + fixed(worst_step, 4));
    run.check("pre-LN: the norm ends above where it started", pre_norms.back() > pre_norms.front(),
              pre_norms.back() / pre_norms.front(),
              fixed(pre_norms.front(), 4) + " -> " + fixed(pre_norms.back(), 4) + " (x" +
                  fixed(pre_norms.back() / pre_norms.front(), 3) + ")");

    // ---- Figures ----
    workbench::LinePlot norm_plot;
    norm_plot.title = "Lab 04: residual-stream norm, 8 blocks (d_model = 64, H = 4)";
    norm_plot.x_label = "layer (0 = input embedding, i = after block i)";
    norm_plot.y_label = "mean over positions of \u2016x_t\u2016\u2082";
    norm_plot.series = {{layer_index, post_norms, "post-LN: layer_norm(x + attn(x))"},
                        {layer_index, pre_norms, "pre-LN: x + attn(layer_norm(x))"}};
    workbench::render_line_plot(run.artifact("residual_norm.png"), norm_plot);

    // Variance first, with the legend; the mean panel uses the same colours in the same order.
    std::vector<double> positions;
    for (std::size_t t = 0; t < T; ++t) positions.push_back(double(t));
    const std::string position_axis = "position (<bos> I work , you work , he)";
    workbench::LinePlot variance_plot{
        "row variance", position_axis, "variance over d_model", {}, false};
    variance_plot.series = {{positions, in.variance, "input x"},
                            {positions, post.variance, "post-LN output"},
                            {positions, pre.variance, "pre-LN output"}};
    workbench::LinePlot mean_plot{
        "row mean (colours as on the left)", position_axis, "mean over d_model", {}, false};
    mean_plot.series = {
        {positions, in.mean, ""}, {positions, post.mean, ""}, {positions, pre.mean, ""}};
    workbench::render_line_plots(
        run.artifact("position_stats.png"),
        "Lab 04: output rows of one block, post-LN vs pre-LN (d_model = 64, H = 4)",
        {variance_plot, mean_plot});
    // The pre-LN stack's attention, block by block, for the attention explorer: `workbook
    // explore 04`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page("Lab 04: the pre-LN stack of " + std::to_string(kDepth) +
                                " blocks over the sentence (seeded weights, no mask)",
                            tokens, pre_weights));
  });
}
