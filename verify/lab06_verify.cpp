// Lab 06 verify: 5 decoder queries attend over a padded batch of two 8-position encoder sequences.
// Padded keys get weight exactly 0, unmasked rows sum to 1, a fully masked row gives zero weights
// and output b_o, dropout is the identity in evaluation mode and reproducible in training mode;
// heatmap.png shows the padded sequence per head.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/heatmap.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/shapes.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::CrossAttentionOptions;
using minimodel::MultiheadCrossAttention;
using minimodel::Tensor1;
using minimodel::Tensor2;
using minimodel::Tensor3;
using minimodel::Tensor4;

namespace {

constexpr std::size_t kQueries = 5, kPadded = 3;
constexpr std::uint64_t kDropoutSeed = 2027;
constexpr float kDropout = 0.1f;
constexpr float kBiasScale = 0.1f;

const std::vector<std::string>& decoder_tokens() {
  static const std::vector<std::string> tokens(toy_sentence().begin(),
                                               toy_sentence().begin() + kQueries);
  return tokens;
}

// Two encoder sequences of 8 positions; the second ends in 3 <pad>.
const std::vector<std::vector<std::string>>& encoder_tokens() {
  static const std::vector<std::vector<std::string>> tokens = {
      toy_sentence(), {"<bos>", "we", "rest", ",", "they", "<pad>", "<pad>", "<pad>"}};
  return tokens;
}

// (B, T, d_model) from one (T, d_model) embedding per sequence.
Tensor3 embed_batch(const std::vector<std::vector<std::string>>& sequences) {
  Tensor3 batch({sequences.size(), sequences[0].size(), kDModel});
  for (std::size_t b = 0; b < sequences.size(); ++b)
    xt::view(batch, b) = embed_tokens(sequences[b]);
  return batch;
}

// The seeded Xavier weights with small random biases, so that "output = b_o" is a real check.
MultiheadCrossAttention make_module(float dropout) {
  const MultiheadCrossAttention seeded(kDModel, kHeads, kSeed + 1);
  std::mt19937_64 generator(kSeed + 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::optional<Tensor1>> biases(4);
  for (auto& b : biases) {
    b = Tensor1::from_shape({kDModel});
    for (float& value : *b) value = normal(generator) * kBiasScale;
  }
  return MultiheadCrossAttention(seeded.w_q(), seeded.w_k(), seeded.w_v(), seeded.w_o(), biases[0],
                                 biases[1], biases[2], biases[3], kHeads, dropout, kDropoutSeed);
}

}  // namespace

int main(int argc, char** argv) {
  const nlohmann::json config = {{"d_model", kDModel},
                                 {"n_heads", kHeads},
                                 {"decoder_tokens", decoder_tokens()},
                                 {"encoder_tokens", encoder_tokens()},
                                 {"embedding_seed", kSeed},
                                 {"weight_seed", kSeed + 1},
                                 {"bias_seed", kSeed + 2},
                                 {"bias_scale", kBiasScale},
                                 {"dropout", kDropout},
                                 {"dropout_seed", kDropoutSeed}};
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    constexpr double kTolerance = 1e-5;  // float32 sums over S = 8 keys and d_model = 64 terms
    const auto& encoder = encoder_tokens();
    const std::size_t B = encoder.size(), T = kQueries, S = encoder[0].size();
    const Tensor3 query = embed_batch({decoder_tokens(), decoder_tokens()});  // (B, T, d_model)
    const Tensor3 memory = embed_batch(encoder);                              // (B, S, d_model)
    CrossAttentionOptions options;
    options.key_padding_mask = minimodel::BoolTensor2(xt::zeros<bool>({B, S}));
    for (std::size_t s = S - kPadded; s < S; ++s) (*options.key_padding_mask)(1, s) = true;

    run.print("Checks 1-2. " + std::to_string(T) + " decoder queries over 2 encoder sequences of " +
              std::to_string(S) + " keys; sequence 1 ends in " + std::to_string(kPadded) +
              " <pad>.");
    // For `workbook diff`, each block's outputs: the seeded weights (exact, as
    // MultiheadCrossAttention.SeededWeightsFollowTheBlueprint), Block B's masks on the verify
    // program's padding and a (T, S) mask removing the keys s > t (exact: they are 0, 1 and the
    // masks' own values), and the forward (1e-5, the tests' kTolerance).
    {
      const MultiheadCrossAttention seeded(kDModel, kHeads, kSeed + 1);
      run.record("constructor_w_q", seeded.w_q(), 0.0, "A");
      run.record("constructor_w_k", seeded.w_k(), 0.0, "A");
      run.record("constructor_w_v", seeded.w_v(), 0.0, "A");
      run.record("constructor_w_o", seeded.w_o(), 0.0, "A");
      const Tensor2 later_keys =
          xt::where(xt::triu(xt::ones<float>({T, S}), 1) > 0.5f, minimodel::kMaskedScore, 0.0f);
      CrossAttentionOptions masks = options;
      masks.attn_mask = minimodel::as_attn_mask(later_keys);
      run.record("as_attn_mask", *masks.attn_mask, 0.0, "B");
      run.record("removed_keys", xt::cast<float>(minimodel::removed_keys(masks, B, T, S)), 0.0,
                 "B");
    }
    MultiheadCrossAttention m = make_module(0.0f);
    const minimodel::AttentionOutput out = m.forward(query, memory, memory, options);
    const Tensor4& weights = *out.weights;  // (B, H, T, S)
    run.record("forward_output", out.output, 1e-5, "C");
    run.record("forward_attention_weights", weights, 1e-5, "C");
    run.print("output " + minimodel::shape_of(out.output) + ", weights " +
              minimodel::shape_of(weights));
    const auto padded = xt::view(weights, 1, xt::all(), xt::all(), xt::range(S - kPadded, S));
    const float pad_weight = xt::amax(padded)();
    run.check("padded keys get weight exactly 0", pad_weight == 0.0f, pad_weight,
              "largest weight on a <pad> key = " + workbench::scientific(pad_weight));
    const Tensor3 row_sums = xt::sum(weights, {3});
    run.check_max_abs_diff("every unmasked row sums to 1",
                           workbench::max_abs_diff(row_sums, xt::ones<float>({B, kHeads, T})),
                           kTolerance);

    run.print("Checks 3-4. attn_mask removes keys 0-4 for query 2 (\"" + decoder_tokens()[2] +
              "\"): with the padding, that row of sequence 1 has no key left.");
    Tensor2 mask = xt::zeros<float>({T, S});
    for (std::size_t s = 0; s < S - kPadded; ++s) mask(2, s) = minimodel::kMaskedScore;
    CrossAttentionOptions masked = options;
    masked.attn_mask = minimodel::as_attn_mask(mask);
    const minimodel::AttentionOutput empty = m.forward(query, memory, memory, masked);
    const auto empty_row = xt::view(*empty.weights, 1, xt::all(), 2);  // (H, S)
    const float kept_sum = xt::sum(xt::view(*empty.weights, 0, 0, 2))();
    const float empty_weight = xt::amax(xt::abs(empty_row))();
    run.check(
        "a fully masked row gets zero weights, not NaN", empty_weight == 0.0f, empty_weight,
        "largest |weight| in that row, over the 4 heads = " + workbench::scientific(empty_weight));
    run.print("  the same row of sequence 0 keeps keys 5-7; its weights sum to " +
              std::to_string(kept_sum));
    run.check_max_abs_diff("its output is b_o",
                           workbench::max_abs_diff(xt::view(empty.output, 1, 2), *m.b_o()), 0.0);

    run.print("Checks 5-6. Dropout p = " + std::to_string(kDropout).substr(0, 3) +
              " on the attention weights, seed " + std::to_string(kDropoutSeed) + ".");
    MultiheadCrossAttention dropping = make_module(kDropout);
    const minimodel::AttentionOutput eval = dropping.forward(query, memory, memory, options);
    run.check_max_abs_diff("evaluation mode: dropout is the identity",
                           workbench::max_abs_diff(eval.output, out.output), 0.0);
    MultiheadCrossAttention again = make_module(kDropout);
    dropping.train();
    again.train();
    const minimodel::AttentionOutput first = dropping.forward(query, memory, memory, options);
    const minimodel::AttentionOutput second = again.forward(query, memory, memory, options);
    const double diff = workbench::max_abs_diff(first.output, second.output);
    const auto unpadded_zeros = xt::sum(xt::equal(*first.weights, 0.0f))() -
                                xt::sum(xt::equal(weights, 0.0f))();  // minus the <pad> zeros
    const std::size_t unpadded = weights.size() - kHeads * T * kPadded;
    run.check("training mode: the same seed gives the same dropout", diff == 0.0, diff,
              "max |diff| = " + workbench::scientific(diff) + "; " +
                  std::to_string(unpadded_zeros) + " of " + std::to_string(unpadded) +
                  " unpadded weights dropped (" +
                  std::to_string(100.0 * double(unpadded_zeros) / double(unpadded)).substr(0, 4) +
                  "%), output changed by up to " +
                  workbench::scientific(workbench::max_abs_diff(first.output, out.output)));

    // Padded keys are hatched: their weight is exactly 0, which is not a colour of the scale.
    workbench::HeatmapFigure figure;
    figure.title = "Lab 06: cross-attention over padded encoder sequence 1 (H = 4, d_model = 64)";
    xt::xtensor<bool, 2> pad_keys = xt::zeros<bool>({T, S});
    xt::view(pad_keys, xt::all(), xt::range(S - kPadded, S)) = true;
    for (std::size_t h = 0; h < kHeads; ++h)
      figure.panels.push_back({xt::view(weights, 1, h), "head " + std::to_string(h), pad_keys});
    figure.grid_rows = figure.grid_cols = 2;
    figure.row_labels = decoder_tokens();
    figure.col_labels = encoder[1];
    figure.row_axis = "decoder query";
    figure.col_axis = "encoder key";
    figure.excluded_label = "<pad> key: weight 0";
    figure.vmax = std::max(0.05f, xt::amax(weights)());
    workbench::render_heatmaps(run.artifact("heatmap.png"), figure);
    // The same weights for the attention explorer (`workbook explore 06`): the keys are the
    // encoder's sequence, a strip of their own.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::cross_attention_page(
            "Lab 06: decoder queries over padded encoder sequence 1 (H = 4, d_model = 64)",
            decoder_tokens(), encoder[1], xt::view(weights, xt::range(1, 2))));
  });
}
