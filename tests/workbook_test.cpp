// `workbook attend` end to end: the reference through the command matches the PyTorch fixtures,
// and every kind of bad input gets one line on stderr, exit status 2 and no output file. Then
// `workbook generate` on a checkpoint the test saves, and `workbook bench`.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xview.hpp>

#include "checkpoint/checkpoint.hpp"
#include "generate/greedy.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/non_regular_files.hpp"
#include "support/random_model.hpp"
#include "support/temp_dir.hpp"
#include "support/torch_parity.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;

namespace minimodel {
namespace {

using testing::all_close;

struct CommandResult {
  int status;
  std::string stderr_text;
};

// Runs `workbook <args>` through the shell, capturing stderr.
CommandResult workbook(const std::string& args, const fs::path& scratch) {
  const fs::path err = scratch / "stderr.txt";
  const std::string command =
      std::string(MINIMODEL_BIN_DIR) + "/workbook " + args + " 2> " + err.string();
  const int raw = std::system(command.c_str());
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

class WorkbookAttend : public ::testing::Test {
 protected:
  static fs::path fixture(const std::string& name) {
    return minimodel::testing::fixtures_dir() / name;
  }

  // As a flag's value in args(): leave the flag out.
  static constexpr const char* kLeftOut = "<left out>";

  // The attend arguments for fixture `name`; `replace` swaps a flag's value, e.g. {{"--x", path}}.
  std::string args(const std::string& name,
                   const std::map<std::string, std::string>& replace = {}) const {
    const fs::path f = fixture(name);
    std::map<std::string, std::string> flags = {
        {"--x", (f / "x.npy").string()},
        {"--wq", (f / "w_q.npy").string()},
        {"--wk", (f / "w_k.npy").string()},
        {"--wv", (f / "w_v.npy").string()},
        {"--wo", (f / "w_o.npy").string()},
        {"--out", out().string()},
        {"--attn-out", attn().string()},
        {"--heads", std::to_string(testing::Fixture(name).meta().at("n_heads").get<int>())}};
    for (const auto& [flag, value] : replace) flags[flag] = value;
    std::string line = "attend";
    for (const auto& [flag, value] : flags)
      if (value != kLeftOut) line += " " + flag + (value.empty() ? "" : " " + value);
    return line;
  }

  // Expects exit status 2, exactly one line on stderr, and no output written.
  void expect_rejected(const std::string& arguments, const std::string& mention) {
    const CommandResult run = workbook(arguments, scratch_);
    EXPECT_EQ(run.status, 2) << run.stderr_text;
    EXPECT_EQ(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n'), 1)
        << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(mention), std::string::npos) << run.stderr_text;
    EXPECT_FALSE(fs::exists(out()));
    EXPECT_FALSE(fs::exists(attn()));
  }

  fs::path out() const { return scratch_ / "y.npy"; }
  fs::path attn() const { return scratch_ / "attn.npy"; }
  const testing::TempDir temp_{"workbook_attend"};
  const fs::path scratch_ = temp_.path();
};

TEST_F(WorkbookAttend, MatchesTorchOnABatch) {
  const CommandResult run = workbook(args("mha_batched"), scratch_);
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  const testing::Fixture expected("mha_batched");
  EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), expected.array<3>("y"),
                        testing::kTorchTolerance));
  EXPECT_TRUE(all_close(xt::load_npy<float>(attn().string()), expected.array<4>("attn"),
                        testing::kTorchTolerance));
}

TEST_F(WorkbookAttend, MatchesTorchUnbatchedWithWeightsAsHTT) {
  // A 2-D X gives attention weights (H, T, T); the fixture keeps them as (1, H, T, T).
  const testing::Fixture expected("mha_unbatched");
  const CommandResult run = workbook(args("mha_unbatched"), scratch_);
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), expected.array<2>("y"),
                        testing::kTorchTolerance));
  const xt::xarray<float> a = xt::load_npy<float>(attn().string());
  EXPECT_EQ(a.dimension(), 3u);
  EXPECT_TRUE(all_close(a, xt::view(expected.array<4>("attn"), 0), testing::kTorchTolerance));
}

TEST_F(WorkbookAttend, MatchesTorchCausal) {
  const CommandResult run = workbook(args("mha_causal", {{"--causal", ""}}), scratch_);
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  const testing::Fixture expected("mha_causal");
  EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), expected.array<3>("y"),
                        testing::kTorchTolerance));
}

