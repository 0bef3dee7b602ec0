// Lab 13: a GPT that writes. The MLP, the block and the whole model against PyTorch's autograd
// (tests/fixtures/gpt_*, scripts/fixture_cases/lab13.py) and central finite differences in double
// precision; AdamW, clipping and the schedule against torch.optim.AdamW step by step; training,
// evaluation and bits per byte by their definitions; sampling by its edge cases and the KV cache
// against the full forward at every position.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/model/gpt.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "tensors/npy_io.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::Fixture;
using testing::fixtures_dir;
using testing::kTorchTolerance;
using testing::throws_invalid_argument;

using Logits = xt::xtensor<float, 3>;
using LogitsD = xt::xtensor<double, 3>;

// Central differences in double with h = 1e-5 have a truncation error of order h² · f''' ≈ 1e-10
// and a rounding error of order 1e-16 / h ≈ 1e-11 for these O(1) losses: a correct gradient agrees
// to about 1e-9 of max(1, max |numeric|), and 1e-6 leaves 1000x headroom while any wrong term
// (a missing residual, a transposed weight) is off by O(1).
constexpr double kStep = 1e-5;
constexpr double kFiniteDifferenceTolerance = 1e-6;

// ---- helpers -----------------------------------------------------------------------------------

// V 7, max_len 6, d_model 8, 2 heads, 2 layers: small enough for finite differences over every
// parameter.
GptConfig tiny_config() { return {7, 6, 8, 2, 2}; }

// Parameters that make every term matter, unlike GPT-2's small initialisation: weights N(0, 1) /
// sqrt(rows), embeddings 0.5 N(0, 1), LayerNorm gains 1 + 0.1 N(0, 1), biases 0.3 N(0, 1).
template <class Real>
GptParams<Real> random_params(const GptConfig& config, std::uint64_t seed) {
  GptParams<Real> params = zero_gpt<Real>(config);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const ParamTensor<Real>& t : parameter_tensors(params)) {
    const bool gain = t.name.find("gain") != std::string::npos;
    const bool embedding = t.name == "wte" || t.name == "wpe";
    for (std::size_t i = 0; i < t.size(); ++i) {
      const double n = normal(rng);
      t.data[i] = Real(t.decay     ? n / std::sqrt(double(t.shape[0]))
                       : embedding ? 0.5 * n
                       : gain      ? 1 + 0.1 * n
                                   : 0.3 * n);
    }
  }
  return params;
}

BatchTokens tokens_of(const std::vector<std::vector<TokenId>>& rows) {
  BatchTokens tokens({rows.size(), rows[0].size()});
  for (std::size_t b = 0; b < rows.size(); ++b)
    for (std::size_t t = 0; t < rows[b].size(); ++t) tokens(b, t) = rows[b][t];
  return tokens;
}

// Two sequences of 5 tokens of tiny_config's vocabulary; token 6 never appears as an input.
const std::vector<std::vector<TokenId>> kTinyInputs = {{1, 0, 3, 1, 2}, {2, 5, 0, 4, 3}};
const std::vector<std::vector<TokenId>> kTinyTargets = {{0, 3, 1, 2, 6}, {5, 0, 4, 3, 3}};

// The array `name` of fixture case `fixture`, any rank.
xt::xarray<float> fixture_array(const std::string& fixture, const std::string& name) {
  return workbench::load_npy_f32(fixtures_dir() / fixture / (name + ".npy"));
}

// Copies fixture arrays into every tensor of `params` whose name starts with `prefix`, reading
// the array named as the tensor without the prefix.
void load_params(GptParams<float>& params, const std::string& fixture,
                 const std::string& prefix = "") {
  for (const ParamTensor<float>& t : parameter_tensors(params)) {
    if (t.name.compare(0, prefix.size(), prefix) != 0) continue;
    const xt::xarray<float> a = fixture_array(fixture, t.name.substr(prefix.size()));
    ASSERT_EQ(a.size(), t.size()) << t.name;
    std::copy(a.begin(), a.end(), t.data);
  }
}

// A one-layer model whose layer is a fixture's block (gpt_block's parameters).
GptParams<float> block_fixture_params() {
  GptParams<float> params = zero_gpt<float>({1, 5, 8, 2, 1});
  load_params(params, "gpt_block", "h0.");
  return params;
}

// all_close at the scale of the expected values: tolerance × max(1, max |expected|).
template <class A, class E>
::testing::AssertionResult close_at_scale(const A& actual, const E& expected, double tolerance) {
  const xt::xarray<double> e = expected;
  const double scale = std::max(1.0, e.size() ? double(xt::amax(xt::abs(e))()) : 0.0);
  return all_close(actual, expected, tolerance * scale);
}

// A flat tensor as an xarray of its shape, for all_close's messages.
template <class T>
xt::xarray<double> as_array(const ParamTensor<T>& t) {
  xt::xarray<double> a = xt::zeros<double>(t.shape);
  std::copy(t.data, t.data + t.size(), a.begin());
  return a;
}

// The worst |numeric − analytic| over every element of one tensor, divided by max(1, max
// |numeric|), numeric being central differences of `loss` with respect to data[i].
double finite_difference_error(double* data, std::size_t n, const double* analytic,
                               const std::function<double()>& loss) {
  std::vector<double> numeric(n);
  double scale = 1, worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double saved = data[i];
    data[i] = saved + kStep;
    const double plus = loss();
    data[i] = saved - kStep;
    const double minus = loss();
    data[i] = saved;
    numeric[i] = (plus - minus) / (2 * kStep);
    scale = std::max(scale, std::abs(numeric[i]));
  }
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(numeric[i] - analytic[i]));
  return worst / scale;
}

double sum_product(const Matrix<double>& a, const Matrix<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

Matrix<double> random_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix<double> m({rows, cols});
  for (double& x : m) x = normal(rng);
  return m;
}

// ---- Block A: GELU and the MLP ------------------------------------------------------------------

TEST(Gelu, IsGpt2sTanhFormAndTendsToReluFarFromZero) {
  const Matrix<double> x = {{-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0}};
  const Matrix<double> y = gelu(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x.flat(i);
    const double expected =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y.flat(i), expected, 1e-15) << "x = " << v;
  }
  // Far from 0 GELU is ReLU: tanh saturates to ±1 (to 1e-12 at |x| = 10).
  const Matrix<double> far = gelu(Matrix<double>{{-10.0, 10.0}});
  EXPECT_NEAR(far(0, 0), 0.0, 1e-12);
  EXPECT_NEAR(far(0, 1), 10.0, 1e-12);
  // GPT-2's tanh form is not erf's: at x = 1 they differ by 1.5e-4.
  EXPECT_GT(std::abs(y(0, 5) - 0.5 * (1 + std::erf(1 / std::sqrt(2.0)))), 1e-4);
}

TEST(GeluBackward, MatchesFiniteDifferences) {
  Matrix<double> x = 2.0 * random_matrix(3, 7, 1301);
  const Matrix<double> r = random_matrix(3, 7, 1302);
  const Matrix<double> dx = gelu_backward(x, r);
  const auto loss = [&] { return sum_product(gelu(x), r); };
  EXPECT_LT(finite_difference_error(x.data(), x.size(), dx.data(), loss),
            kFiniteDifferenceTolerance);
}

