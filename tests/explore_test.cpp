// The attention explorer's page data (workbench/explore/page_data.hpp): the head scores, the top
// predictions, displayable tokens, the JSON and the page; and explore-reference, the engine of
// `workbook explore --checkpoint`, on a checkpoint written here, with hostile inputs. The page
// itself is tested in a browser (tests/browser/).
#include <unistd.h>  // getpid

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "checkpoint/checkpoint.hpp"
#include "explore/page_data.hpp"
#include "util/files.hpp"
#include "util/process.hpp"

namespace {

using Weights = xt::xtensor<float, 2>;

// Causal weights, each row uniform over the keys 0 … t.
Weights uniform_causal(std::size_t T) {
  Weights p = xt::zeros<float>({T, T});
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t s = 0; s <= t; ++s) p(t, s) = 1.0f / float(t + 1);
  return p;
}

TEST(InductionKeys, NameTheTokenAfterTheEarlierOccurrenceOfARepeatedSpan) {
  // a b c a b c: query 4 (b after a) looks at 2 (c, what followed the earlier "a b"), query 5 at 3.
  const auto keys = workbench::induction_keys({0, 1, 2, 0, 1, 2});
  ASSERT_EQ(keys.size(), 6u);
  for (std::size_t t : {0, 1, 2, 3}) EXPECT_FALSE(keys[t]) << "query " << t;
  EXPECT_EQ(keys[4], std::optional<std::size_t>(2));
  EXPECT_EQ(keys[5], std::optional<std::size_t>(3));
}

TEST(InductionKeys, TakeTheLatestOccurrenceAndNeverThePreviousToken) {
  // x y x y x y: with a period of 2 the nearest earlier "x y" is followed by the previous token
  // t − 1, which does not count; the one before it gives query 5 the key 2.
  const auto keys = workbench::induction_keys({7, 8, 7, 8, 7, 8});
  EXPECT_FALSE(keys[3]);  // j = 1 would give key 2 = t − 1
  EXPECT_FALSE(keys[4]);  // j = 2 would give key 3 = t − 1, and j = 0 has no span before it
  EXPECT_EQ(keys[5], std::optional<std::size_t>(2));
  // A repeated token alone is no repeated span.
  const auto single = workbench::induction_keys({3, 1, 2, 5, 3, 4});
  for (const auto& key : single) EXPECT_FALSE(key);
}

TEST(ScoreHead, APreviousTokenHeadScoresOneAndUniformWeightsScoreTheirMean) {
  const std::size_t T = 6;
  Weights previous = xt::zeros<float>({T, T});
  previous(0, 0) = 1.0f;
  for (std::size_t t = 1; t < T; ++t) previous(t, t - 1) = 1.0f;
  const auto keys = workbench::induction_keys({0, 1, 2, 0, 1, 2});
  const workbench::HeadScore s = workbench::score_head(previous, keys);
  EXPECT_DOUBLE_EQ(*s.previous_token, 1.0);
  EXPECT_DOUBLE_EQ(*s.first_token, 1.0 / double(T - 1));  // only query 1's previous token is 0
  EXPECT_DOUBLE_EQ(*s.induction, 0.0);  // queries 4 and 5 look at 3 and 4, not 2 and 3

  const workbench::HeadScore u = workbench::score_head(uniform_causal(T), keys);
  double mean = 0.0;
  for (std::size_t t = 1; t < T; ++t) mean += 1.0 / double(t + 1) / double(T - 1);
  EXPECT_NEAR(*u.previous_token, mean, 1e-7);  // float weights: 1e-7 relative
  EXPECT_NEAR(*u.first_token, mean, 1e-7);
  EXPECT_NEAR(*u.induction, (1.0 / 5 + 1.0 / 6) / 2, 1e-7);
}

TEST(ScoreHead, HasNoInductionScoreWithoutARepeatedSpanAndNoneAtAll) {
  const workbench::HeadScore s = workbench::score_head(uniform_causal(3), {{}, {}, {}});
  EXPECT_FALSE(s.induction);
  EXPECT_TRUE(s.previous_token);
  const workbench::HeadScore one = workbench::score_head(uniform_causal(1), {{}});
  EXPECT_FALSE(one.previous_token);  // one token has no previous one
  EXPECT_FALSE(one.first_token);
}

TEST(ScoreHead, RejectsWeightsThatAreNotSquareOrKeysOfAnotherLength) {
  EXPECT_THROW(workbench::score_head(xt::zeros<float>({3, 4}), {{}, {}, {}}),
               std::invalid_argument);
  try {
    workbench::score_head(uniform_causal(3), {{}, {}});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 induction keys"), std::string::npos) << e.what();
  }
  EXPECT_THROW(workbench::score_head(uniform_causal(3), {{}, {}, {7}}), std::invalid_argument);
}

