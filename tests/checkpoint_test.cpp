// Tests of lab 10's checkpoints (workbench/checkpoint): a round trip is bit-identical, a save is
// all or nothing and keeps the checkpoint it replaces, a folder that is not a checkpoint is never
// touched, and every kind of broken checkpoint is reported naming its file.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <xtensor/xnpy.hpp>

#include "checkpoint/checkpoint.hpp"
#include "support/checks.hpp"
#include "support/random_model.hpp"
#include "support/temp_dir.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
using minimodel::ModelConfig;
using workbench::Checkpoint;
using workbench::load_checkpoint;
using workbench::save_checkpoint;

namespace {

// Small shapes, every size distinct so that a transposed tensor cannot pass: vocab 7, max_len 9,
// d_model 6, 2 heads, 2 layers.
ModelConfig small_config() { return {7, 9, 6, 2, 2}; }

Checkpoint small_checkpoint(std::uint64_t seed) {
  Checkpoint checkpoint;
  checkpoint.config = small_config();
  checkpoint.params = minimodel::testing::random_model(checkpoint.config, seed);
  checkpoint.training = {{"steps", 3000},
                         {"seed", seed},
                         {"final_loss", 0.012345678901234567},
                         {"losses", {2.5, 1.25, 0.0625}},
                         {"task", "repeated halves of 8 tokens"}};
  return checkpoint;
}

// The names in `dir`, to see that nothing else was created or left behind.
std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

::testing::AssertionResult bit_identical(const minimodel::ModelParams<float>& a,
                                         const minimodel::ModelParams<float>& b) {
  const auto ta = minimodel::tensors_of(a), tb = minimodel::tensors_of(b);
  if (ta.size() != tb.size())
    return ::testing::AssertionFailure() << ta.size() << " tensors vs " << tb.size();
  const std::vector<std::string> names = workbench::tensor_names(a.layers.size());
  for (std::size_t i = 0; i < ta.size(); ++i) {
    if (ta[i]->shape() != tb[i]->shape())
      return ::testing::AssertionFailure() << names[i] << ": " << minimodel::shape_of(*ta[i])
                                           << " vs " << minimodel::shape_of(*tb[i]);
    if (std::memcmp(ta[i]->data(), tb[i]->data(), ta[i]->size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << names[i] << ": the bits differ";
  }
  return ::testing::AssertionSuccess();
}

// Passes when `call` throws std::runtime_error whose message contains `part`.
::testing::AssertionResult throws_runtime_error(const std::function<void()>& call,
                                                const std::string& part) {
  try {
    call();
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find(part) == std::string::npos)
      return ::testing::AssertionFailure()
             << "std::runtime_error \"" << e.what() << "\" does not mention \"" << part << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "expected std::runtime_error, got: " << e.what();
  }
  return ::testing::AssertionFailure() << "expected std::runtime_error, nothing was thrown";
}

class CheckpointTest : public ::testing::Test {
 protected:
  fs::path dir() const { return root_ / "model"; }
  fs::path previous() const { return root_ / "model.previous"; }
  minimodel::testing::TempDir tmp_{"checkpoint_test"};
  const fs::path& root_ = tmp_.path();
};

TEST(TensorNames, FollowTensorsOfOrder) {
  EXPECT_EQ(workbench::tensor_names(2),
            (std::vector<std::string>{"embedding.npy", "positions.npy", "layer0_w_q.npy",
                                      "layer0_w_k.npy", "layer0_w_v.npy", "layer0_w_o.npy",
                                      "layer1_w_q.npy", "layer1_w_k.npy", "layer1_w_v.npy",
                                      "layer1_w_o.npy", "unembedding.npy"}));
}

TEST_F(CheckpointTest, RoundTripIsBitIdenticalWithConfigAndTraining) {
  Checkpoint saved = small_checkpoint(1);
  // Values whose text or float rounding would show: -0, a denormal, the largest float.
  saved.params.embedding(0, 0) = -0.0f;
  saved.params.embedding(0, 1) = 1e-45f;
  saved.params.unembedding(5, 6) = 3.4028235e38f;
  save_checkpoint(dir(), saved);

  const Checkpoint loaded = load_checkpoint(dir());
  EXPECT_EQ(loaded.config.vocab, 7u);
  EXPECT_EQ(loaded.config.max_len, 9u);
  EXPECT_EQ(loaded.config.d_model, 6u);
  EXPECT_EQ(loaded.config.n_heads, 2u);
  EXPECT_EQ(loaded.config.n_layers, 2u);
  EXPECT_TRUE(bit_identical(loaded.params, saved.params));
  EXPECT_EQ(loaded.training, saved.training);
  EXPECT_EQ(loaded.training.at("final_loss").get<double>(), 0.012345678901234567);

  // One folder, holding config.json and the tensors, and nothing else beside it.
  EXPECT_EQ(listing(root_), std::set<std::string>{"model"});
  std::set<std::string> files = {"config.json"};
  for (const std::string& name : workbench::tensor_names(2)) files.insert(name);
  EXPECT_EQ(listing(dir()), files);
  const nlohmann::json config = nlohmann::json::parse(workbench::read_file(dir() / "config.json"));
  EXPECT_EQ(config.at("format"), "minimodel checkpoint 1");
  EXPECT_EQ(config.at("config"),
            (nlohmann::json{
                {"vocab", 7}, {"max_len", 9}, {"d_model", 6}, {"n_heads", 2}, {"n_layers", 2}}));
  EXPECT_EQ(config.at("tensors"), nlohmann::json(workbench::tensor_names(2)));
  // The tensors are plain float32 .npy files that numpy (and xtensor) read.
  EXPECT_EQ(xt::load_npy<float>((dir() / "layer1_w_v.npy").string()),
            xt::xarray<float>(saved.params.layers[1].w_v));
}

TEST_F(CheckpointTest, AnEmptyTrainingRecordAndATrailingSlashRoundTrip) {
  Checkpoint saved = small_checkpoint(2);
  saved.training = nlohmann::json::object();
  save_checkpoint(dir() / "", saved);
  const Checkpoint loaded = load_checkpoint(dir());
  EXPECT_TRUE(bit_identical(loaded.params, saved.params));
  EXPECT_EQ(loaded.training, nlohmann::json::object());
  EXPECT_EQ(listing(root_), std::set<std::string>{"model"});
}

TEST_F(CheckpointTest, ASecondSaveKeepsTheFirstAsPreviousAndAThirdReplacesThat) {
  const Checkpoint first = small_checkpoint(1), second = small_checkpoint(2),
                   third = small_checkpoint(3);
  save_checkpoint(dir(), first);
  save_checkpoint(dir(), second);
  EXPECT_TRUE(bit_identical(load_checkpoint(dir()).params, second.params));
  EXPECT_TRUE(bit_identical(load_checkpoint(previous()).params, first.params));
  EXPECT_EQ(listing(root_), (std::set<std::string>{"model", "model.previous"}));

  save_checkpoint(dir(), third);
  EXPECT_TRUE(bit_identical(load_checkpoint(dir()).params, third.params));
  EXPECT_TRUE(bit_identical(load_checkpoint(previous()).params, second.params));
  EXPECT_EQ(listing(root_), (std::set<std::string>{"model", "model.previous"}))
      << "no temporary folder is left behind";
}

TEST_F(CheckpointTest, CreatesMissingParentFolders) {
  const Checkpoint saved = small_checkpoint(4);
  save_checkpoint(root_ / "runs" / "lab10" / "model", saved);
  EXPECT_TRUE(
      bit_identical(load_checkpoint(root_ / "runs" / "lab10" / "model").params, saved.params));
}

TEST_F(CheckpointTest, RefusesAFolderThatIsNotACheckpointAndLeavesItUntouched) {
  fs::create_directories(dir());
  workbench::write_file_atomically(dir() / "notes.txt", "the learner's notes\n");
  EXPECT_TRUE(throws_runtime_error([&] { save_checkpoint(dir(), small_checkpoint(1)); },
                                   dir().string() + ": it exists and is not a checkpoint"));
  EXPECT_EQ(listing(dir()), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(workbench::read_file(dir() / "notes.txt"), "the learner's notes\n");
  EXPECT_EQ(listing(root_), std::set<std::string>{"model"}) << "nothing created beside it";
}

TEST_F(CheckpointTest, RefusesAFileWhereTheFolderWouldGo) {
  workbench::write_file_atomically(dir(), "a file\n");
  EXPECT_TRUE(throws_runtime_error([&] { save_checkpoint(dir(), small_checkpoint(1)); },
                                   "is not a checkpoint"));
  EXPECT_EQ(workbench::read_file(dir()), "a file\n");
  EXPECT_EQ(listing(root_), std::set<std::string>{"model"});
}

TEST_F(CheckpointTest, RefusesToReplaceAPreviousThatIsNotACheckpoint) {
  const Checkpoint first = small_checkpoint(1);
  save_checkpoint(dir(), first);
  fs::create_directories(previous());
  workbench::write_file_atomically(previous() / "keep.txt", "keep me\n");
  EXPECT_TRUE(throws_runtime_error([&] { save_checkpoint(dir(), small_checkpoint(2)); },
                                   previous().string() + ": that exists and is not a checkpoint"));
  EXPECT_TRUE(bit_identical(load_checkpoint(dir()).params, first.params));
  EXPECT_EQ(listing(previous()), std::set<std::string>{"keep.txt"});
  EXPECT_EQ(listing(root_), (std::set<std::string>{"model", "model.previous"}));
}

TEST_F(CheckpointTest, ASaveRemovesWhatKilledSavesOfTheSameFolderLeftAndNothingElse) {
  save_checkpoint(dir(), small_checkpoint(1));
  // What saves killed midway leave (mkdtemp's six letters, and .older), each a whole copy ...
  const std::vector<std::string> leftovers = {"model.partial-a1B2c3", "model.partial-XyZ789",
                                              "model.partial-q0w9e8.older"};
  for (const std::string& name : leftovers)
    workbench::write_file_atomically(root_ / name / "config.json", "{}\n");
  // ... and names that only look alike: another folder's, the learner's own, or a link.
  const std::set<std::string> others = {"other.partial-a1B2c3",  "model.partial-notes",
                                        "model.partial-a1B2c",   "model.partial-a1B2c3.old",
                                        "model.partials-a1B2c3", "model.partial-link12"};
  for (const std::string& name : others)
    if (name != "model.partial-link12")
      workbench::write_file_atomically(root_ / name / "keep.txt", "keep me\n");
  fs::create_directory(root_ / "elsewhere");
  workbench::write_file_atomically(root_ / "elsewhere" / "keep.txt", "keep me\n");
  fs::create_directory_symlink(root_ / "elsewhere", root_ / "model.partial-link12");

  const Checkpoint second = small_checkpoint(2);
  save_checkpoint(dir(), second);
  EXPECT_TRUE(bit_identical(load_checkpoint(dir()).params, second.params));
  std::set<std::string> expected = others;
  expected.insert({"model", "model.previous", "elsewhere"});
  EXPECT_EQ(listing(root_), expected);
  for (const std::string& name : others)
    EXPECT_EQ(workbench::read_file(root_ / name / "keep.txt"), "keep me\n") << name;
}

TEST_F(CheckpointTest, RefusesALinkWhereTheFolderOrItsPreviousWouldGo) {
  save_checkpoint(root_ / "real", small_checkpoint(1));
  fs::create_directory_symlink(root_ / "real", dir());
  EXPECT_TRUE(throws_runtime_error([&] { save_checkpoint(dir(), small_checkpoint(2)); },
                                   dir().string() + " is a symbolic link"));
  fs::remove(dir());
  save_checkpoint(dir(), small_checkpoint(3));
  fs::create_directory_symlink(root_ / "real", previous());
  EXPECT_TRUE(throws_runtime_error([&] { save_checkpoint(dir(), small_checkpoint(4)); },
                                   previous().string() + " is a symbolic link"));
  EXPECT_TRUE(bit_identical(load_checkpoint(root_ / "real").params, small_checkpoint(1).params));
  EXPECT_TRUE(bit_identical(load_checkpoint(dir()).params, small_checkpoint(3).params));
  EXPECT_EQ(listing(root_), (std::set<std::string>{"model", "model.previous", "real"}));
}

TEST_F(CheckpointTest, RejectsParametersThatDisagreeWithTheConfigAndWritesNothing) {
  Checkpoint wrong = small_checkpoint(1);
  wrong.params.layers[1].w_k = minimodel::Matrix<float>({6, 5});
  EXPECT_TRUE(minimodel::testing::throws_invalid_argument([&] { save_checkpoint(dir(), wrong); },
                                                          {"layer1_w_k.npy", "(6, 5)", "(6, 6)"}));
  Checkpoint fewer = small_checkpoint(1);
  fewer.params.layers.pop_back();
  EXPECT_TRUE(minimodel::testing::throws_invalid_argument([&] { save_checkpoint(dir(), fewer); },
                                                          {"n_layers 2", "hold 1"}));
  Checkpoint heads = small_checkpoint(1);
  heads.config.n_heads = 4;
  EXPECT_TRUE(minimodel::testing::throws_invalid_argument([&] { save_checkpoint(dir(), heads); },
                                                          {"n_heads 4", "d_model 6"}));
  EXPECT_TRUE(listing(root_).empty());
}

TEST_F(CheckpointTest, AFolderThatCannotBeCreatedLeavesNothingBehind) {
  workbench::write_file_atomically(root_ / "runs", "a file, not a folder\n");
  EXPECT_TRUE(
      throws_runtime_error([&] { save_checkpoint(root_ / "runs" / "model", small_checkpoint(1)); },
                           (root_ / "runs" / "model").string()));
  EXPECT_EQ(listing(root_), std::set<std::string>{"runs"});
}

TEST_F(CheckpointTest, AMissingFolderOrConfigIsNamed) {
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); }, dir().string()));
  fs::create_directories(dir());
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); },
                                   (dir() / "config.json").string() + " is missing"));
}