TEST(GeluBackward, RejectsShapesThatDiffer) {
  const Matrix<float> x = xt::zeros<float>({2, 3}), d_y = xt::zeros<float>({3, 2});
  EXPECT_TRUE(throws_invalid_argument([&] { gelu_backward(x, d_y); }, {"(2, 3)", "(3, 2)"}));
}

GptMlp<float> mlp_fixture() {
  return {fixture_array("gpt_mlp", "w_fc"), fixture_array("gpt_mlp", "b_fc"),
          fixture_array("gpt_mlp", "w_proj"), fixture_array("gpt_mlp", "b_proj")};
}

TEST(MlpForward, MatchesTorch) {
  const Matrix<float> x = fixture_array("gpt_mlp", "x");
  MlpTape<float> tape;
  const Matrix<float>& y = mlp_forward(mlp_fixture(), x, tape);
  EXPECT_TRUE(all_close(y, fixture_array("gpt_mlp", "y"), kTorchTolerance));
  EXPECT_EQ(&y, &tape.out);
}

TEST(MlpBackward, MatchesTorchAutograd) {
  const GptMlp<float> mlp = mlp_fixture();
  const Matrix<float> x = fixture_array("gpt_mlp", "x"), d_out = fixture_array("gpt_mlp", "d_out");
  MlpTape<float> tape;
  mlp_forward(mlp, x, tape);
  GptMlp<float> grads;
  const Matrix<float>& dx = mlp_backward(mlp, tape, d_out, grads);
  EXPECT_TRUE(close_at_scale(dx, fixture_array("gpt_mlp", "grad.x"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale(grads.w_fc, fixture_array("gpt_mlp", "grad.w_fc"), kTorchTolerance));
  EXPECT_TRUE(close_at_scale(grads.b_fc, fixture_array("gpt_mlp", "grad.b_fc"), kTorchTolerance));
  EXPECT_TRUE(
      close_at_scale(grads.w_proj, fixture_array("gpt_mlp", "grad.w_proj"), kTorchTolerance));
  EXPECT_TRUE(
      close_at_scale(grads.b_proj, fixture_array("gpt_mlp", "grad.b_proj"), kTorchTolerance));
}

TEST(MlpBackward, MatchesFiniteDifferencesForTheInputAndEveryParameter) {
  const GptConfig config{1, 1, 6, 1, 1};
  GptParams<double> params = random_params<double>(config, 1303);
  GptMlp<double>& mlp = params.layers[0].mlp;
  Matrix<double> x = random_matrix(5, 6, 1304);
  const Matrix<double> r = random_matrix(5, 6, 1305);
  MlpTape<double> tape;
  mlp_forward(mlp, x, tape);
  GptMlp<double> grads;
  const Matrix<double> dx = mlp_backward(mlp, tape, r, grads);
  const auto loss = [&] {
    MlpTape<double> fresh;
    return sum_product(mlp_forward(mlp, x, fresh), r);
  };
  EXPECT_LT(finite_difference_error(x.data(), x.size(), dx.data(), loss),
            kFiniteDifferenceTolerance)
      << "dx";
  const std::vector<std::pair<Matrix<double>*, const Matrix<double>*>> matrices = {
      {&mlp.w_fc, &grads.w_fc}, {&mlp.w_proj, &grads.w_proj}};
  for (const auto& [p, g] : matrices)
    EXPECT_LT(finite_difference_error(p->data(), p->size(), g->data(), loss),
              kFiniteDifferenceTolerance);
  const std::vector<std::pair<Vector<double>*, const Vector<double>*>> vectors = {
      {&mlp.b_fc, &grads.b_fc}, {&mlp.b_proj, &grads.b_proj}};
  for (const auto& [p, g] : vectors)
    EXPECT_LT(finite_difference_error(p->data(), p->size(), g->data(), loss),
              kFiniteDifferenceTolerance);
}

TEST(MlpForward, RejectsParametersOfTheWrongShape) {
  const Matrix<float> x = xt::zeros<float>({3, 8});
  MlpTape<float> tape;
  GptMlp<float> mlp = mlp_fixture();
  mlp.w_fc = xt::zeros<float>({8, 16});
  EXPECT_TRUE(throws_invalid_argument([&] { mlp_forward(mlp, x, tape); }, {"(8, 16)", "(8, 32)"}));
  mlp = mlp_fixture();
  mlp.b_proj = xt::zeros<float>({4});
  EXPECT_TRUE(throws_invalid_argument([&] { mlp_forward(mlp, x, tape); }, {"(4)", "(8)"}));
  const Matrix<float> narrow = xt::zeros<float>({3, 6});
  EXPECT_TRUE(
      throws_invalid_argument([&] { mlp_forward(mlp_fixture(), narrow, tape); }, {"(3, 6)"}));
}

TEST(MlpBackward, RejectsADOutOfTheWrongShape) {
  const GptMlp<float> mlp = mlp_fixture();
  MlpTape<float> tape;
  mlp_forward(mlp, Matrix<float>(fixture_array("gpt_mlp", "x")), tape);
  const Matrix<float> d_out = xt::zeros<float>({6, 8});
  GptMlp<float> grads;
  EXPECT_TRUE(throws_invalid_argument([&] { mlp_backward(mlp, tape, d_out, grads); },
                                      {"(6, 8)", "(7, 8)"}));
}

// ---- Block A: the block
// --------------------------------------------------------------------------

TEST(GptBlockForward, MatchesTorch) {
  const GptParams<float> params = block_fixture_params();
  const Matrix<float> x = fixture_array("gpt_block", "x");
  GptBlockTape<float> tape;
  const Matrix<float>& y = gpt_block_forward(params.layers[0], 2, 2, x, tape);
  EXPECT_TRUE(close_at_scale(y, fixture_array("gpt_block", "y"), kTorchTolerance));
  EXPECT_TRUE(all_close(tape.probs, fixture_array("gpt_block", "probs"), kTorchTolerance));
}

TEST(GptBlockBackward, MatchesTorchAutograd) {
  const GptParams<float> params = block_fixture_params();
  const Matrix<float> x = fixture_array("gpt_block", "x");
  GptBlockTape<float> tape;
  gpt_block_forward(params.layers[0], 2, 2, x, tape);
  GptParams<float> grads = zero_gpt<float>(params.config);
  const Matrix<float>& dx =
      gpt_block_backward(params.layers[0], 2, tape,
                         Matrix<float>(fixture_array("gpt_block", "d_out")), grads.layers[0]);
  EXPECT_TRUE(close_at_scale(dx, fixture_array("gpt_block", "grad.x"), kTorchTolerance));
  for (const ParamTensor<float>& g : parameter_tensors(grads)) {
    if (g.name.rfind("h0.", 0) != 0) continue;
    EXPECT_TRUE(close_at_scale(as_array(g), fixture_array("gpt_block", "grad." + g.name.substr(3)),
                               kTorchTolerance))
        << g.name;
  }
}

TEST(GptBlockBackward, MatchesFiniteDifferencesForTheInputAndEveryParameter) {
  GptParams<double> params = random_params<double>({1, 4, 8, 2, 1}, 1306);
  const std::size_t B = 2, T = 4;
  Matrix<double> x = random_matrix(B * T, 8, 1307);
  const Matrix<double> r = random_matrix(B * T, 8, 1308);
  GptBlockTape<double> tape;
  gpt_block_forward(params.layers[0], 2, B, x, tape);
  GptParams<double> grads = zero_gpt<double>(params.config);
  const Matrix<double> dx = gpt_block_backward(params.layers[0], 2, tape, r, grads.layers[0]);
  const auto loss = [&] {
    GptBlockTape<double> fresh;
    return sum_product(gpt_block_forward(params.layers[0], 2, B, x, fresh), r);
  };
  EXPECT_LT(finite_difference_error(x.data(), x.size(), dx.data(), loss),
            kFiniteDifferenceTolerance)
      << "dx";
  const auto p = parameter_tensors(params);
  const GptParams<double>& const_grads = grads;
  const auto g = parameter_tensors(const_grads);
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i].name.rfind("h0.", 0) != 0) continue;
    EXPECT_LT(finite_difference_error(p[i].data, p[i].size(), g[i].data, loss),
              kFiniteDifferenceTolerance)
        << p[i].name;
  }
}