TEST_F(WorkbookAttend, WithoutAttnOutTheEfficientLayerMatchesTorchAndWritesNoWeights) {
  for (const auto& [name, threads] : {std::pair{"mha_batched", "1"},
                                      {"mha_unbatched", "2"},
                                      {"mha_causal", "1"},
                                      {"mha_causal", "2"}}) {
    SCOPED_TRACE(std::string(name) + ", threads " + threads);
    const testing::Fixture expected(name);
    std::map<std::string, std::string> flags = {{"--attn-out", kLeftOut}, {"--threads", threads}};
    if (expected.meta().at("causal").get<bool>()) flags["--causal"] = "";
    const CommandResult run = workbook(args(name, flags), scratch_);
    ASSERT_EQ(run.status, 0) << run.stderr_text;
    const xt::xarray<float> y = xt::load_npy<float>(out().string());
    if (expected.rank("y") == 2)
      EXPECT_TRUE(all_close(y, expected.array<2>("y"), testing::kTorchTolerance));
    else
      EXPECT_TRUE(all_close(y, expected.array<3>("y"), testing::kTorchTolerance));
    EXPECT_FALSE(fs::exists(attn()));
    fs::remove(out());
  }
}

TEST_F(WorkbookAttend, WithoutAttnOutLab06OptionsGiveTheSameYAsLab06Forward) {
  // mha_batched: X (2, 5, 16), 4 heads. Without --attn-out these run lab 07's efficient_forward
  // on lab 06's layer; with it, lab 06's forward. Their tolerance is lab 06's, 1e-5.
  const fs::path bias = scratch_ / "bias.npy", padding = scratch_ / "padding.npy",
                 kv = scratch_ / "kv.npy";
  xt::dump_npy(bias.string(), xt::xarray<float>(xt::linspace<float>(-1.0f, 1.0f, 16)));
  xt::dump_npy(padding.string(), xt::xarray<bool>{{false, false, false, true, true},
                                                  {false, false, false, false, false}});
  const xt::xarray<float> x = testing::Fixture("mha_batched").array<3>("x");
  xt::dump_npy(kv.string(), xt::xarray<float>(xt::flip(x, 1) * 0.5f));
  const std::map<std::string, std::string> biases = {{"--bq", bias.string()},
                                                     {"--bk", bias.string()},
                                                     {"--bv", bias.string()},
                                                     {"--bo", bias.string()}};
  auto with = [&](std::map<std::string, std::string> flags,
                  const std::map<std::string, std::string>& more) {
    flags.insert(more.begin(), more.end());
    return flags;
  };
  for (const auto& [name, flags] :
       {std::pair{"biases, key padding, causal",
                  with(biases, {{"--key-padding-mask", padding.string()}, {"--causal", ""}})},
        {"RoPE at default positions, causal", {{"--rope-theta", "10000"}, {"--causal", ""}}},
        {"cross-attention over --kv with biases, pre-LN block",
         with(biases, {{"--kv", kv.string()}, {"--block", "pre-ln"}})}}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(workbook(args("mha_batched", flags), scratch_).status, 0);
    const xt::xarray<float> lab06 = xt::load_npy<float>(out().string());
    fs::remove(out());
    fs::remove(attn());
    const CommandResult run =
        workbook(args("mha_batched", with({{"--attn-out", kLeftOut}}, flags)), scratch_);
    ASSERT_EQ(run.status, 0) << run.stderr_text;
    EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), lab06, 1e-5));
    EXPECT_FALSE(fs::exists(attn()));
    fs::remove(out());
  }
}

TEST_F(WorkbookAttend, KvEqualToXGivesSelfAttention) {
  // --kv takes lab 06's path; with keys and values from X itself it must equal lab 01's path.
  ASSERT_EQ(workbook(args("mha_causal"), scratch_).status, 0);
  const xt::xarray<float> self = xt::load_npy<float>(out().string());
  fs::remove(out());
  const CommandResult run = workbook(
      args("mha_causal", {{"--kv", (fixture("mha_causal") / "x.npy").string()}}), scratch_);
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), self, testing::kTorchTolerance));
}

TEST_F(WorkbookAttend, RejectsCausalWithAnotherNumberOfKeys) {
  const fs::path kv = scratch_ / "kv.npy";
  xt::dump_npy(kv.string(), xt::xarray<float>(xt::zeros<float>({2, 7, 16})));
  expect_rejected(args("mha_batched", {{"--kv", kv.string()}, {"--causal", ""}}), "S = 7");
}

TEST_F(WorkbookAttend, RejectsKvWithNoKeysNamingItsShape) {
  // S = 0 would leave each query nothing to attend to: an empty softmax row.
  const fs::path kv = scratch_ / "kv.npy";
  workbench::write_file_atomically(kv, xt::dump_npy(xt::xarray<float>::from_shape({2, 0, 16})));
  for (const std::string& weights : {attn().string(), std::string(kLeftOut)}) {
    SCOPED_TRACE("--attn-out " + weights);
    expect_rejected(args("mha_batched", {{"--kv", kv.string()}, {"--attn-out", weights}}),
                    "--kv " + kv.string() + " is (2, 0, 16); attention needs at least one key");
  }
}

