// The decoder of `workbook generate` (workbench/generate/greedy.hpp) against lab 10's reference
// model_forward: feeding the sequence through lab 08's KV cache, a chunk and then a token at a
// time, gives the logits that the whole-sequence forward gives at its last position, so greedy
// decoding picks, step by step, the argmax that model_forward would.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "generate/greedy.hpp"
#include "minimodel/model/tiny_transformer.hpp"
#include "support/checks.hpp"
#include "support/random_model.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using workbench::CachedModel;

// float32 through two different orders of the same sums (one row of attention against the
// cache, or the whole (T, T) at once), then a LayerNorm: the logits of a random model are O(1).
constexpr double kTolerance = 1e-4;

// The logits (V) that lab 10's model_forward gives at the last position of `sequence`.
Tensor1 forward_last(const ModelParams<float>& params, std::size_t n_heads,
                     const std::vector<std::size_t>& sequence) {
  ModelTape<float> tape;
  const xt::xtensor<float, 3> logits = model_forward(params, n_heads, {sequence}, tape);
  return xt::view(logits, 0, sequence.size() - 1);
}

std::string text(const std::vector<std::size_t>& tokens) {
  std::string out;
  for (const std::size_t t : tokens) out += (out.empty() ? "" : " ") + std::to_string(t);
  return out;
}

struct Case {
  const char* name;
  ModelConfig config;  // vocab, max_len, d_model, n_heads, n_layers
  std::vector<std::size_t> prompt;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"two layers, two heads", {11, 14, 8, 2, 2}, {3, 7, 1, 10}},
      {"one layer, one head", {5, 9, 6, 1, 1}, {4}},
      {"three layers, four heads", {13, 12, 16, 4, 3}, {0, 12, 5, 5, 9, 2}},
  };
  return all;
}

TEST(CachedModel, EachStepsLogitsAreModelForwardsAtTheLastPosition) {
  for (const Case& c : cases()) {
    for (const std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(std::string(c.name) + ", seed " + std::to_string(seed));
      const ModelParams<float> params = testing::random_model(c.config, seed);
      CachedModel model(c.config, params);
      std::vector<std::size_t> sequence = c.prompt;
      Tensor1 logits = model.feed(c.prompt);  // the prompt as one chunk
      while (true) {
        SCOPED_TRACE("after " + text(sequence));
        ASSERT_EQ(model.length(), sequence.size());
        const Tensor1 expected = forward_last(params, c.config.n_heads, sequence);
        ASSERT_TRUE(all_close(logits, expected, kTolerance));
        const std::size_t next = workbench::argmax(logits);
        ASSERT_EQ(next, workbench::argmax(expected));
        sequence.push_back(next);
        if (sequence.size() == c.config.max_len) break;
        logits = model.feed({next});  // then one token at a time
      }
    }
  }
}

TEST(GreedyGenerate, EqualsTheArgmaxOfModelForwardStepByStep) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    // Lab 10's own initialisation here, hand-drawn parameters above.
    const ModelParams<float> params = init_model(c.config, 10);
    const std::size_t count = c.config.max_len - c.prompt.size();
    const std::vector<std::size_t> generated =
        workbench::greedy_generate(c.config, params, c.prompt, count);
    ASSERT_EQ(generated.size(), count);
    std::vector<std::size_t> sequence = c.prompt;
    for (std::size_t i = 0; i < count; ++i) {
      SCOPED_TRACE("token " + std::to_string(i) + " after " + text(sequence));
      EXPECT_EQ(generated[i], workbench::argmax(forward_last(params, c.config.n_heads, sequence)));
      sequence.push_back(generated[i]);
    }
    // Fewer tokens are a prefix of more: each depends only on those before it.
    const std::vector<std::size_t> fewer =
        workbench::greedy_generate(c.config, params, c.prompt, count / 2);
    EXPECT_EQ(fewer, std::vector<std::size_t>(generated.begin(),
                                              generated.begin() + std::ptrdiff_t(count / 2)));
  }
}