TEST(GptBlockForward, NoTokenSeesALaterTokenOrAnotherSequence) {
  const GptParams<float> params = random_params<float>({1, 5, 8, 2, 1}, 1309);
  Matrix<float> x = xt::cast<float>(random_matrix(10, 8, 1310));  // 2 sequences of 5
  GptBlockTape<float> tape;
  const Matrix<float> before = gpt_block_forward(params.layers[0], 2, 2, x, tape);
  // sequence 1, token 3; not a constant, which LayerNorm would remove
  for (std::size_t j = 0; j < 8; ++j) x(5 + 3, j) += 0.3f * float(j) - 1.0f;
  const Matrix<float> after = gpt_block_forward(params.layers[0], 2, 2, x, tape);
  for (std::size_t row = 0; row < 10; ++row) {
    const bool may_change = row >= 8;  // sequence 1's tokens 3 and 4
    const bool changed = xt::view(before, row) != xt::view(after, row);
    EXPECT_EQ(changed, may_change) << "row " << row;
  }
  // Every row of every head's weights sums to 1 over the keys it may see, and is 0 after them.
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t t = 0; t < 5; ++t) {
        double sum = 0;
        for (std::size_t s = 0; s < 5; ++s) {
          if (s > t) {
            EXPECT_EQ(tape.probs(b, h, t, s), 0.0f);
          }
          sum += tape.probs(b, h, t, s);
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);
      }
}

TEST(GptBlockForward, RejectsBadHeadsBatchesAndShapes) {
  const GptParams<float> params = block_fixture_params();
  const GptLayer<float>& layer = params.layers[0];
  const Matrix<float> x = fixture_array("gpt_block", "x");  // (10, 8)
  GptBlockTape<float> tape;
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_block_forward(layer, 3, 2, x, tape); },
                                      {"n_heads 3", "8"}));
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_block_forward(layer, 2, 3, x, tape); },
                                      {"(10, 8)", "batch 3"}));
  GptLayer<float> wrong = layer;
  wrong.attn.w_k = xt::zeros<float>({8, 6});
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_block_forward(wrong, 2, 2, x, tape); },
                                      {"(8, 6)", "(8, 8)"}));
  wrong = layer;
  wrong.ln_2_gain = xt::zeros<float>({7});
  EXPECT_TRUE(
      throws_invalid_argument([&] { gpt_block_forward(wrong, 2, 2, x, tape); }, {"(7)", "(8)"}));
}

TEST(GptBlockBackward, RejectsADOutOfTheWrongShape) {
  const GptParams<float> params = block_fixture_params();
  GptBlockTape<float> tape;
  gpt_block_forward(params.layers[0], 2, 2, Matrix<float>(fixture_array("gpt_block", "x")), tape);
  GptLayer<float> grads;
  const Matrix<float> d_out = xt::zeros<float>({8, 8});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { gpt_block_backward(params.layers[0], 2, tape, d_out, grads); }, {"(8, 8)", "(10, 8)"}));
}

// ---- Block A: the model and its loss ------------------------------------------------------------

TEST(InitGpt, FollowsTheBlueprint) {
  const GptConfig config = tiny_config();
  GptParams<float> params = init_gpt(config, 7);
  EXPECT_EQ(params.layers.size(), 2u);
  EXPECT_EQ(shape_of(params.wte), "(7, 8)");
  EXPECT_EQ(shape_of(params.wpe), "(6, 8)");
  EXPECT_EQ(shape_of(params.layers[1].mlp.w_fc), "(8, 32)");
  EXPECT_EQ(params.config.n_heads, 2u);
  // One generator, wte, wpe and the weight matrices in parameter_tensors' order, row-major.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float residual = 0.02f / std::sqrt(2.0f * 2.0f);
  for (const ParamTensor<float>& t : parameter_tensors(params)) {
    const bool drawn = t.decay || t.name == "wte" || t.name == "wpe";
    const bool projection = t.name.find("attn.w_o") != std::string::npos ||
                            t.name.find("mlp.w_proj") != std::string::npos;
    const bool gain = t.name.find("gain") != std::string::npos;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const float expected = drawn ? (projection ? residual : 0.02f) * normal(rng) : gain ? 1 : 0;
      ASSERT_EQ(t.data[i], expected) << "element " << i << " of " << t.name;
    }
  }
}

TEST(InitGpt, RejectsSizesThatCannotMakeAModel) {
  GptConfig config = tiny_config();
  config.n_heads = 3;
  EXPECT_TRUE(throws_invalid_argument([&] { init_gpt(config, 1); }, {"n_heads 3", "8"}));
  config = tiny_config();
  config.vocab = 0;
  EXPECT_TRUE(throws_invalid_argument([&] { init_gpt(config, 1); }, {"vocab 0"}));
}

GptParams<float> small_fixture_params() {
  GptParams<float> params = zero_gpt<float>({11, 8, 8, 2, 2});
  load_params(params, "gpt_small");
  return params;
}

BatchTokens fixture_tokens(const std::string& name) {
  return xt::cast<TokenId>(xt::xtensor<float, 2>(fixture_array("gpt_small", name)));
}

TEST(GptForward, MatchesTorch) {
  const GptParams<float> params = small_fixture_params();
  GptTape<float> tape;
  const Logits& logits = gpt_forward(params, fixture_tokens("tokens"), tape);
  EXPECT_TRUE(close_at_scale(logits, fixture_array("gpt_small", "logits"), kTorchTolerance));
  EXPECT_EQ(&logits, &tape.logits);
}

TEST(GptForward, ALaterTokenNeverChangesAnEarlierLogit) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1311);
  BatchTokens tokens = tokens_of(kTinyInputs);
  GptTape<float> tape;
  const Logits before = gpt_forward(params, tokens, tape);
  tokens(1, 3) = 6;
  const Logits after = gpt_forward(params, tokens, tape);
  EXPECT_EQ(xt::view(before, 0), xt::view(after, 0)) << "sequence 0";
  EXPECT_EQ(xt::view(before, 1, xt::range(0, 3)), xt::view(after, 1, xt::range(0, 3)));
  EXPECT_NE(xt::view(before, 1, 3), xt::view(after, 1, 3));
}

