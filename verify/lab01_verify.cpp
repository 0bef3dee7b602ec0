// Lab 01 verify: H = 1 equivalence with lab 00, the parameter count, and a heatmap per head of
// H = 4 heads over an 8-token sentence.
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/heatmap.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/shapes.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::MultiHeadAttention;
using minimodel::Tensor2;

int main(int argc, char** argv) {
  const nlohmann::json config = lab_setup::toy_config();
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    constexpr double kTolerance = 1e-5;  // float32 sums over d_model = 64 terms
    const auto& tokens = toy_sentence();
    const Tensor2 x = embed_tokens(tokens);  // (T, d_model)

    // For `workbook diff`, Blocks A and B on their own: the seeded weights (exact, as
    // MultiHeadAttention.SeededWeightsFollowTheBlueprint) and split_heads / merge_heads of the
    // sentence (exact, as SplitHeads.PutsColumnBlockHIntoHeadH).
    {
      const MultiHeadAttention seeded(kDModel, kHeads, kSeed + 1);
      run.record("constructor_w_q", seeded.w_q(), 0.0, "A");
      run.record("constructor_w_k", seeded.w_k(), 0.0, "A");
      run.record("constructor_w_v", seeded.w_v(), 0.0, "A");
      run.record("constructor_w_o", seeded.w_o(), 0.0, "A");
      const minimodel::Tensor3 batch =
          xt::reshape_view(x, std::array<std::size_t, 3>{1, x.shape(0), kDModel});
      const minimodel::Tensor4 heads = minimodel::split_heads(batch, kHeads);
      run.record("split_heads", heads, 0.0, "B");
      run.record("merge_heads", minimodel::merge_heads(heads), 0.0, "B");
    }

    run.print("Check 1. H = 1 equals lab 00's single_head_attention followed by W_O.");
    MultiHeadAttention one_head(kDModel, 1, kSeed + 1);
    const Tensor2 y1 = one_head.forward(x);
    run.record("forward_h1_output", y1, kTolerance, "C");
    const minimodel::AttentionResult head = minimodel::single_head_attention(
        xt::linalg::dot(x, one_head.w_q()), xt::linalg::dot(x, one_head.w_k()),
        xt::linalg::dot(x, one_head.w_v()));
    run.check_max_abs_diff(
        "H = 1 output equals single_head_attention then W_O",
        workbench::max_abs_diff(y1, xt::linalg::dot(head.output, one_head.w_o())), kTolerance);

    run.print("Checks 2-4. H = 4 heads over the sentence: " + std::to_string(tokens.size()) +
              " tokens.");
    MultiHeadAttention mha(kDModel, kHeads, kSeed + 1);
    const Tensor2 y = mha.forward(x);
    const minimodel::Tensor4& weights = mha.attention_weights();  // (1, H, T, T)
    const std::size_t T = tokens.size();
    run.record("forward_h4_output", y, kTolerance, "C");
    run.record("forward_attention_weights", weights, kTolerance, "C");
    run.check("output keeps the input shape", y.shape() == x.shape(), double(y.size()),
              "output " + minimodel::shape_of(y) + ", weights " + minimodel::shape_of(weights));
    const Tensor2 row_sums = xt::sum(xt::view(weights, 0), {2});
    run.check_max_abs_diff("every attention row sums to 1",
                           workbench::max_abs_diff(row_sums, xt::ones<float>({kHeads, T})),
                           kTolerance);

    const std::size_t params = 4 * kDModel * kDModel;
    const std::size_t counted =
        mha.w_q().size() + mha.w_k().size() + mha.w_v().size() + mha.w_o().size();
    run.check("parameter count is 4 d_model^2", counted == params, double(counted),
              std::to_string(counted) + " weights = 4 x " + std::to_string(kDModel) + "^2 (" +
                  std::to_string(3 * kDModel * kDModel) + " without W_O)");

    workbench::HeatmapFigure figure;
    figure.title = "Lab 01: attention weights per head (H = 4, d_model = 64)";
    for (std::size_t h = 0; h < kHeads; ++h)
      figure.panels.push_back({xt::view(weights, 0, h), "head " + std::to_string(h)});
    figure.grid_rows = figure.grid_cols = 2;
    figure.row_labels = figure.col_labels = tokens;
    figure.vmax = std::max(0.05f, xt::amax(weights)());  // spread the colours over what occurs
    workbench::render_heatmaps(run.artifact("heatmap.png"), figure);
    // The same weights for the attention explorer: `workbook explore 01`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page(
            "Lab 01: multi-head attention over the sentence (seeded weights, no mask)", tokens,
            {weights}));
  });
}
