// Lab 00 verify: the 2-token toy attention, every intermediate printed and checked against the
// numbers derived by hand in experiments/00-attention-by-hand/paper_derivation.md.
#include <cmath>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>

#include "figures/heatmap.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention.hpp"

using minimodel::Tensor2;

int main(int argc, char** argv) {
  const nlohmann::json config = {{"x", "I (2 x 2)"},
                                 {"w_q", "I"},
                                 {"w_k", "[[0, 1], [1, 0]]"},
                                 {"w_v", "diag(2, 3)"},
                                 {"d_head", 2}};
  return lab_setup::run(argc, argv, 0, config, [](workbench::VerifyRun& run) {
    constexpr double kTolerance = 1e-5;  // float32 on O(1) numbers is good to ~1e-7
    const Tensor2 x = {{1, 0}, {0, 1}};
    const Tensor2 w_q = {{1, 0}, {0, 1}}, w_k = {{0, 1}, {1, 0}}, w_v = {{2, 0}, {0, 3}};

    run.print("Step 1. Project the tokens: Q = X W_Q, K = X W_K, V = X W_V.");
    const Tensor2 q = xt::linalg::dot(x, w_q), k = xt::linalg::dot(x, w_k),
                  v = xt::linalg::dot(x, w_v);
    run.print_matrix("Q", q);
    run.print_matrix("K", k);
    run.print_matrix("V", v);

    run.print("Step 2. Scores Q K^T, scaled by 1/sqrt(d_head) = 1/sqrt(2).");
    const Tensor2 scores = xt::linalg::dot(q, xt::transpose(k));
    const Tensor2 scaled = scores / std::sqrt(2.0f);
    run.print_matrix("Q K^T", scores);
    run.print_matrix("Q K^T / sqrt(2)", scaled);

    // The hand numbers: s = 1/sqrt(2) off the diagonal, p = e^s / (1 + e^s).
    const double s = 1.0 / std::sqrt(2.0), p = std::exp(s) / (1.0 + std::exp(s));
    const Tensor2 hand_weights = {{float(1 - p), float(p)}, {float(p), float(1 - p)}};
    const Tensor2 hand_output = {{float(2 * (1 - p)), float(3 * p)},
                                 {float(2 * p), float(3 * (1 - p))}};

    run.print("Step 3. softmax of each row (Block A).");
    const Tensor2 weights = minimodel::softmax(scaled);
    run.print_matrix("softmax", weights);
    run.record("softmax", weights, kTolerance, "A");
    run.check_max_abs_diff("softmax matches the hand weights",
                           workbench::max_abs_diff(weights, hand_weights), kTolerance);

    run.print("Step 4. single_head_attention (Block B): weights and output = weights V.");
    const minimodel::AttentionResult result = minimodel::single_head_attention(q, k, v);
    run.print_matrix("weights", result.weights);
    run.print_matrix("output", result.output);
    run.record("single_head_attention_weights", result.weights, kTolerance, "B");
    run.record("single_head_attention_output", result.output, kTolerance, "B");
    run.check_max_abs_diff("weights match the hand weights",
                           workbench::max_abs_diff(result.weights, hand_weights), kTolerance);
    run.check_max_abs_diff("output matches the hand output",
                           workbench::max_abs_diff(result.output, hand_output), kTolerance);

    run.print("Step 5. The same with a mask that hides token 1 from token 0.");
    const Tensor2 mask = {{0.0f, minimodel::kMaskedScore}, {0.0f, 0.0f}};
    const minimodel::AttentionResult masked = minimodel::single_head_attention(q, k, v, mask);
    run.print_matrix("masked weights", masked.weights);
    run.record("single_head_attention_masked_weights", masked.weights, kTolerance, "B");
    const Tensor2 hand_masked = {{1.0f, 0.0f}, {float(p), float(1 - p)}};
    run.check_max_abs_diff("masked weights match the hand weights",
                           workbench::max_abs_diff(masked.weights, hand_masked), kTolerance);

    workbench::HeatmapFigure figure;
    figure.title = "Lab 00: the toy's attention weights";
    // The hidden cell is hatched, and every cell carries its value, as in paper_derivation.md.
    xt::xtensor<bool, 2> hidden = {{false, true}, {false, false}};
    figure.panels = {{result.weights, "no mask"},
                     {masked.weights, "token 1 hidden from token 0", hidden}};
    figure.grid_cols = 2;
    figure.row_labels = figure.col_labels = {"token 0", "token 1"};
    figure.excluded_label = "masked: weight 0";
    figure.annotate = true;
    workbench::render_heatmaps(run.artifact("attention_weights.png"), figure);
  });
}