TEST(GptForward, AttentionMapsAreEachLayersCausalWeights) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1312);
  GptTape<float> tape;
  gpt_forward(params, tokens_of(kTinyInputs), tape);
  const auto maps = attention_maps(tape, 1);
  ASSERT_EQ(maps.size(), 2u);
  ASSERT_EQ(maps[1].size(), 2u);
  EXPECT_EQ(shape_of(maps[1][0]), "(5, 5)");
  for (const auto& layer : maps)
    for (const Matrix<float>& map : layer)
      for (std::size_t t = 0; t < 5; ++t) {
        EXPECT_NEAR(xt::sum(xt::view(map, t))(), 1.0f, 1e-6);
        for (std::size_t s = t + 1; s < 5; ++s) EXPECT_EQ(map(t, s), 0.0f);
      }
  // Layer 0's maps are the first block's on the embedded tokens.
  GptBlockTape<float> block;
  gpt_block_forward(params.layers[0], 2, 2, tape.layers[0].x, block);
  EXPECT_EQ(maps[0][1], xt::view(block.probs, 1, 1));
}

TEST(GptForward, RejectsTokensThatDoNotFitTheModel) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1313);
  GptTape<float> tape;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        gpt_forward(params, tokens_of({{1, 2, 3, 4, 5, 6, 0}}), tape);
      },
      {"(1, 7)", "(6, 8)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        gpt_forward(params, tokens_of({{1, 7}}), tape);
      },
      {"token 7", "7"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        gpt_forward(params, tokens_of({{1, -1}}), tape);
      },
      {"token -1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        gpt_forward(params, BatchTokens({0, 3}), tape);
      },
      {"(0, 3)"}));
  GptParams<float> wrong = params;
  wrong.wpe = xt::zeros<float>({6, 5});
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_forward(wrong, tokens_of(kTinyInputs), tape); },
                                      {"(6, 5)", "(6, 8)"}));
}

TEST(CrossEntropy, IsTheMeanOfMinusLogSoftmaxAtTheTargets) {
  const LogitsD logits = {{{1.0, 2.0, 3.0}, {0.0, 0.0, -1.0}}};
  const BatchTokens targets = tokens_of({{2, 0}});
  LogitsD d_logits;
  const double loss = cross_entropy(logits, targets, d_logits);
  const double l0 = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double l1 = -std::log(1.0 / (2.0 + std::exp(-1.0)));
  EXPECT_NEAR(loss, (l0 + l1) / 2, 1e-12);
  // (softmax − one_hot) / (B·T)
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(d_logits(0, 0, 2), (std::exp(3.0) / z - 1) / 2, 1e-12);
  EXPECT_NEAR(d_logits(0, 0, 0), std::exp(1.0) / z / 2, 1e-12);
  EXPECT_NEAR(d_logits(0, 1, 0), (1 / (2 + std::exp(-1.0)) - 1) / 2, 1e-12);
}

TEST(CrossEntropy, IsStableAndGivesLogVForEqualLogits) {
  for (const float offset : {0.0f, 1e4f, -1e4f}) {
    const Logits logits = xt::zeros<float>({2, 3, 5}) + offset;
    Logits d_logits;
    const float loss = cross_entropy(logits, tokens_of({{0, 1, 2}, {3, 4, 0}}), d_logits);
    EXPECT_NEAR(loss, std::log(5.0f), 1e-6) << "offset " << offset;
    EXPECT_NEAR(d_logits(1, 1, 4), (0.2f - 1) / 6, 1e-7);
  }
}

TEST(CrossEntropy, MatchesTorchOnTheSmallModel) {
  const GptParams<float> params = small_fixture_params();
  GptTape<float> tape;
  Logits d_logits;
  const float loss = cross_entropy(gpt_forward(params, fixture_tokens("tokens"), tape),
                                   fixture_tokens("targets"), d_logits);
  // The loss is about 6; float32 logits carry about 1e-6 of relative error into it.
  EXPECT_NEAR(loss, fixture_array("gpt_small", "loss")(0), kTorchTolerance * 6);
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  LogitsD logits = xt::zeros<double>({2, 3, 4});
  std::mt19937_64 rng(1314);
  std::normal_distribution<double> normal(0.0, 2.0);
  for (double& x : logits) x = normal(rng);
  const BatchTokens targets = tokens_of({{0, 3, 1}, {2, 2, 3}});
  LogitsD d_logits, scratch;
  cross_entropy(logits, targets, d_logits);
  const auto loss = [&] { return cross_entropy(logits, targets, scratch); };
  EXPECT_LT(finite_difference_error(logits.data(), logits.size(), d_logits.data(), loss), 1e-8);
}

TEST(CrossEntropy, RejectsTargetsThatDoNotFitTheLogits) {
  const Logits logits = xt::zeros<float>({2, 3, 5});
  Logits d_logits;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        cross_entropy(logits, tokens_of({{0, 1, 2}}), d_logits);
      },
      {"(2, 3, 5)", "(1, 3)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        cross_entropy(logits, tokens_of({{0, 1, 2}, {3, 5, 0}}), d_logits);
      },
      {"5"}));
}

TEST(GptBackward, MatchesTorchAutograd) {
  const GptParams<float> params = small_fixture_params();
  GptTape<float> tape;
  Logits d_logits;
  cross_entropy(gpt_forward(params, fixture_tokens("tokens"), tape), fixture_tokens("targets"),
                d_logits);
  GptParams<float> grads;
  gpt_backward(params, tape, d_logits, grads);
  const GptParams<float>& const_grads = grads;
  for (const ParamTensor<const float>& g : parameter_tensors(const_grads))
    EXPECT_TRUE(
        close_at_scale(as_array(g), fixture_array("gpt_small", "grad." + g.name), kTorchTolerance))
        << g.name;
}