TEST(CachedModel, APromptFedOneTokenAtATimeGivesTheLogitsOfOneChunk) {
  const Case& c = cases()[0];
  const ModelParams<float> params = testing::random_model(c.config, 3);
  CachedModel chunk(c.config, params), single(c.config, params);
  const Tensor1 at_once = chunk.feed(c.prompt);
  Tensor1 one_by_one;
  for (const std::size_t token : c.prompt) one_by_one = single.feed({token});
  EXPECT_TRUE(all_close(one_by_one, at_once, kTolerance));
}

TEST(Argmax, TiesGoToTheLowestId) {
  EXPECT_EQ(workbench::argmax(Tensor1{1.0f, 3.0f, 3.0f, 2.0f}), 1u);
  EXPECT_EQ(workbench::argmax(Tensor1{-2.0f, -2.0f}), 0u);
  EXPECT_EQ(workbench::argmax(Tensor1{0.0f, 0.5f, 0.25f, 0.5f + 1e-6f}), 3u);
}

TEST(GreedyGenerate, RejectsAnEmptyPromptATokenOutsideTheVocabularyAndTooManyTokens) {
  const ModelConfig config{5, 8, 4, 2, 1};
  const ModelParams<float> params = testing::random_model(config, 1);
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] { workbench::greedy_generate(config, params, {}, 3); }, {"empty"}));
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        workbench::greedy_generate(config, params, {1, 5}, 3);
      },
      {"token 5", "5"}));
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        workbench::greedy_generate(config, params, {1, 2, 3}, 6);
      },
      {"3 tokens", "6", "8"}));
  EXPECT_TRUE(workbench::greedy_generate(config, params, {1, 2, 3}, 0).empty());
  EXPECT_EQ(workbench::greedy_generate(config, params, {1, 2, 3}, 5).size(), 5u);
}

// The message of greedy_generate's std::runtime_error (workbench::Float32Overflow), or "" when it
// returns tokens.
std::string overflow_message(const ModelConfig& config, const ModelParams<float>& params) {
  try {
    workbench::greedy_generate(config, params, {1, 2}, 3);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(GreedyGenerate, RefusesAModelThatOverflowsFloat32InsteadOfChoosingTokenZero) {
  const ModelConfig config{5, 8, 4, 2, 1};
  // Finite weights of 1e20: LayerNorm's squares pass float32's 3.4e38, the variance is infinite,
  // every row normalises to zeros and every logit is 0: argmax would pick token 0 at every step.
  ModelParams<float> huge = testing::random_model(config, 1);
  for (xt::xtensor<float, 2>* tensor : tensors_of(huge)) *tensor *= 1e20f;
  EXPECT_EQ(overflow_message(config, huge)
                .rfind("the model's logits at step 1 cannot be computed: layer 0's LayerNorm input "
                       "overflows float32: a row's deviation from its mean reaches ",
                       0),
            0u)
      << overflow_message(config, huge);
  // An unembedding of 3e38: the logits' sums overflow to an infinity or a NaN, and an argmax over
  // a NaN would pick token 0 too.
  ModelParams<float> wide = testing::random_model(config, 1);
  wide.unembedding.fill(3e38f);
  EXPECT_EQ(
      overflow_message(config, wide).rfind("the model's logits at step 1 are not finite (", 0), 0u)
      << overflow_message(config, wide);
}

TEST(CachedModel, RefusesToPassMaxLenAndFeedsNothingThen) {
  const ModelConfig config{5, 4, 4, 2, 1};
  const ModelParams<float> params = testing::random_model(config, 1);
  CachedModel model(config, params);
  model.feed({1, 2, 3});
  EXPECT_TRUE(testing::throws_invalid_argument([&] { model.feed({1, 2}); }, {"2", "3", "4"}));
  EXPECT_EQ(model.length(), 3u);
  model.feed({4});
  EXPECT_EQ(model.length(), 4u);
}

}  // namespace
}  // namespace minimodel