TEST_F(WorkbookAttend, RejectsFiniteInputsWhoseScoresOverflowInsteadOfWritingNaN) {
  // |x| about 1e30: each query and key entry about 1e30, their products 1e60, past float32.
  const xt::xarray<float> x = testing::Fixture("mha_batched").array<3>("x") * 1e30f;
  const fs::path path = scratch_ / "x_huge.npy";
  workbench::write_file_atomically(path, xt::dump_npy(x));
  for (const std::string& weights : {attn().string(), std::string(kLeftOut)}) {
    SCOPED_TRACE("--attn-out " + weights);
    expect_rejected(args("mha_batched", {{"--x", path.string()}, {"--attn-out", weights}}),
                    "although every input is finite: the scores overflow float32");
  }
}

TEST_F(WorkbookAttend, RejectsRopeWithKv) {
  expect_rejected(args("mha_batched", {{"--kv", (fixture("mha_batched") / "x.npy").string()},
                                       {"--rope-theta", "10000"}}),
                  "cannot be combined with --kv");
}

TEST_F(WorkbookAttend, RejectsPositionsWithoutRope) {
  expect_rejected(
      args("mha_batched", {{"--positions", (fixture("mha_batched") / "x.npy").string()}}),
      "--positions needs --rope-theta");
}

TEST_F(WorkbookAttend, RejectsAPaddingMaskThatIsNotBool) {
  expect_rejected(
      args("mha_batched", {{"--key-padding-mask", (fixture("mha_batched") / "x.npy").string()}}),
      "bool or uint8");
}

TEST_F(WorkbookAttend, RejectsAMissingFile) {
  expect_rejected(args("mha_batched", {{"--x", (scratch_ / "nope.npy").string()}}), "nope.npy");
}

TEST_F(WorkbookAttend, RejectsATruncatedFile) {
  const fs::path cut = scratch_ / "cut.npy";
  fs::copy_file(fixture("mha_batched") / "x.npy", cut);
  fs::resize_file(cut, fs::file_size(cut) / 2 + 40);
  expect_rejected(args("mha_batched", {{"--x", cut.string()}}), "truncated");
}

TEST_F(WorkbookAttend, RejectsFloat64) {
  const fs::path wide = scratch_ / "x64.npy";
  xt::dump_npy(wide.string(), xt::xarray<double>(testing::Fixture("mha_batched").array<3>("x")));
  expect_rejected(args("mha_batched", {{"--x", wide.string()}}), "float32");
}

TEST_F(WorkbookAttend, RejectsAWeightOfTheWrongShape) {
  const fs::path w = scratch_ / "w.npy";
  xt::dump_npy(w.string(), xt::xarray<float>(xt::zeros<float>({16, 8})));
  expect_rejected(args("mha_batched", {{"--wk", w.string()}}), "(16, 8)");
}

TEST_F(WorkbookAttend, RejectsZeroThreads) {
  expect_rejected(args("mha_batched", {{"--threads", "0"}}), "--threads");
}

TEST_F(WorkbookAttend, RejectsHeadsThatDoNotDivideD) {
  expect_rejected(args("mha_batched", {{"--heads", "3"}}), "does not divide d = 16");
}

TEST_F(WorkbookAttend, RejectsXOfRankFour) {
  const fs::path x = scratch_ / "x4.npy";
  xt::dump_npy(x.string(), xt::xarray<float>(xt::zeros<float>({1, 2, 5, 16})));
  expect_rejected(args("mha_batched", {{"--x", x.string()}}), "(1, 2, 5, 16)");
}

TEST_F(WorkbookAttend, RefusesAnOutputThatIsAnInputAndLeavesTheInputAlone) {
  const fs::path x = scratch_ / "x.npy";
  fs::copy_file(fixture("mha_batched") / "x.npy", x);
  const std::string before = workbench::read_file(x);
  for (const char* output : {"--out", "--attn-out"}) {
    SCOPED_TRACE(output);
    const CommandResult run =
        workbook(args("mha_batched", {{"--x", x.string()}, {output, x.string()}}), scratch_);
    EXPECT_EQ(run.status, 2) << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("is also --x"), std::string::npos) << run.stderr_text;
    EXPECT_EQ(workbench::read_file(x), before);
  }
  expect_rejected(args("mha_batched", {{"--attn-out", out().string()}}), "is also --out");
}

TEST_F(WorkbookAttend, RejectsAnOutputInAFolderThatDoesNotExistAndCreatesNone) {
  for (const char* output : {"--out", "--attn-out"}) {
    SCOPED_TRACE(output);
    const fs::path missing = scratch_ / "no_such_folder";
    expect_rejected(args("mha_batched", {{output, (missing / "y.npy").string()}}),
                    "the folder " + missing.string() + " does not exist");
    EXPECT_FALSE(fs::exists(missing));
  }
}