TEST(GptBackward, MatchesFiniteDifferencesForEveryParameter) {
  GptParams<double> params = random_params<double>(tiny_config(), 1315);
  const BatchTokens inputs = tokens_of(kTinyInputs), targets = tokens_of(kTinyTargets);
  GptTape<double> tape;
  LogitsD d_logits;
  cross_entropy(gpt_forward(params, inputs, tape), targets, d_logits);
  GptParams<double> grads;
  gpt_backward(params, tape, d_logits, grads);
  GptTape<double> scratch;
  LogitsD scratch_d;
  const auto loss = [&] {
    return cross_entropy(gpt_forward(params, inputs, scratch), targets, scratch_d);
  };
  const auto p = parameter_tensors(params);
  const GptParams<double>& const_grads = grads;
  const auto g = parameter_tensors(const_grads);
  ASSERT_EQ(p.size(), g.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    EXPECT_LT(finite_difference_error(p[i].data, p[i].size(), g[i].data, loss),
              kFiniteDifferenceTolerance)
        << p[i].name;
}

TEST(GptBackward, ATokenNeverInputGetsOnlyTheUnembeddingsGradient) {
  // Token 6 is a target but never an input: its row of wte's gradient is the unembedding's alone,
  // Σ over positions of d_logits[·, 6] · ln_f(x); token 4 is both, so its row holds more.
  const GptParams<double> params = random_params<double>(tiny_config(), 1316);
  GptTape<double> tape;
  LogitsD d_logits;
  cross_entropy(gpt_forward(params, tokens_of(kTinyInputs), tape), tokens_of(kTinyTargets),
                d_logits);
  GptParams<double> grads;
  gpt_backward(params, tape, d_logits, grads);
  for (const TokenId token : {6, 4}) {
    Vector<double> unembedding = xt::zeros<double>({8});
    for (std::size_t r = 0; r < 10; ++r)
      unembedding += d_logits(r / 5, r % 5, std::size_t(token)) * xt::view(tape.ln_f.out, r);
    const Vector<double> row = xt::view(grads.wte, std::size_t(token));
    if (token == 6) {
      EXPECT_TRUE(all_close(row, unembedding, 1e-12));
    } else {
      EXPECT_GT(double(xt::amax(xt::abs(row - unembedding))()), 1e-3);
    }
  }
}

TEST(GptBackward, OverwritesTheGradientsAndReusesTheTape) {
  // A second step on a reused tape and gradient struct gives what fresh ones give, bit for bit:
  // nothing is accumulated across calls.
  const GptParams<float> params = random_params<float>(tiny_config(), 1317);
  const BatchTokens inputs = tokens_of(kTinyInputs), targets = tokens_of(kTinyTargets);
  GptTape<float> tape;
  GptParams<float> grads;
  const BatchTokens other = tokens_of({{4, 4, 4, 4, 4}, {0, 1, 2, 3, 4}});
  cross_entropy(gpt_forward(params, other, tape), targets, tape.d_logits);
  gpt_backward(params, tape, tape.d_logits, grads);
  cross_entropy(gpt_forward(params, inputs, tape), targets, tape.d_logits);
  gpt_backward(params, tape, tape.d_logits, grads);
  GptTape<float> fresh_tape;
  GptParams<float> fresh;
  cross_entropy(gpt_forward(params, inputs, fresh_tape), targets, fresh_tape.d_logits);
  gpt_backward(params, fresh_tape, fresh_tape.d_logits, fresh);
  const GptParams<float>&a = grads, &b = fresh;
  const auto ga = parameter_tensors(a), gb = parameter_tensors(b);
  for (std::size_t i = 0; i < ga.size(); ++i)
    EXPECT_TRUE(all_close(as_array(ga[i]), as_array(gb[i]), 0.0)) << ga[i].name;
}

TEST(GptBackward, RejectsDLogitsOrParamsThatDoNotMatchTheForward) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1318);
  GptTape<float> tape;
  gpt_forward(params, tokens_of(kTinyInputs), tape);
  GptParams<float> grads;
  const Logits wrong = xt::zeros<float>({2, 4, 7});
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_backward(params, tape, wrong, grads); },
                                      {"(2, 4, 7)", "(2, 5, 7)"}));
  GptConfig three = tiny_config();
  three.n_layers = 3;
  const GptParams<float> deeper = random_params<float>(three, 1);
  EXPECT_TRUE(
      throws_invalid_argument([&] { gpt_backward(deeper, tape, tape.logits, grads); }, {"3", "2"}));
}

// ---- Block B: the optimiser ---------------------------------------------------------------------

TEST(AdamW, MatchesTorchStepByStepWithClippingAndTheSchedule) {
  // torch.optim.AdamW in float32 on w (decayed), b and e, 6 steps at nanoGPT's schedule, each
  // gradient clipped by clip_grad_norm_ first. Both do the same float32 operations in the same
  // order; where a compiler fuses a multiply-add one side rounds once less, 1 ulp on an O(1)
  // parameter (6e-8) per step at most, so 6 steps stay within 1e-6; the moments, O(1) and O(1)²,
  // likewise to 1e-6 relative to their scale.
  const Fixture fixture("gpt_adamw");
  const std::vector<std::string> names = {"w", "b", "e"};
  std::map<std::string, xt::xarray<float>> params, grads;
  std::vector<ParamTensor<float>> p, g;
  for (const std::string& n : names) {
    params[n] = fixture_array("gpt_adamw", n);
    grads[n] = fixture_array("gpt_adamw", "grad." + n);  // (steps, ...)
  }
  for (const std::string& n : names) {
    const auto& s = params[n].shape();
    p.push_back({n, params[n].data(), {s.begin(), s.end()}, n == "w"});
  }
  std::vector<ParamTensor<const float>> p_const;
  for (const auto& t : p) p_const.push_back({t.name, t.data, t.shape, t.decay});
  AdamWOptions options;  // betas (0.9, 0.95), eps 1e-8, weight decay 0.1: the fixture's
  AdamW adamw(p_const, options);
  const LrSchedule schedule{1e-2, 1e-3, 2, 5};
  const xt::xarray<float> lr = fixture_array("gpt_adamw", "lr"),
                          norm = fixture_array("gpt_adamw", "norm");
  for (std::size_t step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::map<std::string, xt::xarray<float>> step_grads;
    std::vector<ParamTensor<float>> g_step;
    std::vector<ParamTensor<const float>> g_const;
    for (std::size_t i = 0; i < names.size(); ++i) {
      step_grads[names[i]] = xt::view(grads[names[i]], step);
      g_step.push_back({names[i], step_grads[names[i]].data(), p[i].shape, p[i].decay});
      g_const.push_back({names[i], step_grads[names[i]].data(), p[i].shape, p[i].decay});
    }
    const double rate = learning_rate(schedule, step);
    EXPECT_NEAR(rate, lr(step), 1e-9) << "the schedule";
    EXPECT_NEAR(clip_grad_norm(g_step, 1.0f), norm(step), 1e-6 * norm(step)) << "the norm";
    adamw.step(p, g_const, rate);
    for (const std::string& n : names)
      EXPECT_TRUE(
          all_close(params[n], xt::view(fixture_array("gpt_adamw", "after." + n), step), 1e-6))
          << n;
  }
  EXPECT_EQ(adamw.steps(), 6u);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(close_at_scale(
        adamw.m()[i], xt::flatten(fixture_array("gpt_adamw", "exp_avg." + names[i])), 1e-6))
        << names[i];
    EXPECT_TRUE(close_at_scale(
        adamw.v()[i], xt::flatten(fixture_array("gpt_adamw", "exp_avg_sq." + names[i])), 1e-6))
        << names[i];
  }
}

TEST(AdamW, DecaysOnlyTheTensorsMarkedDecay) {
  // With zero gradients both moments stay 0 and the update is 0 / (0 + eps): only the decay acts,
  // p · (1 − lr·wd) on w_q and the MLP's weights, nothing on biases, LayerNorms and embeddings.
  GptParams<float> params = random_params<float>(tiny_config(), 1319);
  const GptParams<float> before = params;
  const GptParams<float> grads = zero_gpt<float>(tiny_config());
  const GptParams<float>& const_params = params;
  AdamW adamw(parameter_tensors(const_params));
  adamw.step(parameter_tensors(params), parameter_tensors(grads), 0.5);
  const auto now = parameter_tensors(const_params), was = parameter_tensors(before);
  for (std::size_t i = 0; i < now.size(); ++i) {
    const float factor = now[i].decay ? float(1 - 0.5 * 0.1) : 1.0f;
    EXPECT_TRUE(all_close(as_array(now[i]), as_array(was[i]) * factor, 1e-7)) << now[i].name;
  }
}