TEST(TopPredictions, AreTheMostProbableTokensOfTheSoftmaxInOrder) {
  const xt::xtensor<float, 1> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f};
  const auto top = workbench::top_predictions(
      logits, 5, [](std::size_t id) { return "t" + std::to_string(id); });
  ASSERT_EQ(top.size(), 5u);
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double(l));
  const std::vector<std::size_t> order = {1, 3, 5, 0, 4};  // a tie: the lower id first
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(top[r].id, order[r]);
    EXPECT_EQ(top[r].text, "t" + std::to_string(order[r]));
    EXPECT_NEAR(top[r].probability, std::exp(double(logits(order[r]))) / sum, 1e-12);
  }
  const xt::xtensor<float, 1> two = {0.0f, 1.0f};
  EXPECT_EQ(workbench::top_predictions(two, 5, [](std::size_t) { return ""; }).size(), 2u);
  const xt::xtensor<float, 1> nan = {0.0f, std::nanf("")};
  EXPECT_THROW(workbench::top_predictions(nan, 5, [](std::size_t) { return ""; }),
               std::invalid_argument);
}

TEST(Displayable, KeepsValidUtf8AndEscapesEachByteOfAnInvalidSequence) {
  EXPECT_EQ(workbench::displayable(" the"), " the");
  EXPECT_EQ(workbench::displayable("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(workbench::displayable("a\xE2\x82"), "a\\xE2\\x82");  // half of "€"
  EXPECT_EQ(workbench::displayable("\xFF x"), "\\xFF x");
  std::size_t where = 0;
  EXPECT_FALSE(workbench::valid_utf8("ab\xC0\x80", &where));  // an overlong NUL
  EXPECT_EQ(where, 2u);
  EXPECT_FALSE(workbench::valid_utf8("\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(workbench::valid_utf8("\xF0\x9F\x98\x80"));
}

TEST(Displayable, ShowsSpacesAndNewlinesWhenAskedAndEscapesBeforeThat) {
  using workbench::Whitespace;
  EXPECT_EQ(workbench::displayable(" the\n", Whitespace::visible), "\xE2\x90\xA3the\xE2\x86\xB5");
  EXPECT_EQ(workbench::displayable("\t\xFF ", Whitespace::visible), "\t\\xFF\xE2\x90\xA3");
  EXPECT_EQ(workbench::displayable(" \n", Whitespace::as_is), " \n");
  EXPECT_TRUE(workbench::valid_utf8(workbench::displayable("\xE2\x82 \xC0", Whitespace::visible)));
}

workbench::PageData small_page() {
  workbench::PageData page;
  page.title = "test";
  page.tokens = {"<bos>", " a", "</script>", " a"};
  page.weights = {{uniform_causal(4), uniform_causal(4)}};
  page.scores = workbench::score_heads(page.weights, workbench::ids_of(page.tokens));
  for (std::size_t t = 0; t < 4; ++t) page.predictions.push_back({{t, "x", 0.123456}});
  return page;
}

TEST(PageJson, RoundsToFourDecimalsAndReadsBack) {
  const workbench::PageData page = small_page();
  const nlohmann::json json = workbench::page_json(page);
  EXPECT_EQ(json["n_layers"], 1);
  EXPECT_EQ(json["n_heads"], 2);
  EXPECT_EQ(json["weights"][0][1][2][0].get<double>(), 0.3333);
  EXPECT_EQ(json["predictions"][3][0]["probability"].get<double>(), 0.1235);
  EXPECT_TRUE(json["scores"][0]["induction"].is_null());  // " a" repeats, but not as a span
  const workbench::PageData back = workbench::page_from_json(json);
  EXPECT_EQ(back.tokens, page.tokens);
  EXPECT_EQ(workbench::page_json(back), json);
}

TEST(PageJson, RejectsWeightsScoresAndPredictionsOfTheWrongShape) {
  workbench::PageData page = small_page();
  page.weights[0][1] = uniform_causal(3);
  EXPECT_THROW(workbench::page_json(page), std::invalid_argument);
  page = small_page();
  page.scores.pop_back();
  EXPECT_THROW(workbench::page_json(page), std::invalid_argument);
  page = small_page();
  page.predictions.pop_back();
  EXPECT_THROW(workbench::page_json(page), std::invalid_argument);
  page = small_page();
  page.tokens.clear();
  EXPECT_THROW(workbench::page_json(page), std::invalid_argument);
  EXPECT_THROW(workbench::page_from_json({{"format", "other"}}), std::runtime_error);
  page = small_page();
  page.weights[0][0](2, 1) = std::nanf("");  // a learner's NaN: null in JSON, NaN read back
  const workbench::PageData back = workbench::page_from_json(workbench::page_json(page));
  EXPECT_TRUE(std::isnan(back.weights[0][0](2, 1)));
}

TEST(ExplorerHtml, HoldsThePageDataAsOneJsonBlockThatNoTokenCanEnd) {
  const workbench::PageData page = small_page();
  const std::string html = workbench::explorer_html(page);
  const std::string open = "<script type=\"application/json\" id=\"page-data\">";
  const std::size_t start = html.find(open);
  ASSERT_NE(start, std::string::npos);
  const std::size_t end = html.find("</script>", start);
  const std::string block = html.substr(start + open.size(), end - start - open.size());
  EXPECT_EQ(nlohmann::json::parse(block), workbench::page_json(page));  // "</script>" escaped
  EXPECT_EQ(html.find("http://", 0) == std::string::npos ||
                html.find("http://www.w3.org/2000/svg") != std::string::npos,
            true);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // nothing from the network
  EXPECT_EQ(html.find("<link rel=\"stylesheet"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
}

// ---- the engine, on a checkpoint of random weights --------------------------------------------

const std::filesystem::path kBin = MINIMODEL_BIN_DIR;

class ExploreEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("explore-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    workbench::Checkpoint c;
    c.config = {8, 6, 8, 2, 2};  // V, max_len, d_model, heads, layers
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    const auto draw = [&](std::size_t r, std::size_t k) {
      minimodel::Matrix<float> m({r, k});
      for (float& v : m) v = normal(rng);
      return m;
    };
    c.params.embedding = draw(8, 8);
    c.params.positions = draw(6, 8);
    for (int l = 0; l < 2; ++l)
      c.params.layers.push_back({draw(8, 8), draw(8, 8), draw(8, 8), draw(8, 8)});
    c.params.unembedding = draw(8, 8);
    workbench::save_checkpoint(dir_ / "checkpoint", c);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  workbench::CapturedRun run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--checkpoint", (dir_ / "checkpoint").string()});
    return workbench::run_captured((kBin / "explore-reference").string(), args);
  }
  std::filesystem::path dir_;
};

TEST_F(ExploreEngine, WritesThePageAndItsDataWithOneHeadPerLayerAndHead) {
  const auto out = dir_ / "page.html";
  const auto result = run({"--tokens", "1 2 3 1 2 3", "--out", out.string()});
  ASSERT_EQ(result.status.code, 0) << result.output;
  const auto json = nlohmann::json::parse(workbench::read_file(dir_ / "page.json"));
  EXPECT_EQ(json["tokens"].size(), 6u);
  EXPECT_EQ(json["weights"].size(), 2u);
  EXPECT_EQ(json["weights"][1].size(), 2u);
  EXPECT_EQ(json["predictions"][5].size(), 5u);
  EXPECT_FALSE(json["scores"][0]["induction"].is_null());  // "1 2 3" repeats
  // Causal: no weight on a later key.
  for (const auto& layer : json["weights"])
    for (const auto& head : layer)
      for (std::size_t t = 0; t < 6; ++t)
        for (std::size_t s = t + 1; s < 6; ++s) EXPECT_EQ(head[t][s].get<double>(), 0.0);
  EXPECT_NE(workbench::read_file(out).find("\"format\":\"minimodel-explore 1\""),
            std::string::npos);
}

TEST_F(ExploreEngine, CutsAnInputLongerThanTheContextAndSaysSo) {
  const auto out = dir_ / "page.html";
  const auto result = run({"--tokens", "1 2 3 4 5 6 7 0", "--out", out.string()});
  ASSERT_EQ(result.status.code, 0) << result.output;
  EXPECT_NE(result.output.find("only the first 6"), std::string::npos) << result.output;
  const auto json = nlohmann::json::parse(workbench::read_file(dir_ / "page.json"));
  EXPECT_EQ(json["tokens"].size(), 6u);
  EXPECT_NE(json["notes"].dump().find("only the first 6"), std::string::npos);
}

TEST_F(ExploreEngine, RefusesHostileInputWithOneLineAndWritesNothing) {
  const auto out = dir_ / "page.html";
  workbench::write_file_atomically(dir_ / "bad.txt", "ok \xFF\xFE");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--text", ""}, "holds no text"},
      {{"--text-file", "/dev/null"}, "not a regular file"},
      {{"--text-file", (dir_ / "bad.txt").string()}, "not valid UTF-8 (byte 3)"},
      {{"--text-file", (dir_ / "missing.txt").string()}, "no such file"},
      {{"--text", "In the beginning"}, "has no tokenizer"},
      {{"--tokens", ""}, "holds no token id"},
      {{"--tokens", "1 x"}, "'x' is not a token id"},
      {{"--tokens", "1 8"}, "vocabulary is 0 to 7"},
      {{}, "give the input"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> all = args;
    all.insert(all.end(), {"--out", out.string()});
    const auto result = run(all);
    EXPECT_EQ(result.status.code, 2) << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  const auto device = run({"--tokens", "1 2", "--out", "/dev/null"});
  EXPECT_EQ(device.status.code, 2) << device.output;
  EXPECT_NE(device.output.find("not a regular file"), std::string::npos) << device.output;
  const auto missing = workbench::run_captured(
      (kBin / "explore-reference").string(),
      {"--checkpoint", (dir_ / "nowhere").string(), "--tokens", "1", "--out", out.string()});
  EXPECT_EQ(missing.status.code, 2);
  EXPECT_NE(missing.output.find("HINT: `workbook verify 10`"), std::string::npos) << missing.output;
  workbench::write_file_atomically(dir_ / "checkpoint" / "config.json", "{\"vocab\": ");
  const auto broken = run({"--tokens", "1", "--out", out.string()});
  EXPECT_EQ(broken.status.code, 2);
  EXPECT_NE(broken.output.find("config.json"), std::string::npos) << broken.output;
}

}  // namespace

namespace {

TEST(LabPage, TakesEachLayersHeadsOfOneSequenceAndScoresThemOnTheTokens) {
  xt::xtensor<float, 4> layer = xt::zeros<float>({1, 2, 4, 4});
  xt::view(layer, 0, 0) = uniform_causal(4);
  for (std::size_t t = 0; t < 4; ++t) layer(0, 1, t, t == 0 ? 0 : t - 1) = 1.0f;
  const std::vector<std::string> tokens = {"<bos>", "I", "work", ","};
  const workbench::PageData page = workbench::lab_page("lab", tokens, {layer, layer});
  ASSERT_EQ(page.weights.size(), 2u);
  ASSERT_EQ(page.weights[1].size(), 2u);
  EXPECT_EQ(page.weights[1][1], xt::view(layer, 0, 1));
  ASSERT_EQ(page.scores.size(), 4u);
  EXPECT_EQ(page.scores[3].layer, 1u);
  EXPECT_EQ(page.scores[3].head, 1u);
  EXPECT_DOUBLE_EQ(*page.scores[3].previous_token, 1.0);
  EXPECT_TRUE(page.predictions.empty());
  EXPECT_THROW(workbench::lab_page("lab", {"a", "b"}, {layer}), std::invalid_argument);
  EXPECT_THROW(workbench::lab_page("lab", tokens, {xt::zeros<float>({2, 2, 4, 4})}),
               std::invalid_argument);
}

TEST(CrossAttentionPage, HasItsOwnKeysNoScoresAndReadsBackNonSquare) {
  // 2 queries over 3 keys of another sequence, 2 heads: (1, 2, 2, 3).
  xt::xtensor<float, 4> weights = xt::zeros<float>({1, 2, 2, 3});
  xt::view(weights, 0, 0) = xt::xtensor<float, 2>{{0.5f, 0.5f, 0.0f}, {0.25f, 0.25f, 0.5f}};
  xt::view(weights, 0, 1) = xt::xtensor<float, 2>{{1.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 1.0f}};
  const std::vector<std::string> queries = {"we", "rest"}, keys = {"<bos>", "I", "<pad>"};
  const workbench::PageData page = workbench::cross_attention_page("cross", queries, keys, weights);
  EXPECT_EQ(page.key_tokens, keys);
  ASSERT_EQ(page.scores.size(), 2u);
  for (const workbench::HeadScore& score : page.scores)
    EXPECT_FALSE(score.previous_token || score.induction || score.first_token);
  const nlohmann::json json = workbench::page_json(page);
  EXPECT_EQ(json["key_tokens"], nlohmann::json(keys));
  EXPECT_EQ(json["weights"][0][0][1].size(), 3u);  // a row has S = 3 keys
  const workbench::PageData back = workbench::page_from_json(json);
  EXPECT_EQ(back.key_tokens, keys);
  EXPECT_EQ(back.weights[0][1], xt::view(weights, 0, 1));
  EXPECT_EQ(workbench::page_json(back), json);
  // A self-attention page says null, and a page written before key_tokens existed reads as one.
  EXPECT_TRUE(workbench::page_json(small_page())["key_tokens"].is_null());
  nlohmann::json old = workbench::page_json(small_page());
  old.erase("key_tokens");
  EXPECT_TRUE(workbench::page_from_json(old).key_tokens.empty());
  // Weights whose keys are not the key tokens are refused, written or read.
  workbench::PageData wrong = page;
  wrong.key_tokens.pop_back();
  EXPECT_THROW(workbench::page_json(wrong), std::invalid_argument);
  nlohmann::json short_keys = json;
  short_keys["key_tokens"].erase(2);
  EXPECT_THROW(workbench::page_from_json(short_keys), std::runtime_error);
  EXPECT_THROW(
      workbench::cross_attention_page("cross", queries, keys, xt::zeros<float>({2, 2, 2, 3})),
      std::invalid_argument);
}

}  // namespace