TEST_F(WorkbookAttend, AnOutputThatCannotBeWrittenLeavesEveryFileAsItWas) {
  // --out already exists; --attn-out is a folder, so it cannot be written: nothing may change,
  // and in particular --out must neither be replaced nor removed.
  workbench::write_file_atomically(out(), "the learner's own file\n");
  fs::create_directories(attn());
  const CommandResult run = workbook(args("mha_batched"), scratch_);
  EXPECT_EQ(run.status, 2) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find(attn().string()), std::string::npos) << run.stderr_text;
  EXPECT_EQ(workbench::read_file(out()), "the learner's own file\n");
  EXPECT_TRUE(fs::is_directory(attn()));
  std::set<std::string> left;
  for (const auto& entry : fs::directory_iterator(scratch_)) left.insert(entry.path().filename());
  EXPECT_EQ(left, (std::set<std::string>{"attn.npy", "stderr.txt", "y.npy"}))
      << "no temporary file is left behind";
}

TEST_F(WorkbookAttend, RefusesAnOutputThatIsADeviceAFifoOrALinkAndLeavesItAlone) {
  // As root, --out /dev/null once replaced the system's /dev/null with a regular file. A device
  // of the same kind in the scratch folder stands in for it (root only: mknod).
  const fs::path target = scratch_ / "target.npy";
  workbench::write_file_atomically(target, "the learner's own file\n");
  const auto refused = minimodel::testing::make_non_regular_files(scratch_, target, false);
  for (const char* output : {"--out", "--attn-out"})
    for (const auto& [path, words] : refused) {
      SCOPED_TRACE(std::string(output) + " " + path.string());
      const fs::file_type before = fs::symlink_status(path).type();
      expect_rejected(args("mha_batched", {{output, path.string()}}), path.string() + ": " + words);
      EXPECT_EQ(fs::symlink_status(path).type(), before);
    }
  EXPECT_EQ(workbench::read_file(target), "the learner's own file\n");
  EXPECT_FALSE(fs::exists(scratch_ / "nowhere"));
}

TEST_F(WorkbookAttend, RejectsAnEmptySequenceWithRopeInsteadOfCrashing) {
  const fs::path empty = scratch_ / "empty.npy";
  workbench::write_file_atomically(empty, xt::dump_npy(xt::xarray<float>::from_shape({0, 8})));
  expect_rejected(args("mha_batched", {{"--x", empty.string()}, {"--rope-theta", "10000"}}),
                  "at least one sequence, one token and one feature");
}

TEST_F(WorkbookAttend, RejectsAPositionTooLargeForAnyRopeTable) {
  const testing::Fixture f("mha_batched");
  const std::size_t T = f.array<3>("x").shape(1);
  xt::xarray<std::int64_t> positions = xt::zeros<std::int64_t>({T});
  positions(T - 1) = std::int64_t{1} << 62;
  const fs::path path = scratch_ / "positions.npy";
  workbench::write_file_atomically(path, xt::dump_npy(positions));
  expect_rejected(args("mha_batched", {{"--rope-theta", "10000"}, {"--positions", path.string()}}),
                  "too large for a RoPE table");
}

TEST_F(WorkbookAttend, RejectsAPositionWhoseRopeTablesWouldPass64MiB) {
  // d_head = 4: tables of (2^24 + 1, 2) cos and sin take 256 MiB; positions up to 2^22 - 1 fit.
  const testing::Fixture f("mha_batched");
  const std::size_t T = f.array<3>("x").shape(1);
  xt::xarray<std::int64_t> positions = xt::arange<std::int64_t>(static_cast<std::int64_t>(T));
  positions(T - 1) = std::int64_t{1} << 24;
  const fs::path path = scratch_ / "positions.npy";
  workbench::write_file_atomically(path, xt::dump_npy(positions));
  expect_rejected(args("mha_batched", {{"--rope-theta", "10000"}, {"--positions", path.string()}}),
                  "holds position 16777216, too large for a RoPE table: its cos and sin tables of "
                  "(16777217, 2) would take 256 MiB, over the limit of 64 MiB; positions up to "
                  "4194303 fit");
}

TEST_F(WorkbookAttend, RejectsAFifoAsAnInputInsteadOfWaitingForAWriter) {
  const fs::path fifo = scratch_ / "x.npy";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_rejected(args("mha_batched", {{"--x", fifo.string()}}),
                  "--x " + fifo.string() + " names a FIFO, not a regular .npy file");
  expect_rejected(args("mha_batched", {{"--wo", scratch_.string()}}),
                  "--wo " + scratch_.string() + " names a directory, not a regular .npy file");
}