TEST(AdamW, RejectsAnotherModelsTensorsAndChangesNothing) {
  GptParams<float> params = random_params<float>(tiny_config(), 1320);
  const GptParams<float>& const_params = params;
  AdamW adamw(parameter_tensors(const_params));
  GptConfig other = tiny_config();
  other.d_model = 4;
  const GptParams<float> other_grads = zero_gpt<float>(other);
  const GptParams<float> before = params;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { adamw.step(parameter_tensors(params), parameter_tensors(other_grads), 1e-3); },
      {"wte", "28", "56"}));
  EXPECT_EQ(adamw.steps(), 0u);
  EXPECT_EQ(params.wte, before.wte);
  const GptParams<float> one_layer = zero_gpt<float>({7, 6, 8, 2, 1});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { adamw.step(parameter_tensors(params), parameter_tensors(one_layer), 1e-3); },
      {"20", "36"}));
}

TEST(LearningRate, WarmsUpLinearlyThenFollowsTheCosineDownToLrMin) {
  const LrSchedule s{6e-4, 6e-5, 10, 110};
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 6e-4 / 10);
  EXPECT_DOUBLE_EQ(learning_rate(s, 4), 6e-4 * 5 / 10);
  EXPECT_DOUBLE_EQ(learning_rate(s, 9), 6e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10), 6e-4);                 // cos 0
  EXPECT_NEAR(learning_rate(s, 60), (6e-4 + 6e-5) / 2, 1e-15);  // cos π/2
  EXPECT_NEAR(learning_rate(s, 110), 6e-5, 1e-15);              // cos π
  EXPECT_DOUBLE_EQ(learning_rate(s, 111), 6e-5);
  EXPECT_DOUBLE_EQ(learning_rate(s, 100000), 6e-5);
  for (std::size_t step = 10; step < 110; ++step)
    EXPECT_LT(learning_rate(s, step + 1), learning_rate(s, step)) << "step " << step;
}

TEST(LearningRate, RejectsSchedulesThatCannotRun) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        learning_rate({1e-3, 1e-4, 10, 10}, 0);
      },
      {"warmup 10"}));
  EXPECT_TRUE(throws_invalid_argument([] { learning_rate({1e-3, 1e-2, 1, 10}, 0); }, {"lr_min"}));
}

TEST(ClipGradNorm, ReturnsTheNormAndScalesOnlyAboveMaxNorm) {
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};  // norm 5
  std::vector<ParamTensor<float>> grads = {{"a", a.data(), {2}, true}, {"b", b.data(), {1}, false}};
  EXPECT_FLOAT_EQ(clip_grad_norm(grads, 10.0f), 5.0f);
  EXPECT_EQ(a[0], 3.0f) << "below max_norm nothing changes";
  EXPECT_EQ(b[0], 4.0f);
  EXPECT_FLOAT_EQ(clip_grad_norm(grads, 1.0f), 5.0f);
  const float coef = 1.0f / (5.0f + 1e-6f);
  EXPECT_FLOAT_EQ(a[0], 3.0f * coef);
  EXPECT_FLOAT_EQ(b[0], 4.0f * coef);
  EXPECT_NEAR(clip_grad_norm(grads, 1.0f), 1.0f, 1e-6) << "the clipped norm is max_norm";
  EXPECT_TRUE(throws_invalid_argument([&] { clip_grad_norm(grads, 0.0f); }, {"max_norm"}));
}

// ---- Block C: training --------------------------------------------------------------------------

TEST(RandomBatch, DrawsTheDocumentedWindows) {
  std::vector<TokenId> stream(50);
  std::iota(stream.begin(), stream.end(), 100);
  std::mt19937_64 rng(1321), replay(1321);
  const GptBatch batch = random_batch(stream, 3, 8, rng);
  EXPECT_EQ(shape_of(batch.inputs), "(3, 8)");
  EXPECT_EQ(shape_of(batch.targets), "(3, 8)");
  std::uniform_int_distribution<std::size_t> start(0, 50 - 8 - 1);
  for (std::size_t b = 0; b < 3; ++b) {
    const TokenId first = TokenId(100 + start(replay));
    for (std::size_t t = 0; t < 8; ++t) {
      EXPECT_EQ(batch.inputs(b, t), first + TokenId(t));
      EXPECT_EQ(batch.targets(b, t), first + TokenId(t + 1));
    }
  }
  EXPECT_EQ(rng(), replay()) << "one draw per window, no more";
}

TEST(RandomBatch, RejectsAStreamTooShortForAWindow) {
  const std::vector<TokenId> stream(8, 1);
  std::mt19937_64 rng(1);
  EXPECT_TRUE(throws_invalid_argument([&] { random_batch(stream, 2, 8, rng); }, {"8"}));
  EXPECT_NO_THROW(random_batch(stream, 2, 7, rng));
  EXPECT_TRUE(throws_invalid_argument([&] { random_batch(stream, 0, 4, rng); }, {"0"}));
}

TEST(TrainStep, ReturnsTheLossBeforeItsUpdateAndTheNormBeforeClipping) {
  GptParams<float> params = random_params<float>(tiny_config(), 1322);
  const GptBatch batch{tokens_of(kTinyInputs), tokens_of(kTinyTargets)};
  // What the step must report, computed before it.
  GptTape<float> tape;
  Logits d_logits;
  const float loss =
      cross_entropy(gpt_forward(params, batch.inputs, tape), batch.targets, d_logits);
  GptParams<float> expected_grads;
  gpt_backward(params, tape, d_logits, expected_grads);
  double sum = 0;
  const GptParams<float>& eg = expected_grads;
  for (const auto& t : parameter_tensors(eg))
    for (std::size_t i = 0; i < t.size(); ++i) sum += double(t.data[i]) * t.data[i];

  const GptParams<float> before = params;
  const GptParams<float>& const_params = params;
  AdamW adamw(parameter_tensors(const_params));
  GptParams<float> grads;
  const TrainOptions options{{1e-3, 1e-4, 4, 100}, 0.5f};
  const StepStats stats = train_step(params, grads, adamw, tape, batch, options);
  EXPECT_NEAR(stats.loss, loss, 1e-6);
  EXPECT_NEAR(stats.grad_norm, std::sqrt(sum), 1e-6 * std::sqrt(sum));
  EXPECT_GT(stats.grad_norm, 0.5f) << "this test wants a clipped step";
  EXPECT_DOUBLE_EQ(stats.lr, 1e-3 / 4);
  EXPECT_EQ(adamw.steps(), 1u);
  EXPECT_NE(params.wte, before.wte);
  // The gradients it leaves are the clipped ones: global norm max_norm.
  double clipped = 0;
  const GptParams<float>& g = grads;
  for (const auto& t : parameter_tensors(g))
    for (std::size_t i = 0; i < t.size(); ++i) clipped += double(t.data[i]) * t.data[i];
  EXPECT_NEAR(std::sqrt(clipped), 0.5, 1e-5);
}

