// Tests of lab 13's checkpoints (workbench/checkpoint/gpt_checkpoint) and training driver
// (workbench/train), on the reference: a run stopped, saved, loaded and continued is the run never
// stopped, to the last bit of every parameter and AdamW moment; a round trip keeps everything; a
// broken or mismatched checkpoint gets one message naming its file; and steps on two threads are
// the steps on one, to the last bit.
#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/gpt_checkpoint.hpp"
#include "support/random_model.hpp"
#include "support/temp_dir.hpp"
#include "tensors/npy_io.hpp"
#include "train/gpt_trainer.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
using minimodel::TokenId;
using workbench::GptCheckpoint;
using workbench::GptTrainer;
using workbench::load_gpt_checkpoint;
using workbench::save_gpt_checkpoint;

namespace {

// Small and every size distinct, so that a transposed tensor cannot pass: V 37, max_len 16,
// d_model 12 in 3 heads, 2 layers; batches of 3 windows of 10 (+ 1) tokens. The learning rate is
// large and the schedule short, so that the steps after the resume are in the cosine's descent and
// every moment has moved.
workbench::GptRunSettings small_run() {
  workbench::GptRunSettings run;
  run.model = {37, 16, 12, 3, 2};
  run.train.schedule = {3e-2, 3e-3, 3, 12};
  run.train.max_grad_norm = 1.0f;
  run.batch = 3;
  run.length = 10;
  run.seed = 11;
  return run;
}

// A vocab.json of `vocab` tokens (the loader counts them) and a merges.txt: the checkpoint keeps
// their texts whatever they say.
workbench::TokenizerFiles small_tokenizer(std::size_t vocab) {
  nlohmann::json tokens = nlohmann::json::object();
  for (std::size_t i = 0; i + 1 < vocab; ++i) tokens["t" + std::to_string(i)] = i;
  tokens["<|endoftext|>"] = vocab - 1;
  return {tokens.dump(1) + "\n", "#version: 0.2\nt 0\n", {"<|endoftext|>"}};
}

// A stream of 600 tokens with some structure to learn: runs of a repeated pattern among noise.
std::vector<TokenId> small_stream(std::size_t vocab) {
  std::mt19937_64 rng(5);
  std::vector<TokenId> stream;
  while (stream.size() < 600) {
    const TokenId start = TokenId(rng() % vocab);
    for (TokenId i = 0; i < 5; ++i) stream.push_back((start + 3 * i) % TokenId(vocab));
  }
  return stream;
}

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream text;
  text << rng;
  return text.str();
}

// Every parameter, both moments, the step and the generator, bit for bit.
::testing::AssertionResult same_run(const GptCheckpoint& a, const GptCheckpoint& b) {
  const auto ta = minimodel::parameter_tensors(a.params),
             tb = minimodel::parameter_tensors(b.params);
  if (ta.size() != tb.size())
    return ::testing::AssertionFailure() << ta.size() << " tensors vs " << tb.size();
  if (a.step != b.step)
    return ::testing::AssertionFailure() << "step " << a.step << " vs " << b.step;
  if (a.adam_m.size() != ta.size() || b.adam_m.size() != ta.size() ||
      a.adam_v.size() != ta.size() || b.adam_v.size() != ta.size())
    return ::testing::AssertionFailure() << "the moments are not one per tensor";
  for (std::size_t i = 0; i < ta.size(); ++i) {
    if (ta[i].shape != tb[i].shape)
      return ::testing::AssertionFailure() << ta[i].name << ": the shapes differ";
    const std::size_t bytes = ta[i].size() * sizeof(float);
    if (std::memcmp(ta[i].data, tb[i].data, bytes) != 0)
      return ::testing::AssertionFailure() << ta[i].name << ": the bits differ";
    if (std::memcmp(a.adam_m[i].data(), b.adam_m[i].data(), bytes) != 0)
      return ::testing::AssertionFailure() << "adam_m." << ta[i].name << ": the bits differ";
    if (std::memcmp(a.adam_v[i].data(), b.adam_v[i].data(), bytes) != 0)
      return ::testing::AssertionFailure() << "adam_v." << ta[i].name << ": the bits differ";
  }
  if (a.rng != b.rng) return ::testing::AssertionFailure() << "the batch generators differ";
  return ::testing::AssertionSuccess();
}