TEST_F(WorkbookAttend, RefusesAttnOutWhoseWeightsCannotFitSayingHowManyGiBTheyNeed) {
  // T = 2^20 tokens of width 1: X is 4 MiB, its (1, 1, T, T) weights 4096 GiB. The estimate
  // refuses them before anything is allocated.
  const std::size_t T = std::size_t{1} << 20;
  const fs::path x = scratch_ / "x.npy", w = scratch_ / "w.npy";
  workbench::write_file_atomically(x, xt::dump_npy(xt::xarray<float>(xt::ones<float>({T, 1ul}))));
  workbench::write_file_atomically(w,
                                   xt::dump_npy(xt::xarray<float>(xt::ones<float>({1, 1}) * 0.5f)));
  const std::string weights = " --wq " + w.string() + " --wk " + w.string() + " --wv " +
                              w.string() + " --wo " + w.string() + " --heads 1";
  expect_rejected("attend --x " + x.string() + weights + " --out " + out().string() +
                      " --attn-out " + attn().string(),
                  "--attn-out asks for the attention weights (B, H, T, S) = (1, 1, 1048576, "
                  "1048576), 4.1e+03 GiB");
  expect_rejected("attend --x " + x.string() + weights + " --out " + out().string() +
                      " --attn-out " + attn().string(),
                  "leave out --attn-out (lab 07's efficient path never forms them");
}

TEST_F(WorkbookAttend, ARopeBaseTheWorkbookAcceptsTheEngineAcceptsAsGiven) {
  // 1e-50 is 0 in float32: refused as given, not as the "0" the engine would receive.
  expect_rejected(args("mha_batched", {{"--rope-theta", "1e-50"}}),
                  "must be a positive number from 1.2e-38 to 3.4e38 (float32), got 1e-50");
  // The ends of float32's normal range pass the workbook's check and the engine's.
  for (const char* theta : {"3.4028235e38", "1.2e-38"}) {
    SCOPED_TRACE(theta);
    const CommandResult run = workbook(args("mha_batched", {{"--rope-theta", theta}}), scratch_);
    EXPECT_EQ(run.status, 0) << run.stderr_text;
    fs::remove(out());
    fs::remove(attn());
  }
}

TEST_F(WorkbookAttend, RejectsANonFiniteInputNamingTheFileAndTheIndex) {
  xt::xarray<float> w = testing::Fixture("mha_batched").array<2>("w_k");
  w(1, 2) = std::numeric_limits<float>::quiet_NaN();
  const fs::path path = scratch_ / "w_k_nan.npy";
  workbench::write_file_atomically(path, xt::dump_npy(w));
  expect_rejected(args("mha_batched", {{"--wk", path.string()}}),
                  "--wk " + path.string() + " holds nan at (1, 2)");
}

TEST_F(WorkbookAttend, RejectsARopeBaseThatIsNotAPositiveFloat32) {
  for (const char* theta : {"nan", "1e39", "-3", "0", "ten"}) {
    SCOPED_TRACE(theta);
    expect_rejected(args("mha_batched", {{"--rope-theta", theta}}), "must be a positive number");
  }
}

TEST_F(WorkbookAttend, KvHeadsRunsLab08sLayerAndMatchesTheTorchGqaFixtures) {
  for (const std::string name : {"gqa_rope", "mqa_rope", "gqa_no_rope"}) {
    SCOPED_TRACE(name);
    const testing::Fixture expected(name);
    std::map<std::string, std::string> flags = {
        {"--kv-heads", std::to_string(expected.meta().at("n_kv_heads").get<int>())},
        {"--causal", ""},
        {"--attn-out", kLeftOut}};
    if (!expected.meta().at("theta").is_null())  // positions (B, T): a row per sequence
      flags.insert(
          {{"--rope-theta", "10000"}, {"--positions", (fixture(name) / "positions.npy").string()}});
    const CommandResult run = workbook(args(name, flags), scratch_);
    ASSERT_EQ(run.status, 0) << run.stderr_text;
    EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), expected.array<3>("y"),
                          testing::kTorchTolerance));
    fs::remove(out());
  }
}

TEST_F(WorkbookAttend, PositionsOfShapeBTGiveEachSequenceItsOwnRow) {
  // rope_offset_positions holds the inputs of rope_causal at positions 3..8. Sequence 0 at 0..5
  // and sequence 1 at 3..8, in one (B, T) file, through lab 06's path (with weights) and lab
  // 08's (--kv-heads = --heads): each sequence gets its fixture's y. (RoPE scores depend on
  // offsets only, so both fixtures share y; the rotation itself is lab 08's tests' concern.)
  const testing::Fixture expected("rope_causal");
  xt::xarray<std::int64_t> positions = {{0, 1, 2, 3, 4, 5}, {3, 4, 5, 6, 7, 8}};
  const fs::path path = scratch_ / "positions.npy";
  workbench::write_file_atomically(path, xt::dump_npy(positions));
  for (const std::string& kv_heads : {std::string(kLeftOut), std::string("2")}) {
    SCOPED_TRACE("--kv-heads " + kv_heads);
    const CommandResult run = workbook(
        args("rope_causal", {{"--rope-theta", "10000"},
                             {"--positions", path.string()},
                             {"--causal", ""},
                             {"--kv-heads", kv_heads},
                             {"--attn-out", kv_heads == kLeftOut ? attn().string() : kLeftOut}}),
        scratch_);
    ASSERT_EQ(run.status, 0) << run.stderr_text;
    EXPECT_TRUE(all_close(xt::load_npy<float>(out().string()), expected.array<3>("y"),
                          testing::kTorchTolerance));
    fs::remove(out());
  }
}