TEST(TrainStep, LearnsARepeatedVerse) {
#ifndef __OPTIMIZE__
  GTEST_SKIP() << "a training run: too slow unoptimised (the Release tests run it)";
#endif
  // A stream that repeats one "verse" of 23 tokens: after 150 steps the model must predict it
  // almost perfectly (the reference: 0.044 nats at the last step, 0.17 at step 50), from log 16 =
  // 2.77 at the start.
  const GptConfig config{16, 16, 32, 4, 2};
  std::mt19937_64 verse_rng(1323);
  std::vector<TokenId> verse(23), stream;
  for (TokenId& t : verse) t = TokenId(verse_rng() % 16);
  while (stream.size() < 2000) stream.insert(stream.end(), verse.begin(), verse.end());
  GptParams<float> params = init_gpt(config, 1324);
  const GptParams<float>& const_params = params;
  AdamW adamw(parameter_tensors(const_params));
  GptParams<float> grads;
  GptTape<float> tape;
  std::mt19937_64 rng(1325);
  const TrainOptions options{{1e-2, 1e-3, 10, 150}, 1.0f};
  float first = 0, last = 0;
  for (std::size_t step = 0; step < 150; ++step) {
    const StepStats stats =
        train_step(params, grads, adamw, tape, random_batch(stream, 8, 16, rng), options);
    if (step == 0) first = stats.loss;
    last = stats.loss;
  }
  EXPECT_NEAR(first, std::log(16.0f), 0.2f) << "GPT-2's initialisation starts near uniform";
  EXPECT_LT(last, 0.3f);
}

TEST(BitsPerByte, IsNatsOverLn2PerByte) {
  EXPECT_DOUBLE_EQ(bits_per_byte(std::log(2.0) * 10, 5), 2.0);
  EXPECT_DOUBLE_EQ(bits_per_byte(std::log(256.0) * 4, 4), 8.0) << "uniform over bytes: 8 bits";
  EXPECT_TRUE(throws_invalid_argument([] { bits_per_byte(1.0, 0); }, {"0 bytes"}));
}

TEST(Evaluate, AveragesEveryTokenAfterTheFirstOnce) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1326);
  std::vector<TokenId> stream(23);
  for (std::size_t i = 0; i < stream.size(); ++i) stream[i] = TokenId((i * 5 + 2) % 7);
  const std::vector<std::size_t> token_bytes = {1, 2, 3, 1, 4, 1, 2};
  GptTape<float> tape;
  // windows of T + 1 = 6 at 0, 5, 10, 15 (20 + 5 > 22): 4 windows, 20 tokens, batches of 3 and 1
  const Evaluation e = evaluate(params, stream, 5, 3, 100, token_bytes, tape);
  double total = 0;
  std::size_t bytes = 0;
  for (std::size_t w = 0; w < 4; ++w) {
    BatchTokens in({1, 5}), out({1, 5});
    for (std::size_t t = 0; t < 5; ++t) {
      in(0, t) = stream[w * 5 + t];
      out(0, t) = stream[w * 5 + t + 1];
      bytes += token_bytes[std::size_t(out(0, t))];
    }
    GptTape<float> own;
    Logits d;
    total += 5 * double(cross_entropy(gpt_forward(params, in, own), out, d));
  }
  EXPECT_EQ(e.tokens, 20u);
  EXPECT_EQ(e.bytes, bytes);
  EXPECT_NEAR(e.loss, total / 20, 1e-6);
  EXPECT_NEAR(e.bits_per_byte, total / (std::log(2.0) * double(bytes)), 1e-6);
  const Evaluation two = evaluate(params, stream, 5, 3, 2, {}, tape);
  EXPECT_EQ(two.tokens, 10u) << "max_windows 2";
  EXPECT_EQ(two.bytes, 0u);
}

TEST(Evaluate, RejectsWindowsThatDoNotFit) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1327);
  const std::vector<TokenId> stream(20, 1);
  GptTape<float> tape;
  EXPECT_TRUE(throws_invalid_argument([&] { evaluate(params, stream, 7, 2, 10, {}, tape); },
                                      {"7", "max_len 6"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { evaluate(params, stream, 5, 2, 10, std::vector<std::size_t>(3, 1), tape); },
      {"3", "7"}));
}

// ---- Block D: sampling --------------------------------------------------------------------------

const Vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};  // tokens 1 and 3 tie

Vector<double> softmax_of(const Vector<float>& logits, double temperature) {
  Vector<double> p = xt::exp(xt::cast<double>(logits) / temperature);
  return p / xt::sum(p)();
}

TEST(SamplingDistribution, TemperatureZeroAndTopKOneAreGreedy) {
  const Vector<float> greedy = sampling_distribution(kLogits, {0.0f, 0, 1.0f});
  const Vector<float> one_hot = {0, 1, 0, 0, 0, 0};  // the lower id of the tie
  EXPECT_EQ(greedy, one_hot);
  EXPECT_EQ(sampling_distribution(kLogits, {1.0f, 1, 1.0f}), one_hot);
  EXPECT_EQ(sampling_distribution(kLogits, {5.0f, 1, 0.3f}), one_hot);
}

TEST(SamplingDistribution, TemperatureDividesTheLogits) {
  for (const float temperature : {1.0f, 0.5f, 2.0f})
    EXPECT_TRUE(all_close(sampling_distribution(kLogits, {temperature, 0, 1.0f}),
                          softmax_of(kLogits, temperature), 1e-7))
        << "temperature " << temperature;
}

TEST(SamplingDistribution, TopKKeepsTheKMostLikelyRenormalised) {
  const Vector<double> p = softmax_of(kLogits, 1.0);
  const Vector<float> top3 = sampling_distribution(kLogits, {1.0f, 3, 1.0f});
  const double kept = p(1) + p(3) + p(2);
  const Vector<double> expected = {0, p(1) / kept, p(2) / kept, p(3) / kept, 0, 0};
  EXPECT_TRUE(all_close(top3, expected, 1e-7));
  // k = 2 with a tie for first place keeps both tied tokens; k >= V keeps everything.
  const Vector<float> top2 = sampling_distribution(kLogits, {1.0f, 2, 1.0f});
  EXPECT_NEAR(top2(1), 0.5, 1e-7);
  EXPECT_NEAR(top2(3), 0.5, 1e-7);
  EXPECT_TRUE(all_close(sampling_distribution(kLogits, {1.0f, 6, 1.0f}), p, 1e-7));
}

TEST(SamplingDistribution, TopPKeepsTheSmallestSetThatReachesP) {
  const Vector<double> p = softmax_of(kLogits, 1.0);  // 1, 3: 0.377 each; 2: 0.139; 0: 0.051 …
  // p = 0.5: 1 alone (0.377) does not reach it, 1 and 3 (0.755) do
  const Vector<float> half = sampling_distribution(kLogits, {1.0f, 0, 0.5f});
  EXPECT_NEAR(half(1), 0.5, 1e-7);
  EXPECT_NEAR(half(3), 0.5, 1e-7);
  EXPECT_EQ(half(2), 0.0f);
  // p just above 1, 3 and 2's total keeps the next one, 0, too
  const double three = p(1) + p(3) + p(2);
  const Vector<float> more = sampling_distribution(kLogits, {1.0f, 0, float(three + 1e-3)});
  EXPECT_GT(more(0), 0.0f);
  EXPECT_EQ(more(5), 0.0f);
  EXPECT_NEAR(more(0), p(0) / (three + p(0)), 1e-6);
  // a tiny p keeps the single most likely token
  const Vector<float> one_hot = {0, 1, 0, 0, 0, 0};
  EXPECT_EQ(sampling_distribution(kLogits, {1.0f, 0, 1e-9f}), one_hot);
  // top-p applies to the top-k tokens, renormalised: of 1, 3, 2, p 0.9 of their total needs all 3
  const Vector<float> both = sampling_distribution(kLogits, {1.0f, 3, 0.9f});
  EXPECT_GT(both(2), 0.0f);
  EXPECT_EQ(both(0), 0.0f);
}

