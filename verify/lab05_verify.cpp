// Lab 05 verify: the invariants of rotary position embeddings (identity at position 0, norms,
// interleaved pairs, offset invariance), RoPE inside causal self-attention, a plot of the score
// against the offset, and the cos table as a heatmap.
#include <cmath>
#include <stdexcept>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/heatmap.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/shapes.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::normal_rows;
using lab_setup::toy_sentence;

using minimodel::Positions;
using minimodel::RotaryPositionalEmbedding;
using minimodel::Tensor2;
using minimodel::Tensor3;

namespace {

Positions positions_from(std::int64_t first, std::size_t T) {
  return xt::arange<std::int64_t>(first, first + static_cast<std::int64_t>(T));
}

}  // namespace

int main(int argc, char** argv) {
  constexpr float kTheta = 10000.0f;
  constexpr std::size_t kDHead = 16, kMaxSeqLen = 64;
  constexpr std::int64_t kMaxOffset = 32, kShift = 10;
  const nlohmann::json config = lab_setup::toy_config({{"theta", kTheta},
                                                       {"d_head", kDHead},
                                                       {"max_seq_len", kMaxSeqLen},
                                                       {"pairing", "interleaved (2k, 2k+1)"},
                                                       {"q_k_seed", kSeed + 2},
                                                       {"offsets", {-kMaxOffset, kMaxOffset}},
                                                       {"shift", kShift}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    run.print("RotaryPositionalEmbedding(theta 10000, d_head 16, max_seq_len 64) (Block A):");
    const RotaryPositionalEmbedding rope(kTheta, kDHead, kMaxSeqLen);
    run.print("  cos table " + minimodel::shape_of(rope.cos_table()) + ", sin table " +
              minimodel::shape_of(rope.sin_table()) +
              "; pair k turns theta^(-2k/16) rad per position");
    // The tables to kTableTolerance (1e-7) of the lab 05 tests: float32 cos and sin of the same
    // angles, computed in double.
    run.record("constructor_cos_table", rope.cos_table(), 1e-7, "A");
    run.record("constructor_sin_table", rope.sin_table(), 1e-7, "A");

    const Tensor2 x = normal_rows(6, kDHead, kSeed + 2);  // (6, d_head)
    run.print("Check 1. Position 0 is the identity (Block B).");
    run.check_max_abs_diff("apply at position 0 returns x",
                           workbench::max_abs_diff(rope.apply(x, xt::zeros<std::int64_t>({6})), x),
                           0.0);

    run.print("Check 2. Rotations keep the length of every pair (2k, 2k+1).");
    const Tensor2 rotated = rope.apply(x, Positions{0, 7, 19, 33, 50, 63});
    run.record("apply_rotated_rows", rotated, 1e-5, "B");  // kTolerance of the tests
    auto pair_norms = [&](const Tensor2& a) -> Tensor2 {
      auto even = xt::view(a, xt::all(), xt::range(0, kDHead, 2));
      auto odd = xt::view(a, xt::all(), xt::range(1, kDHead, 2));
      return xt::sqrt(even * even + odd * odd);
    };
    run.check_max_abs_diff("pair norms at positions 0, 7, 19, 33, 50, 63 equal those of x",
                           workbench::max_abs_diff(pair_norms(rotated), pair_norms(x)), 1e-5);

    run.print("Check 3. Pairs are interleaved: e_2k at position 5 becomes cos e_2k + sin e_2k+1.");
    Tensor2 basis = xt::zeros<float>({kDHead / 2, kDHead}), expected = basis;  // row k holds e_2k
    for (std::size_t k = 0; k < kDHead / 2; ++k) {
      const double angle = 5.0 * std::pow(double(kTheta), -2.0 * double(k) / double(kDHead));
      basis(k, 2 * k) = 1.0f;
      expected(k, 2 * k) = static_cast<float>(std::cos(angle));
      expected(k, 2 * k + 1) = static_cast<float>(std::sin(angle));
    }
    const Positions at_five = xt::full_like(xt::zeros<std::int64_t>({kDHead / 2}), 5);
    run.check_max_abs_diff("e_0, e_2, ..., e_14 rotated at position 5 (not rotate-half)",
                           workbench::max_abs_diff(rope.apply(basis, at_five), expected), 1e-7);

    run.print("Checks 4-5. The score q.k after rotation depends only on the offset n - m.");
    const Tensor2 q = normal_rows(1, kDHead, kSeed + 3), k = normal_rows(1, kDHead, kSeed + 4);
    auto score = [&](std::int64_t m, std::int64_t n) {
      return double(xt::sum(rope.apply(q, Positions{m}) * rope.apply(k, Positions{n}))());
    };
    workbench::LineSeries plain{{}, {}, "query at m, key at n = m + offset"};
    workbench::LineSeries shifted{{}, {}, "both shifted by +10 (on top: the curves coincide)"};
    double worst = 0.0;
    for (std::int64_t offset = -kMaxOffset; offset <= kMaxOffset; ++offset) {
      const std::int64_t m = std::max<std::int64_t>(0, -offset), n = m + offset;
      const double s0 = score(m, n), s1 = score(m + kShift, n + kShift);
      plain.x.push_back(double(offset));
      plain.y.push_back(s0);
      shifted.x.push_back(double(offset));
      shifted.y.push_back(s1);
      worst = std::max(worst, std::abs(s1 - s0));
    }
    const auto [lowest, highest] = std::minmax_element(plain.y.begin(), plain.y.end());
    run.check_max_abs_diff("score at (m, n) equals score at (m + 10, n + 10) for n - m in -32..32",
                           worst, 1e-4);
    run.check("the score does change with the offset", *highest - *lowest > 1.0, *highest - *lowest,
              "scores range from " + workbench::scientific(*lowest) + " to " +
                  workbench::scientific(*highest));

    run.print(
        "Checks 6-8. Causal self-attention with RoPE over the sentence, H = 4, d_model = 64.");
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Tensor2 embedded = embed_tokens(tokens);  // (T, d_model)
    const Tensor3 x3 = xt::reshape_view(embedded, std::array<std::size_t, 3>{1, T, kDModel});
    const minimodel::MultiHeadAttention weights(kDModel, kHeads, kSeed + 1);
    auto attend = [&](const Tensor3& input, const Tensor2& w_q, const Tensor2& w_k,
                      const Positions& positions) {
      return minimodel::rope_self_attention(input, w_q, w_k, weights.w_v(), weights.w_o(), kHeads,
                                            rope, positions);
    };
    const minimodel::MultiHeadResult at_start =
        attend(x3, weights.w_q(), weights.w_k(), positions_from(0, T));
    const minimodel::MultiHeadResult later =
        attend(x3, weights.w_q(), weights.w_k(), positions_from(40, T));
    run.record("rope_self_attention_output", at_start.output, 1e-5, "C");  // the tests' kTolerance
    run.record("rope_self_attention_weights", at_start.weights, 1e-5, "C");
    run.check_max_abs_diff("positions 40..47 give the output of positions 0..7",
                           workbench::max_abs_diff(later.output, at_start.output), 1e-5);
    // The weights at positions 0..7 for the attention explorer: `workbook explore 05`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page("Lab 05: causal self-attention with RoPE over the sentence (seeded "
                            "weights, positions 0 to 7)",
                            tokens, {at_start.weights}));

    const Tensor2 zero = xt::zeros<float>({kDModel, kDModel});
    run.check_max_abs_diff(
        "with W_Q = W_K = 0 the output ignores positions (V is not rotated)",
        workbench::max_abs_diff(attend(x3, zero, zero, positions_from(40, T)).output,
                                attend(x3, zero, zero, positions_from(0, T)).output),
        0.0);

    auto changed_tokens = tokens;
    changed_tokens.back() = "she";
    const Tensor2 changed = embed_tokens(changed_tokens);
    const Tensor3 changed3 = xt::reshape_view(changed, std::array<std::size_t, 3>{1, T, kDModel});
    const Tensor3 y_changed =
        attend(changed3, weights.w_q(), weights.w_k(), positions_from(0, T)).output;
    auto earlier = xt::range(0, T - 1);
    run.check_max_abs_diff("replacing \"he\" by \"she\" leaves positions 0..T-2 unchanged (causal)",
                           workbench::max_abs_diff(xt::view(y_changed, 0, earlier),
                                                   xt::view(at_start.output, 0, earlier)),
                           1e-6);

    run.print("Check 9. A position outside the table is rejected.");
    std::string message = "nothing was thrown";
    bool rejected = false;
    try {
      rope.apply(q, Positions{std::int64_t{kMaxSeqLen}});
    } catch (const std::invalid_argument& e) {
      rejected = true;
      message = e.what();
    }
    run.check("position 64 throws std::invalid_argument", rejected, double(kMaxSeqLen), message);

    workbench::LinePlot plot;
    plot.title =
        "Lab 05: RoPE score q\u00b7k against the offset n \u2212 m (d_head 16, theta 10000)";
    plot.x_label = "offset n \u2212 m (key position \u2212 query position)";
    plot.y_label = "score q\u00b7k after rotation";
    plot.series = {plain, shifted};
    workbench::render_line_plot(run.artifact("score_vs_offset.png"), plot);

    workbench::HeatmapFigure frequencies;
    frequencies.title = "Lab 05: RoPE rotation tables, angle = pos \u00b7 10000^(\u22122k/16)";
    frequencies.panels = {{rope.cos_table(), "cos(angle)"}, {rope.sin_table(), "sin(angle)"}};
    frequencies.grid_cols = 2;
    frequencies.row_axis = "position";
    frequencies.col_axis = "pair index k";
    frequencies.vmin = -1.0f;
    frequencies.vmax = 1.0f;
    frequencies.colorbar_label = "cos or sin of the angle";
    workbench::render_heatmaps(run.artifact("frequencies.png"), frequencies);
  });
}
