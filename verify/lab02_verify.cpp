// Lab 02 verify: the causal mask, perturbation causality, and lab 01's checks with the mask on.
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
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
  const nlohmann::json config = lab_setup::toy_config({{"masked_score", minimodel::kMaskedScore}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Tensor2 x = embed_tokens(tokens);  // (T, d_model)

    run.print("causal_mask(4) (Block A):");
    run.print_matrix("causal_mask(4)", minimodel::causal_mask(4));
    const Tensor2 mask = minimodel::causal_mask(T);
    // Every output is Block A's: causal_mask, then lab 01's layer with it (1e-5: lab 01's tests).
    run.record("causal_mask", mask, 0.0, "A");  // exact, as in the tests
    const Tensor2 expected_mask =
        xt::where(xt::triu(xt::ones<float>({T, T}), 1) > 0.5f, minimodel::kMaskedScore, 0.0f);
    run.check_max_abs_diff("causal_mask(8) is 0 on and below the diagonal, kMaskedScore above",
                           workbench::max_abs_diff(mask, expected_mask), 0.0);

    MultiHeadAttention mha(kDModel, kHeads, kSeed + 1);
    const Tensor2 y = mha.forward(x, mask);
    const minimodel::Tensor4 weights = mha.attention_weights();  // (1, H, T, T)
    run.record("masked_output", y, 1e-5, "A");
    run.record("masked_weights", weights, 1e-5, "A");
    const float future_weight =
        xt::amax(xt::view(weights, 0) * xt::triu(xt::ones<float>({T, T}), 1))();
    run.check("no weight on future tokens", future_weight == 0.0f, future_weight,
              "largest weight above the diagonal = " + workbench::scientific(future_weight));
    const Tensor2 row_sums = xt::sum(xt::view(weights, 0), {2});
    run.check_max_abs_diff("every attention row sums to 1",
                           workbench::max_abs_diff(row_sums, xt::ones<float>({kHeads, T})), 1e-5);

    run.print("Perturbation: replace the last token \"" + tokens.back() + "\" with \"she\".");
    auto changed_tokens = tokens;
    changed_tokens.back() = "she";
    const Tensor2 y_changed = mha.forward(embed_tokens(changed_tokens), mask);
    run.record("perturbed_output", y_changed, 1e-5, "A");
    auto earlier = xt::range(0, T - 1);
    run.check_max_abs_diff(
        "positions 0..T-2 are unchanged",
        workbench::max_abs_diff(xt::view(y_changed, earlier), xt::view(y, earlier)), 1e-6);
    const double last_change =
        workbench::max_abs_diff(xt::view(y_changed, T - 1), xt::view(y, T - 1));
    run.check("the last position does change", last_change > 1e-3, last_change,
              "max |diff| at the last position = " + workbench::scientific(last_change));

    run.print("Lab 01 still holds with the mask: H = 1 equals single_head_attention then W_O.");
    MultiHeadAttention one_head(kDModel, 1, kSeed + 1);
    const minimodel::AttentionResult head = minimodel::single_head_attention(
        xt::linalg::dot(x, one_head.w_q()), xt::linalg::dot(x, one_head.w_k()),
        xt::linalg::dot(x, one_head.w_v()), mask);
    run.check_max_abs_diff("masked H = 1 output equals single_head_attention then W_O",
                           workbench::max_abs_diff(one_head.forward(x, mask),
                                                   xt::linalg::dot(head.output, one_head.w_o())),
                           1e-5);

    workbench::HeatmapFigure visual;
    visual.title = "Lab 02: the causal mask and the masked attention of head 0";
    // The mask as the learner wrote it, additive: 0 keeps a score (dark), kMaskedScore removes it
    // (hatched, off the colour scale); the weights with the same cells hatched, so that a masked
    // cell never passes for a tiny weight.
    const xt::xtensor<bool, 2> masked = mask < 0.0f;
    visual.panels = {{mask, "the mask: 0 = keep", masked},
                     {xt::view(weights, 0, 0), "head 0 weights", masked}};
    visual.grid_cols = 2;
    visual.row_labels = visual.col_labels = tokens;
    visual.colorbar_label = "mask value (0) / attention weight";
    visual.excluded_label = "masked: -1e9 added, weight 0";
    workbench::render_heatmaps(run.artifact("mask_visual.png"), visual);

    workbench::HeatmapFigure heads;
    heads.title = "Lab 02: causal attention weights per head (H = 4, d_model = 64)";
    for (std::size_t h = 0; h < kHeads; ++h)
      heads.panels.push_back({xt::view(weights, 0, h), "head " + std::to_string(h), masked});
    heads.grid_rows = heads.grid_cols = 2;
    heads.row_labels = heads.col_labels = tokens;
    heads.excluded_label = "masked (a future key)";
    workbench::render_heatmaps(run.artifact("heatmap.png"), heads);
    // The same weights for the attention explorer: `workbook explore 02`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page(
            "Lab 02: causal multi-head attention over the sentence (seeded weights)", tokens,
            {weights}));
  });
}