TEST_F(WorkbookAttend, RejectsKvHeadsThatCannotRunAndPositionsOfTheWrongShape) {
  const std::map<std::string, std::string> gqa = {
      {"--kv-heads", "2"}, {"--causal", ""}, {"--attn-out", kLeftOut}};
  const auto with = [&](std::map<std::string, std::string> more) {
    more.insert(gqa.begin(), gqa.end());  // `more` wins
    return args("gqa_no_rope", more);
  };
  expect_rejected(with({{"--kv-heads", "3"}}), "--kv-heads 3 does not divide --heads 8");
  expect_rejected(with({{"--causal", kLeftOut}}), "which is causal: add --causal");
  expect_rejected(with({{"--attn-out", attn().string()}}), "leave out --attn-out");
  expect_rejected(with({{"--bq", (fixture("cross_padding") / "b_q.npy").string()}}),
                  "has no biases, --kv or --key-padding-mask");
  // Square key weights with 2 key/value heads of width 4: W_K must be (32, 8).
  expect_rejected(with({{"--wk", (fixture("gqa_no_rope") / "w_q.npy").string()}}),
                  "is (32, 32) but X is (1, 7, 32) and --kv-heads 2 of --heads 8 give W_K, W_V of "
                  "(d, N * d / H), so it must be (32, 8)");
  // Positions for 3 sequences, X has 1.
  const fs::path path = scratch_ / "positions.npy";
  workbench::write_file_atomically(
      path, xt::dump_npy(xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({3, 7}))));
  expect_rejected(with({{"--rope-theta", "10000"}, {"--positions", path.string()}}),
                  "is (3, 7) but X is (1, 7, 32), so it must be (T) = (7) or (B, T) = (1, 7)");
}

TEST_F(WorkbookAttend, RejectsAnUnknownImplementation) {
  expect_rejected(args("mha_batched", {{"--impl", "mine"}}), "mine");
}

// `workbook generate`: the reference engine on a checkpoint saved here, printing the prompt and
// greedy_generate's tokens; bad input gets one line on stderr and exit status 2.
class WorkbookGenerate : public ::testing::Test {
 protected:
  void SetUp() override {
    checkpoint_.config = {11, 12, 8, 2, 2};  // vocab, max_len, d_model, n_heads, n_layers
    checkpoint_.params = testing::random_model(checkpoint_.config, 5);
    checkpoint_.training = {{"steps", 0}};
    workbench::save_checkpoint(dir(), checkpoint_);
  }

  struct Output {
    int status;
    std::string stdout_text, stderr_text;
  };
  // Runs `workbook generate <args>`, capturing stdout and stderr.
  Output generate(const std::string& args) const {
    const fs::path out = scratch_ / "stdout.txt";
    const CommandResult run = workbook("generate " + args + " > " + out.string(), scratch_);
    return {run.status, workbench::read_file(out), run.stderr_text};
  }
  // Expects exit status 2, nothing on stdout and exactly one line on stderr that mentions
  // `mention`.
  void expect_rejected(const std::string& args, const std::string& mention) const {
    const Output run = generate(args);
    EXPECT_EQ(run.status, 2) << run.stderr_text;
    EXPECT_EQ(run.stdout_text, "");
    EXPECT_EQ(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n'), 1)
        << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(mention), std::string::npos) << run.stderr_text;
  }

  fs::path dir() const { return scratch_ / "model"; }
  std::string with_checkpoint(const std::string& args) const {
    return "--checkpoint " + dir().string() + " " + args;
  }
  // "prompt:  3 7 1\noutput:  …\n" for these tokens.
  static std::string block(const std::vector<std::size_t>& prompt,
                           const std::vector<std::size_t>& output) {
    std::string text = "prompt: ";
    for (const std::size_t token : prompt) text += " " + std::to_string(token);
    text += "\noutput: ";
    for (const std::size_t token : output) text += " " + std::to_string(token);
    return text + "\n";
  }

  workbench::Checkpoint checkpoint_;
  const testing::TempDir temp_{"workbook_generate"};
  const fs::path scratch_ = temp_.path();
};

// `workbook explore --checkpoint` without --out: the page goes beside the checkpoint folder, into
// the experiment folder of the run that saved it, not the folder of the code that reads it.
using WorkbookExplore = WorkbookGenerate;

TEST_F(WorkbookExplore, WithoutOutWritesThePageBesideTheCheckpointFolder) {
  const CommandResult run =
      workbook("explore " + with_checkpoint("--tokens \"1 2 3 1 2 3\""), scratch_);
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  EXPECT_TRUE(fs::is_regular_file(scratch_ / "explore-checkpoint.html"));
  EXPECT_TRUE(fs::is_regular_file(scratch_ / "explore-checkpoint.json"));
}