TEST_F(CheckpointTest, AMissingTensorFileIsNamed) {
  save_checkpoint(dir(), small_checkpoint(1));
  fs::remove(dir() / "layer1_w_o.npy");
  EXPECT_TRUE(
      throws_runtime_error([&] { load_checkpoint(dir()); }, (dir() / "layer1_w_o.npy").string()));
}

TEST_F(CheckpointTest, ATensorOfTheWrongShapeIsNamedWithBothShapes) {
  save_checkpoint(dir(), small_checkpoint(1));
  // The unembedding transposed: (vocab, d_model) instead of (d_model, vocab).
  workbench::write_file_atomically(dir() / "unembedding.npy",
                                   xt::dump_npy(xt::xarray<float>(xt::zeros<float>({7, 6}))));
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); },
                                   (dir() / "unembedding.npy").string() + " is (7, 6) but " +
                                       (dir() / "config.json").string() +
                                       " makes it (d_model, vocab) = (6, 7)"));
  // A tensor of rank 3.
  workbench::write_file_atomically(dir() / "positions.npy",
                                   xt::dump_npy(xt::xarray<float>(xt::zeros<float>({1, 9, 6}))));
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); },
                                   (dir() / "positions.npy").string() + " has shape (1, 9, 6)"));
}

TEST_F(CheckpointTest, ATruncatedOrFloat64TensorIsNamed) {
  save_checkpoint(dir(), small_checkpoint(1));
  const fs::path file = dir() / "layer0_w_q.npy";
  fs::resize_file(file, fs::file_size(file) - 8);
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); }, file.string()));
  workbench::write_file_atomically(file,
                                   xt::dump_npy(xt::xarray<double>(xt::zeros<double>({6, 6}))));
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); }, file.string()));
}