// Passes when `call` throws std::runtime_error whose message contains every one of `parts`.
::testing::AssertionResult throws_naming(const std::function<void()>& call,
                                         const std::vector<std::string>& parts) {
  try {
    call();
  } catch (const std::runtime_error& e) {
    for (const std::string& part : parts)
      if (std::string(e.what()).find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "std::runtime_error \"" << e.what() << "\" does not mention \"" << part << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "expected std::runtime_error, got: " << e.what();
  }
  return ::testing::AssertionFailure() << "expected std::runtime_error, nothing was thrown";
}

class GptCheckpointTest : public ::testing::Test {
 protected:
  GptCheckpointTest() : stream_(small_stream(small_run().model.vocab)) {}

  // A checkpoint of the small run after `steps` steps, saved into dir().
  GptCheckpoint trained(std::size_t steps) {
    GptTrainer trainer(small_run(), small_tokenizer(small_run().model.vocab));
    for (std::size_t i = 0; i < steps; ++i) trainer.step(stream_);
    GptCheckpoint checkpoint =
        trainer.checkpoint({{"note", "a test run"}, {"losses", {1.5, 2.25}}});
    save_gpt_checkpoint(dir(), checkpoint);
    return checkpoint;
  }
  void rewrite_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json config = nlohmann::json::parse(workbench::read_file(dir() / "config.json"));
    edit(config);
    workbench::write_file_atomically(dir() / "config.json", config.dump(2));
  }

  fs::path dir() const { return tmp_.path() / "run"; }
  std::vector<TokenId> stream_;
  minimodel::testing::TempDir tmp_{"gpt_checkpoint_test"};
};

TEST_F(GptCheckpointTest, AResumedRunIsBitIdenticalToARunNeverStopped) {
  constexpr std::size_t kSteps = 9, kStop = 4;  // the stop in warm-up's end, the rest in the cosine
  GptTrainer straight(small_run(), small_tokenizer(small_run().model.vocab));
  std::vector<float> straight_losses;
  for (std::size_t i = 0; i < kSteps; ++i) straight_losses.push_back(straight.step(stream_).loss);

  GptTrainer first(small_run(), small_tokenizer(small_run().model.vocab));
  for (std::size_t i = 0; i < kStop; ++i) first.step(stream_);
  save_gpt_checkpoint(dir(), first.checkpoint());
  GptTrainer resumed(load_gpt_checkpoint(dir()));
  ASSERT_EQ(resumed.steps(), kStop);
  for (std::size_t i = kStop; i < kSteps; ++i) {
    const float loss = resumed.step(stream_).loss;
    EXPECT_EQ(std::memcmp(&loss, &straight_losses[i], sizeof loss), 0)
        << "step " << i + 1 << ": loss " << loss << " vs " << straight_losses[i];
  }
  EXPECT_TRUE(same_run(straight.checkpoint(), resumed.checkpoint()));
  // The run learned something, so that "identical" is not about a model that never moved.
  EXPECT_LT(straight_losses.back(), straight_losses.front() - 0.1f);
}