TEST_F(WorkbookGenerate, ContinuesThePromptUpToMaxLenWithGreedyGeneratesTokens) {
  const std::vector<std::size_t> prompt = {3, 7, 1};
  const std::vector<std::size_t> expected =
      workbench::greedy_generate(checkpoint_.config, checkpoint_.params, prompt, 12 - 3);
  // Ids separated by spaces, commas or both, in one argument or several.
  for (const char* ids : {"\"3 7 1\"", "3,7,1", "\"3, 7 ,1\"", "3 7 1"}) {
    SCOPED_TRACE(ids);
    const Output run = generate(with_checkpoint(std::string("--prompt ") + ids));
    ASSERT_EQ(run.status, 0) << run.stderr_text;
    EXPECT_EQ(run.stdout_text, block(prompt, expected));
    EXPECT_EQ(run.stderr_text, "");
  }
}

TEST_F(WorkbookGenerate, TokensSetsHowManyAreGenerated) {
  const std::vector<std::size_t> expected =
      workbench::greedy_generate(checkpoint_.config, checkpoint_.params, {4}, 5);
  const Output run = generate(with_checkpoint("--prompt 4 --tokens 5"));
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  EXPECT_EQ(run.stdout_text, block({4}, expected));
}

TEST_F(WorkbookGenerate, RejectsAMissingCheckpointNamingIt) {
  const fs::path missing = scratch_ / "no_such_model";
  expect_rejected("--checkpoint " + missing.string() + " --prompt 1", missing.string());
}

TEST_F(WorkbookGenerate, RejectsAFolderThatIsNotACheckpoint) {
  fs::create_directories(scratch_ / "empty");
  expect_rejected("--checkpoint " + (scratch_ / "empty").string() + " --prompt 1",
                  (scratch_ / "empty" / "config.json").string() + " is missing");
}

TEST_F(WorkbookGenerate, RejectsACheckpointWithABrokenTensorNamingTheFile) {
  workbench::write_file_atomically(dir() / "layer1_w_v.npy", "not a .npy file");
  expect_rejected(with_checkpoint("--prompt 1"), (dir() / "layer1_w_v.npy").string());
}

TEST_F(WorkbookGenerate, RejectsACheckpointHoldingANaNNamingTheTensorAndTheIndex) {
  checkpoint_.params.layers[0].w_k(2, 5) = std::numeric_limits<float>::quiet_NaN();
  workbench::save_checkpoint(dir(), checkpoint_);
  expect_rejected(with_checkpoint("--prompt 1"), "layer0_w_k.npy holds nan at (2, 5)");
}

TEST_F(WorkbookGenerate, RejectsACheckpointWhoseFiniteWeightsOverflowInsteadOfPrintingZeros) {
  // Weights of 1e20: the LayerNorm's squares pass float32's 3.4e38, its rows become zeros, and
  // so do the logits: token 0 at every step.
  for (xt::xtensor<float, 2>* tensor : tensors_of(checkpoint_.params)) *tensor *= 1e20f;
  workbench::save_checkpoint(dir(), checkpoint_);
  expect_rejected(with_checkpoint("--prompt \"3 7\""),
                  "the model's logits at step 1 cannot be computed: layer 0's LayerNorm input "
                  "overflows float32");
  expect_rejected(
      with_checkpoint("--prompt \"3 7\""),
      "its weights are finite but overflow float32 on the way (the largest |weight| is");
}

TEST_F(WorkbookGenerate, RejectsATensorFileThatIsAFifoInsteadOfWaitingForAWriter) {
  fs::remove(dir() / "layer1_w_v.npy");
  ASSERT_EQ(mkfifo((dir() / "layer1_w_v.npy").c_str(), 0600), 0);
  expect_rejected(with_checkpoint("--prompt 1"),
                  (dir() / "layer1_w_v.npy").string() + " is a FIFO, not a regular .npy file");
}

TEST_F(WorkbookGenerate, RejectsATokenOutsideTheVocabulary) {
  expect_rejected(with_checkpoint("--prompt \"3 11\""),
                  "--prompt holds token 11 but the checkpoint's vocabulary is 0 to 10");
}

TEST_F(WorkbookGenerate, RejectsTextThatIsNotTokenIds) {
  for (const char* prompt : {"\"3 x\"", "\"3 -3\"", "\"3.5\"", "\" , \""}) {
    SCOPED_TRACE(prompt);
    expect_rejected(with_checkpoint(std::string("--prompt ") + prompt), "--prompt");
  }
}