TEST(SamplingDistribution, RejectsBadOptions) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        sampling_distribution(kLogits, {-1.0f, 0, 1.0f});
      },
      {"temperature"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        sampling_distribution(kLogits, {INFINITY, 0, 1.0f});
      },
      {"temperature"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        sampling_distribution(kLogits, {1.0f, 0, 0.0f});
      },
      {"top_p"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        sampling_distribution(kLogits, {1.0f, 0, 1.5f});
      },
      {"top_p"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { sampling_distribution(Vector<float>(), {}); }, {"empty"}));
}

TEST(SampleToken, IsTheDocumentedDrawAndFollowsTheDistribution) {
  const SamplingOptions options{0.8f, 4, 0.95f};
  const Vector<float> p = sampling_distribution(kLogits, options);
  std::mt19937_64 rng(1328), replay(1328);
  std::vector<double> counts(6, 0);
  const std::size_t n = 20000;
  for (std::size_t i = 0; i < n; ++i) {
    const TokenId token = sample_token(kLogits, options, rng);
    counts[std::size_t(token)] += 1;
    // the draw as documented: one uniform double, the first cumulative sum above it
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(replay);
    double cumulative = 0, total = std::accumulate(p.begin(), p.end(), 0.0);
    std::size_t expected = 0;
    for (std::size_t j = 0; j < 6; ++j) {
      if (p(j) == 0) continue;
      cumulative += p(j);
      expected = j;
      if (cumulative > u * total) break;
    }
    ASSERT_EQ(std::size_t(token), expected) << "draw " << i;
  }
  // 20000 draws: each frequency within 0.015 of its probability (4 standard deviations).
  for (std::size_t j = 0; j < 6; ++j) EXPECT_NEAR(counts[j] / n, p(j), 0.015) << "token " << j;
  // greedy still takes one draw, so a seeded run does not shift when the temperature is 0
  std::mt19937_64 a(5), b(5);
  EXPECT_EQ(sample_token(kLogits, {0.0f, 0, 1.0f}, a), 1);
  b.discard(1);
  EXPECT_EQ(a(), b());
}

TEST(DecodeStep, TokenByTokenEqualsTheFullForwardAtEveryPosition) {
  const GptConfig config{13, 12, 16, 4, 3};
  const GptParams<float> params = random_params<float>(config, 1329);
  const BatchTokens tokens = tokens_of({{3, 12, 0, 7, 7, 1, 9, 4, 2, 11, 5, 6}});
  GptTape<float> tape;
  const Logits full = gpt_forward(params, tokens, tape);
  GptKVCache cache = make_kv_cache(config);
  for (std::size_t t = 0; t < 12; ++t) {
    const Vector<float> logits = gpt_decode_step(params, tokens(0, t), cache);
    EXPECT_EQ(cache.length, t + 1);
    // the same sums in another order: float32 rounding, about 1e-6 of logits of size ~3
    EXPECT_TRUE(close_at_scale(logits, xt::view(full, 0, t), 1e-5)) << "position " << t;
  }
}

TEST(DecodeStep, RejectsAFullCacheAnUnknownTokenAndAnotherModelsCache) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1330);
  GptKVCache cache = make_kv_cache(tiny_config());
  EXPECT_TRUE(
      throws_invalid_argument([&] { gpt_decode_step(params, 7, cache); }, {"token 7", "7"}));
  for (int t = 0; t < 6; ++t) gpt_decode_step(params, t, cache);
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_decode_step(params, 0, cache); }, {"6", "full"}));
  GptConfig other = tiny_config();
  other.n_layers = 3;
  GptKVCache wrong = make_kv_cache(other);
  EXPECT_TRUE(throws_invalid_argument([&] { gpt_decode_step(params, 0, wrong); },
                                      {"(3, 2, 6, 4)", "(2, 2, 6, 4)"}));
}

TEST(Generate, IsSeededGreedyIsTheArgmaxAndItRunsPastTheContext) {
  const GptConfig config = tiny_config();  // max_len 6
  const GptParams<float> params = random_params<float>(config, 1331);
  const std::vector<TokenId> prompt = {1, 2};
  std::vector<TokenId> seen;
  std::mt19937_64 a(9), b(9);
  const SamplingOptions warm{1.0f, 0, 1.0f};
  const std::vector<TokenId> first =
      generate(params, prompt, 20, warm, a, [&](TokenId t) { seen.push_back(t); });
  EXPECT_EQ(first.size(), 20u) << "20 tokens through a context of 6: the cache slides";
  EXPECT_EQ(seen, first) << "on_token sees every token as it is drawn";
  EXPECT_EQ(generate(params, prompt, 20, warm, b), first) << "same seed, same text";
  // Each token is drawn from the full forward's last logits on the context, which slides as the
  // header says: a token fed to a full context (max_len tokens) follows the last max_len / 2
  // tokens before it. 30 new tokens from 2 slide it nine times; sampled (one draw per token from
  // an equal generator), not greedy, so that every logit counts, not only the largest.
  std::mt19937_64 ours(5), theirs(5);
  const std::vector<TokenId> drawn = generate(params, prompt, 30, warm, ours);
  std::vector<TokenId> text, context, expected;
  GptTape<float> tape;
  const auto feed = [&](TokenId token) {
    if (context.size() == config.max_len)
      context.assign(text.end() - std::ptrdiff_t(config.max_len / 2), text.end());
    context.push_back(token);
    text.push_back(token);
  };
  for (const TokenId token : prompt) feed(token);
  while (expected.size() < drawn.size()) {
    BatchTokens tokens({1, context.size()});
    std::copy(context.begin(), context.end(), tokens.begin());
    const Logits& logits = gpt_forward(params, tokens, tape);
    const Vector<float> last = xt::view(logits, 0, context.size() - 1);
    expected.push_back(sample_token(last, warm, theirs));
    feed(expected.back());
  }
  EXPECT_EQ(drawn, expected) << "each token drawn from the forward on the sliding context";
}

TEST(Generate, RejectsAnEmptyPromptAndUnknownIds) {
  const GptParams<float> params = random_params<float>(tiny_config(), 1332);
  std::mt19937_64 rng(1);
  EXPECT_TRUE(throws_invalid_argument([&] { generate(params, {}, 3, {}, rng); }, {"empty"}));
  EXPECT_TRUE(throws_invalid_argument([&] { generate(params, {1, 9}, 3, {}, rng); }, {"9", "7"}));
}

}  // namespace
}  // namespace minimodel