TEST_F(GptCheckpointTest, TheLoopAppendsAResumedRunsLogToTheFirstOnes) {
  const fs::path log = tmp_.path() / "log.csv";
  workbench::TrainLoopOptions options;
  options.eval_every = 3;
  options.eval_windows = 4;
  options.log_csv = log;
  options.progress = false;
  const std::vector<std::size_t> token_bytes(small_run().model.vocab, 2);

  GptTrainer first(small_run(), small_tokenizer(small_run().model.vocab));
  options.until_step = 5;
  const workbench::TrainLog one =
      workbench::train_gpt(first, stream_, stream_, token_bytes, options);
  save_gpt_checkpoint(dir(), first.checkpoint());
  GptTrainer resumed(load_gpt_checkpoint(dir()));
  options.until_step = 8;
  const workbench::TrainLog two =
      workbench::train_gpt(resumed, stream_, stream_, token_bytes, options);

  ASSERT_EQ(one.steps.size(), 5u);
  ASSERT_EQ(two.steps.size(), 3u);
  EXPECT_EQ(two.steps.front().step, 6u);
  // Evaluations after steps 3 and 5 (the end), then 6 (a multiple of 3) and 8 (the end).
  ASSERT_EQ(one.evals.size(), 2u);
  EXPECT_EQ(one.evals.back().step, 5u);
  ASSERT_EQ(two.evals.size(), 2u);
  EXPECT_EQ(two.evals.front().step, 6u);
  EXPECT_DOUBLE_EQ(two.evals.back().eval.bits_per_byte,
                   two.evals.back().eval.loss / (std::log(2.0) * 2.0));

  std::ifstream in(log);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 8u + 4u) << "a header, 8 steps and 4 evaluations";
  EXPECT_EQ(lines[0], "step,loss,lr,grad_norm,tokens_per_s,seconds,val_loss,val_bits_per_byte");
  std::vector<std::size_t> step_lines;
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (lines[i].substr(lines[i].find(',') + 1, 1) != ",")  // a step's line has a loss
      step_lines.push_back(std::stoul(lines[i].substr(0, lines[i].find(','))));
  EXPECT_EQ(step_lines, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(GptCheckpointTest, ARoundTripKeepsEveryPartBitForBit) {
  const GptCheckpoint saved = trained(3);
  const GptCheckpoint loaded = load_gpt_checkpoint(dir());
  EXPECT_TRUE(same_run(saved, loaded));
  EXPECT_EQ(loaded.params.config.vocab, 37u);
  EXPECT_EQ(loaded.params.config.n_heads, 3u);
  EXPECT_EQ(loaded.adamw.beta2, saved.adamw.beta2);
  EXPECT_EQ(loaded.adamw.eps, saved.adamw.eps);
  EXPECT_EQ(loaded.train.schedule.lr_max, saved.train.schedule.lr_max);
  EXPECT_EQ(loaded.train.schedule.max_steps, saved.train.schedule.max_steps);
  EXPECT_EQ(loaded.train.max_grad_norm, saved.train.max_grad_norm);
  EXPECT_EQ(loaded.batch, 3u);
  EXPECT_EQ(loaded.length, 10u);
  EXPECT_EQ(loaded.seed, 11u);
  EXPECT_EQ(rng_state(loaded.rng), rng_state(saved.rng));
  EXPECT_EQ(loaded.vocab_json, saved.vocab_json);
  EXPECT_EQ(loaded.merges_txt, saved.merges_txt);
  EXPECT_EQ(loaded.special_tokens, saved.special_tokens);
  EXPECT_EQ(loaded.run, saved.run);
  // The folder is a tokenizer folder too (`workbook tokenize` reads these three).
  for (const char* file : {"vocab.json", "merges.txt", "special_tokens.json"})
    EXPECT_TRUE(fs::is_regular_file(dir() / file)) << file;
  EXPECT_TRUE(fs::is_regular_file(dir() / "adam_v.h1.mlp.w_proj.npy"));
  EXPECT_TRUE(workbench::is_gpt_checkpoint(dir()));
}

TEST_F(GptCheckpointTest, AModelNeverTrainedHasNoMomentsAndASecondSaveKeepsThePrevious) {
  GptTrainer trainer(small_run(), small_tokenizer(small_run().model.vocab));
  save_gpt_checkpoint(dir(), trainer.checkpoint());
  EXPECT_FALSE(fs::exists(dir() / "adam_m.wte.npy"));
  const GptCheckpoint loaded = load_gpt_checkpoint(dir());
  EXPECT_EQ(loaded.step, 0u);
  EXPECT_TRUE(loaded.adam_m.empty());
  trainer.step(stream_);
  save_gpt_checkpoint(dir(), trainer.checkpoint());
  EXPECT_EQ(load_gpt_checkpoint(dir()).step, 1u);
  EXPECT_EQ(load_gpt_checkpoint(fs::path(dir().string() + ".previous")).step, 0u);
}

TEST_F(GptCheckpointTest, SaveRejectsTensorsOrMomentsThatDisagreeWithTheConfig) {
  GptTrainer trainer(small_run(), small_tokenizer(small_run().model.vocab));
  trainer.step(stream_);
  GptCheckpoint wrong = trainer.checkpoint();
  wrong.params.layers[1].mlp.w_fc = minimodel::Matrix<float>(xt::zeros<float>({12, 47}));
  EXPECT_THROW(save_gpt_checkpoint(dir(), wrong), std::invalid_argument);
  GptCheckpoint no_moments = trainer.checkpoint();
  no_moments.adam_m.clear();
  no_moments.adam_v.clear();
  EXPECT_THROW(save_gpt_checkpoint(dir(), no_moments), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir())) << "nothing is written";
}