TEST_F(WorkbookGenerate, RejectsAPromptThatLeavesNoRoomAndTooManyTokens) {
  expect_rejected(with_checkpoint("--prompt \"0 1 2 3 4 5 6 7 8 9 10 0\""),
                  "--prompt has 12 tokens but the checkpoint's max_len is 12: give at most 11");
  expect_rejected(with_checkpoint("--prompt \"1 2 3\" --tokens 10"),
                  "--tokens 10 after a prompt of 3 tokens would pass the checkpoint's max_len 12: "
                  "at most 9");
}

TEST_F(WorkbookGenerate, RejectsMissingOptionsAndAnUnknownImplementation) {
  expect_rejected("--prompt 1", "--checkpoint");
  expect_rejected(with_checkpoint(""), "--prompt");
  expect_rejected(with_checkpoint("--prompt 1 --impl mine"), "mine");
}

// `workbook bench` reports what it measured consistently; no time is asserted, only units and
// the memory every lab 01 call must allocate.
TEST(WorkbookBench, QuickJsonReportsEveryShapeWithConsistentUnitsAndTheStoredWeights) {
  const testing::TempDir scratch("workbook_bench_quick");
  const fs::path out = scratch / "bench.json";
  const CommandResult run = workbook(
      "bench --quick --impl reference --threads 1 --repetitions 2 --json > " + out.string(),
      scratch.path());
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  const nlohmann::json report = nlohmann::json::parse(workbench::read_file(out));

  EXPECT_EQ(report.at("machine").at("threads"), 1);
  std::set<std::tuple<std::string, std::size_t, bool>> runs;
  for (const auto& row : report.at("results")) {
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row.at("implementation"), "reference");
    ASSERT_FALSE(row.contains("error"));
    const double T = row.at("T"), d = row.at("d_model"), H = row.at("n_heads");
    const double ms = row.at("median_ms");
    EXPECT_GT(ms, 0.0);
    // The CPU time of the engine's process per call, beside the wall time (issue 28).
    EXPECT_GT(row.at("median_cpu_ms").get<double>(), 0.0);
    // GF/s = (8·T·d² + 4·T²·d) / time: the same numbers, in the units the table names.
    EXPECT_NEAR(row.at("gflops_per_s").get<double>(), (8 * T * d * d + 4 * T * T * d) / (ms * 1e6),
                1e-9 * (1 + 8 * T * d * d));
    // Lab 01 keeps the weights (1, H, T, T) of every call: at least that much is allocated.
    if (row.at("layer") == "lab01") {
      EXPECT_GE(row.at("peak_extra_bytes").get<double>(), 4 * H * T * T);
    }
    runs.insert({row.at("layer"), std::size_t(T), row.at("causal").get<bool>()});
  }
  EXPECT_EQ(runs.size(), 12u)
      << "labs 01 and 07 and lab 07's tuned twin, two shapes each, causal and not";
  // OpenBLAS's SGEMM on (128, 128) in the same run: 2·n³ FLOPs over its time.
  const nlohmann::json& sgemm = report.at("machine").at("sgemm").at("reference");
  EXPECT_EQ(sgemm.at("n"), 128);
  EXPECT_NEAR(sgemm.at("gflops_per_s").get<double>(),
              2.0 * 128 * 128 * 128 / (sgemm.at("median_ms").get<double>() * 1e6), 1e-6);
}

// Google Benchmark computes no median of one repetition: the table shows the one run of each
// layer and shape instead, and says so, and each row shows on stderr as it finishes.
TEST(WorkbookBench, OneRepetitionReportsTheRunOfEveryShape) {
  const testing::TempDir scratch("workbook_bench_one_run");
  const fs::path out = scratch / "bench.txt";
  const CommandResult run =
      workbook("bench --quick --impl reference --threads 1 --repetitions 1 > " + out.string(),
               scratch.path());
  const std::string table = workbench::read_file(out);
  ASSERT_EQ(run.status, 0) << run.stderr_text << table;
  EXPECT_NE(table.find(" cores, 1 run ("), std::string::npos) << table;
  std::istringstream lines(table);
  std::size_t rows = 0, tuned = 0;
  for (std::string line; std::getline(lines, line);) {
    rows += line.rfind("lab01 reference", 0) == 0 || line.rfind("lab07 reference", 0) == 0;
    tuned += line.rfind("lab07_tuned reference", 0) == 0;
  }
  EXPECT_EQ(rows, 8u) << "labs 01 and 07, two shapes each, causal and not\n" << table;
  EXPECT_EQ(tuned, 4u) << "lab 07's tuned twin, the same shapes\n" << table;
  EXPECT_NE(run.stderr_text.find("bench-reference: lab07/T:64/d_model:64/H:4/causal"),
            std::string::npos)
      << run.stderr_text;
}

TEST(WorkbookBench, RejectsZeroThreads) {
  const testing::TempDir scratch("workbook_bench_zero");
  const CommandResult run = workbook("bench --threads 0", scratch.path());
  EXPECT_EQ(run.status, 2) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("--threads"), std::string::npos) << run.stderr_text;
}

}  // namespace
}  // namespace minimodel