TEST_F(CheckpointTest, MalformedConfigJsonIsNamed) {
  save_checkpoint(dir(), small_checkpoint(1));
  const fs::path config = dir() / "config.json";
  const nlohmann::json good = nlohmann::json::parse(workbench::read_file(config));
  const auto expect_named = [&](const std::string& text, const std::string& why) {
    SCOPED_TRACE(text);
    workbench::write_file_atomically(config, text);
    EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); }, config.string() + why));
  };
  expect_named("{\"format\": \"minimodel checkpoint 1\", ", " is not valid JSON");
  expect_named("[1, 2]", " does not say \"format\"");
  nlohmann::json other = good;
  other["format"] = "minimodel checkpoint 2";
  expect_named(other.dump(), " does not say \"format\": \"minimodel checkpoint 1\"");
  other = good;
  other["config"].erase("d_model");
  expect_named(other.dump(), ": \"config\" has no \"d_model\"");
  other = good;
  other["config"]["vocab"] = -7;
  expect_named(other.dump(), ": \"config\" has no \"vocab\" that is a whole number");
  other = good;
  other["config"]["n_heads"] = 4;
  expect_named(other.dump(), ": n_heads 4 does not divide d_model 6");
  other = good;
  other["config"]["n_layers"] = 3;  // the tensor list names 2 layers
  expect_named(other.dump(), ": \"tensors\" must list the files of 3 layers");
  other["config"]["n_layers"] = 1000000000000;  // refused without naming 4·10^12 files first
  expect_named(other.dump(), ": \"tensors\" must list the files of 1000000000000 layers");
  other = good;
  other["tensors"][3] = "layer0_w_v.npy";  // two tensors swapped
  other["tensors"][4] = "layer0_w_k.npy";
  expect_named(other.dump(), ": \"tensors\" must list");
  other = good;
  other["training"] = "3000 steps";
  expect_named(other.dump(), ": \"training\" is not an object");
}

TEST_F(CheckpointTest, AConfigNested500000DeepIsRefusedNotACrash) {
  save_checkpoint(dir(), small_checkpoint(1));
  const fs::path config = dir() / "config.json";
  nlohmann::json good = nlohmann::json::parse(workbench::read_file(config));
  // In the training record, which load_checkpoint copies: nlohmann's copy recurses per level.
  good["training"] = {{"deep", "here"}};
  std::string text = good.dump();
  text.replace(text.find("\"here\""), 6, std::string(500000, '[') + std::string(500000, ']'));
  workbench::write_file_atomically(config, text);
  EXPECT_TRUE(throws_runtime_error([&] { load_checkpoint(dir()); },
                                   config.string() + " nests arrays and objects more than 64"));
  // Brackets inside strings are not nesting.
  good["training"]["note"] = std::string(500000, '[');
  workbench::write_file_atomically(config, good.dump());
  EXPECT_NO_THROW(load_checkpoint(dir()));
}

}  // namespace
