// Lab 03 verify: GPT-2's fused c_attn equals lab 01's three separate matrices, the parameter count
// 4 d² + 4 d, the key-bias invariance, and a heatmap of the 12 heads' causal weights.
#include <random>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/heatmap.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/gpt2_attention.hpp"
#include "minimodel/shapes.hpp"

using lab_setup::embed_tokens;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::GPT2Attention;
using minimodel::Tensor1;
using minimodel::Tensor2;

namespace {

// Column block r (0 = Q, 1 = K, 2 = V) of c_attn_weight: lab 01's (d_model, d_model) matrix.
Tensor2 role_block(const Tensor2& c_attn_weight, std::size_t r) {
  const std::size_t d = c_attn_weight.shape(0);
  return xt::view(c_attn_weight, xt::all(), xt::range(r * d, (r + 1) * d));
}

}  // namespace

int main(int argc, char** argv) {
  constexpr std::size_t kDModel = 768, kHeads = 12;  // GPT-2 small
  const nlohmann::json config = lab_setup::toy_config(
      {{"init_std", 0.02}, {"bias_seed", kSeed + 2}, {"causal", true}}, kDModel, kHeads);
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size(), d = kDModel;
    const Tensor2 x = embed_tokens(tokens, kDModel);  // (T, d_model)

    // For `workbook diff`, one output of each block, each before the next block's code runs (a TODO
    // stub stops the program). The weights, split_qkv's blocks and the count are exact in the lab
    // 03 tests; the forward's 1e-5 is their kTolerance. A small layer (d_model 8, H 2) keeps the
    // recorded weights small.
    {
      const GPT2Attention small(8, 2, kSeed + 1);
      run.record("constructor_c_attn_weight", small.c_attn_weight(), 0.0, "A");
      run.record("constructor_c_proj_weight", small.c_proj_weight(), 0.0, "A");
      const minimodel::Tensor3 fused = xt::reshape_view(
          xt::arange<float>(2 * 3 * 24), std::array<std::size_t, 3>{2, 3, 24});  // (B, T, 3 d)
      const minimodel::QKV qkv = minimodel::split_qkv(fused);
      run.record("split_qkv_q", qkv.q, 0.0, "B");
      run.record("split_qkv_k", qkv.k, 0.0, "B");
      run.record("split_qkv_v", qkv.v, 0.0, "B");
    }
    GPT2Attention gpt2(kDModel, kHeads, kSeed + 1);
    const Tensor2 y = gpt2.forward(x);                            // causal, as in GPT-2
    const minimodel::Tensor4 weights = gpt2.attention_weights();  // (1, H, T, T)
    run.record("forward_output", y, 1e-5, "C");
    run.record("forward_attention_weights", weights, 1e-5, "C");
    run.record("parameter_count", xt::xarray<float>({float(gpt2.parameter_count())}), 0.0, "D");

    run.print(
        "Checks 1-2. One fused c_attn (768 x 2304) equals lab 01's W_Q, W_K, W_V "
        "(768 x 768 each),");
    run.print(
        "its column blocks, with lab 02's causal mask and W_O = c_proj_weight "
        "(biases are zero at init).");
    const Tensor2& w = gpt2.c_attn_weight();
    minimodel::MultiHeadAttention separate(role_block(w, 0), role_block(w, 1), role_block(w, 2),
                                           gpt2.c_proj_weight(), kHeads);
    const Tensor2 y_separate = separate.forward(x, minimodel::causal_mask(T));
    run.check_max_abs_diff("fused output equals separate matrices",
                           workbench::max_abs_diff(y, y_separate), 1e-6);
    run.check_max_abs_diff("fused attention weights equal separate matrices",
                           workbench::max_abs_diff(weights, separate.attention_weights()), 1e-6);

    run.print("Check 3. Parameters: c_attn (d x 3d + 3d) and c_proj (d x d + d).");
    const std::size_t formula = 4 * d * d + 4 * d;
    const std::size_t counted = gpt2.parameter_count();
    const std::size_t from_tensors = gpt2.c_attn_weight().size() + gpt2.c_attn_bias().size() +
                                     gpt2.c_proj_weight().size() + gpt2.c_proj_bias().size();
    run.check("parameter count is 4 d_model^2 + 4 d_model",
              counted == formula && counted == from_tensors, double(counted),
              "parameter_count() = " + std::to_string(counted) + ", tensors hold " +
                  std::to_string(from_tensors) +
                  ", 4 x 768^2 + 4 x 768 = " + std::to_string(formula));

    run.print("Checks 4-5. Causal weights of H = 12 heads over " + std::to_string(T) +
              " tokens: " + minimodel::shape_of(weights) + ".");
    const float future_weight =
        xt::amax(xt::view(weights, 0) * xt::triu(xt::ones<float>({T, T}), 1))();
    run.check("no weight on future tokens", future_weight == 0.0f, future_weight,
              "largest weight above the diagonal = " + workbench::scientific(future_weight));
    const Tensor2 row_sums = xt::sum(xt::view(weights, 0), {2});
    run.check_max_abs_diff("every attention row sums to 1",
                           workbench::max_abs_diff(row_sums, xt::ones<float>({kHeads, T})), 1e-5);

    run.print("Checks 6-7. Add a random N(0, 1) vector to one role's part of c_attn_bias.");
    std::mt19937_64 generator(kSeed + 2);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Tensor1 extra({d});
    for (float& value : extra) value = normal(generator);
    auto shifted_output = [&](std::size_t role) {
      Tensor1 bias = gpt2.c_attn_bias();
      xt::view(bias, xt::range(role * d, (role + 1) * d)) += extra;
      GPT2Attention shifted(gpt2.c_attn_weight(), bias, gpt2.c_proj_weight(), gpt2.c_proj_bias(),
                            kHeads);
      return Tensor2(shifted.forward(x));
    };
    run.check_max_abs_diff("a key bias leaves the output unchanged",
                           workbench::max_abs_diff(shifted_output(1), y), 1e-5);
    const double query_change = workbench::max_abs_diff(shifted_output(0), y);
    run.check("a query bias changes the output", query_change > 1e-3, query_change,
              "max |diff| = " + workbench::scientific(query_change));

    workbench::HeatmapFigure figure;
    figure.title =
        "Lab 03: causal attention weights of GPT-2's 12 heads at initialisation (d_model = 768)";
    const xt::xtensor<bool, 2> future = minimodel::causal_mask(T) < 0.0f;
    for (std::size_t h = 0; h < kHeads; ++h)
      figure.panels.push_back({xt::view(weights, 0, h), "head " + std::to_string(h), future});
    figure.grid_rows = 3;
    figure.grid_cols = 4;
    figure.row_labels = figure.col_labels = tokens;
    figure.excluded_label = "masked (a future key)";
    workbench::render_heatmaps(run.artifact("heatmap.png"), figure);
    // The same weights for the attention explorer: `workbook explore 03`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page("Lab 03: GPT-2's 12 causal heads at initialisation over the sentence",
                            tokens, {weights}));

    // Query i sees i + 1 keys, so uniform attention is 1 / (i + 1) and fades down the rows; scaled
    // by (i + 1), 1 means "as much as uniform", and the heads' differences show.
    workbench::HeatmapFigure scaled = figure;
    scaled.title =
        "Lab 03: the same weights times (query position + 1); 1 = uniform over the visible keys";
    xt::xtensor<float, 2> visible_keys = xt::zeros<float>({T, T});
    for (std::size_t i = 0; i < T; ++i) xt::view(visible_keys, i) = static_cast<float>(i + 1);
    for (std::size_t h = 0; h < kHeads; ++h)
      scaled.panels[h].values = xt::view(weights, 0, h) * visible_keys;
    scaled.vmax = 2.0f;  // uniform (1) in the middle; the few cells above 2 are yellow too
    scaled.colorbar_label = "weight x (query position + 1); 2 or more: yellow";
    workbench::render_heatmaps(run.artifact("heatmap_scaled.png"), scaled);
  });
}