TEST_F(GptCheckpointTest, AMissingOrMisshapenTensorOrMomentIsNamedWithBothShapes) {
  trained(2);
  fs::remove(dir() / "adam_v.h0.attn.w_k.npy");
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"adam_v.h0.attn.w_k.npy"}));
  trained(2);
  workbench::save_npy_f32(dir() / "h1.attn.w_q.npy", xt::zeros<float>({12, 13}));
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); },
                            {"h1.attn.w_q.npy", "(12, 13)", "(12, 12)"}));
  trained(2);
  workbench::save_npy_f32(dir() / "ln_f.gain.npy", xt::zeros<float>({11}));
  EXPECT_TRUE(
      throws_naming([&] { load_gpt_checkpoint(dir()); }, {"ln_f.gain.npy", "(11,)", "(12,)"}));
}

TEST_F(GptCheckpointTest, AConfigThatDisagreesWithItselfOrTheFilesIsNamed) {
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["model"]["n_heads"] = 5; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"config.json", "n_heads 5"}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["model"]["vocab"] = 40; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"vocab.json", "37", "40"}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["tensors"][2] = "h0.ln_2.gain"; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"\"tensors\""}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["training"]["rng_state"] = "1 2 3"; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"rng_state"}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["optimizer"].erase("beta2"); });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"\"optimizer\"", "beta2"}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["model"]["d_model"] = 1ull << 40; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"config.json", "model"}));
  trained(2);  // each size plausible, their product a model of 2^30 parameters: refused unbuilt
  rewrite_config([](nlohmann::json& c) {
    c["model"]["vocab"] = 1 << 20;
    c["model"]["d_model"] = 1 << 10;
  });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"config.json", "parameters"}));
  trained(2);
  rewrite_config([](nlohmann::json& c) { c["training"]["length"] = 17; });
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"length", "max_len is 16"}));
}

TEST_F(GptCheckpointTest, NamesALab10CheckpointAMissingFolderAndMalformedJson) {
  workbench::Checkpoint lab10;
  lab10.config = {7, 9, 6, 2, 1};
  lab10.params = minimodel::testing::random_model(lab10.config, 3);
  workbench::save_checkpoint(dir(), lab10);
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(dir()); }, {"lab 10"}));
  EXPECT_FALSE(workbench::is_gpt_checkpoint(dir()));
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(tmp_.path() / "absent"); }, {"absent"}));
  fs::create_directories(tmp_.path() / "bad");
  workbench::write_file_atomically(tmp_.path() / "bad" / "config.json", "{\"format\": ");
  EXPECT_TRUE(throws_naming([&] { load_gpt_checkpoint(tmp_.path() / "bad"); },
                            {"config.json", "not valid JSON"}));
}

// ---- Threads ----

// Three training steps of a model large enough that the reference splits its products, row loops,
// attention and loss over two workers (worker_count in gpt.cpp): V 512, d_model 128 in 4 heads,
// 2 layers, batches of 16 × 32 tokens; its final parameters on `threads` threads.
minimodel::GptParams<float> three_steps(int threads) {
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  minimodel::GptParams<float> params = minimodel::init_gpt({512, 32, 128, 4, 2}, 5);
  minimodel::GptParams<float> grads;
  minimodel::AdamW adamw(minimodel::parameter_tensors(std::as_const(params)));
  minimodel::GptTape<float> tape;
  std::mt19937_64 rng(6);
  std::vector<TokenId> stream(2000);
  for (TokenId& token : stream) token = TokenId(rng() % 512);
  for (int step = 0; step < 3; ++step)
    minimodel::train_step(params, grads, adamw, tape, minimodel::random_batch(stream, 16, 32, rng),
                          {{1e-2, 1e-3, 1, 3}, 1.0f});
  openblas_set_num_threads(saved);
  return params;
}

TEST(GptThreads, StepsOnTwoThreadsAreBitIdenticalToStepsOnOne) {
  const minimodel::GptParams<float> one = three_steps(1), two = three_steps(2);
  const auto a = minimodel::parameter_tensors(one), b = minimodel::parameter_tensors(two);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].data, b[i].data, a[i].size() * sizeof(float)), 0)
        << a[i].name << ": the bits differ";
}

}  // namespace
