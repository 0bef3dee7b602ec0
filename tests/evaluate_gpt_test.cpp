// `workbook evaluate` (workbench/generate/evaluate_gpt_main.cpp and head_ablation.hpp): the loss it
// prints is lab 13's evaluate on the held-out books in the checkpoint's own tokens; --ablate zeroes
// exactly the named heads' rows of attn.w_o, in memory only (the checkpoint's bytes are unchanged),
// and prints that model's loss beside the unablated one; bad input gets one line and exit status 2.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/gpt_checkpoint.hpp"
#include "corpus/kjv_corpus.hpp"
#include "generate/evaluate_options.hpp"
#include "generate/head_ablation.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "support/gpt_checkpoint_command.hpp"
#include "support/random_model.hpp"
#include "support/temp_dir.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
using minimodel::TokenId;
using workbench::HeadRef;

namespace {

// ---- Parsing and ablating heads ----

TEST(HeadAblation, ParsesLayerDotHeadListsWithAnOptionalL) {
  EXPECT_EQ(workbench::parse_heads("3.2"), (std::vector<HeadRef>{{3, 2}}));
  EXPECT_EQ(workbench::parse_heads("L3.2,0.2"), (std::vector<HeadRef>{{3, 2}, {0, 2}}));
  EXPECT_EQ(workbench::head_names({{3, 2}, {0, 2}}), "L3.2, L0.2");
  for (const std::string bad : {"", "3", "3.", ".2", "a.b", "3.2,", ",3.2", "3.2.1", "-1.2", "3 .2",
                                "L", "H3.2", "99999.0"})
    EXPECT_THROW(workbench::parse_heads(bad), std::invalid_argument) << "'" << bad << "'";
}

bool same_parameters(const minimodel::GptParams<float>& a, const minimodel::GptParams<float>& b) {
  const auto ta = minimodel::parameter_tensors(a), tb = minimodel::parameter_tensors(b);
  for (std::size_t i = 0; i < ta.size(); ++i)
    if (!std::equal(ta[i].data, ta[i].data + ta[i].size(), tb[i].data)) return false;
  return true;
}

TEST(HeadAblation, NoHeadsIsTheIdentity) {
  const minimodel::GptParams<float> params = minimodel::init_gpt({40, 8, 12, 3, 2}, 1);
  minimodel::GptParams<float> copy = params;
  workbench::ablate_heads(copy, {});
  EXPECT_TRUE(same_parameters(copy, params));
}

TEST(HeadAblation, ZeroesExactlyTheHeadsRowsOfWO) {
  // d_model 12, 3 heads: head h owns rows 4h … 4h + 3 of its layer's w_o.
  const minimodel::GptParams<float> params = minimodel::init_gpt({40, 8, 12, 3, 2}, 1);
  minimodel::GptParams<float> cut = params;
  workbench::ablate_heads(cut, {{1, 2}, {0, 0}});
  const std::map<std::size_t, std::size_t> zeroed = {{0, 0}, {1, 2}};  // layer -> head
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t row = 0; row < 12; ++row)
      for (std::size_t col = 0; col < 12; ++col) {
        const bool in_head = row / 4 == zeroed.at(l);
        EXPECT_EQ(cut.layers[l].attn.w_o(row, col),
                  in_head ? 0.0f : params.layers[l].attn.w_o(row, col))
            << "layer " << l << " row " << row << " col " << col;
      }
  // Everything else as it was: put the two w_o back and compare all.
  for (std::size_t l = 0; l < 2; ++l) cut.layers[l].attn.w_o = params.layers[l].attn.w_o;
  EXPECT_TRUE(same_parameters(cut, params));
}

TEST(HeadAblation, RefusesAHeadOrLayerOutOfRangeChangingNothing) {
  const minimodel::GptParams<float> params = minimodel::init_gpt({40, 8, 12, 3, 2}, 1);
  minimodel::GptParams<float> copy = params;
  EXPECT_THROW(workbench::ablate_heads(copy, {{0, 1}, {2, 0}}), std::invalid_argument);
  EXPECT_THROW(workbench::ablate_heads(copy, {{0, 1}, {1, 3}}), std::invalid_argument);
  EXPECT_TRUE(same_parameters(copy, params));
}

// ---- workbook evaluate on a small checkpoint ----

using Output = minimodel::testing::CommandOutput;

// The numbers of an output line "<label>loss X nats per token, Y bits per byte".
struct Printed {
  double loss, bits_per_byte;
};
Printed printed(const std::string& text, const std::string& label) {
  const std::regex line(label + "loss ([0-9.]+) nats per token, ([0-9.]+) bits per byte");
  std::smatch m;
  if (!std::regex_search(text, m, line))
    throw std::runtime_error("no line '" + label + "loss …' in:\n" + text);
  return {std::stod(m[1]), std::stod(m[2])};
}

// The output prints 6 decimals: half a unit of the last one, and the order in which the pieces'
// nats are added in double (relative 1e-15 at most on a few hundred terms), is all that may differ.
constexpr double kPrinted = 5e-7 + 1e-12;

class WorkbookEvaluate : public minimodel::testing::GptCheckpointCommand {
 protected:
  // Two layers, batch 4, and w_o scaled up 50 times so that each head moves the loss by far more
  // than the printed digits (at init's 0.02 scale a head's share is a few 1e-5 nats).
  WorkbookEvaluate() : GptCheckpointCommand("evaluate_gpt_test", "workbook evaluate", 2, 4) {
    for (auto& layer : checkpoint_.params.layers) layer.attn.w_o *= 50.0f;
    save_checkpoint();
  }

  Output evaluate(const std::string& args, const std::string& program = "") const {
    return run(args, program);
  }

  // The held-out books in the fixture's tokens, and each token's bytes; false without `bible`.
  bool held_out(std::vector<TokenId>& ids, std::vector<std::size_t>& token_bytes) const {
    try {
      minimodel::BpeEncoder encoder(bpe_);  // encode caches words: not const
      ids = encoder.encode(workbench::kjv_corpus().validation);
      for (const std::string& bytes : bpe_.vocab) token_bytes.push_back(bytes.size());
      return true;
    } catch (const workbench::KjvMissing&) {
      return false;
    }
  }

  // Every file of the checkpoint folder and its bytes.
  std::map<std::string, std::string> files_on_disk() const {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(dir()))
      files[entry.path().filename().string()] = workbench::read_file(entry.path());
    return files;
  }
};

TEST_F(WorkbookEvaluate, PrintsEvaluateOnTheHeldOutTokensAndTheAblatedModelBesideIt) {
  std::vector<TokenId> ids;
  std::vector<std::size_t> token_bytes;
  if (!held_out(ids, token_bytes)) GTEST_SKIP() << "bible-kjv is not installed";
  const std::map<std::string, std::string> before = files_on_disk();

  // 45 windows: 5 pieces of 8 batches of 4 windows and a short one, and a short last batch.
  const Output run = evaluate(with_checkpoint("--ablate 1.0,0.1 --windows 45"));
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  minimodel::GptTape<float> tape;
  const minimodel::Evaluation direct =
      minimodel::evaluate(checkpoint_.params, ids, 16, 4, 45, token_bytes, tape);
  minimodel::GptParams<float> cut = checkpoint_.params;
  workbench::ablate_heads(cut, {{1, 0}, {0, 1}});
  const minimodel::Evaluation direct_cut =
      minimodel::evaluate(cut, ids, 16, 4, 45, token_bytes, tape);

  const Printed base = printed(run.stdout_text, "  unablated: +");
  EXPECT_NEAR(base.loss, direct.loss, kPrinted) << run.stdout_text;
  EXPECT_NEAR(base.bits_per_byte, direct.bits_per_byte, kPrinted) << run.stdout_text;
  const Printed ablated = printed(run.stdout_text, "  ablated: +");
  EXPECT_NEAR(ablated.loss, direct_cut.loss, kPrinted) << run.stdout_text;
  EXPECT_NEAR(ablated.bits_per_byte, direct_cut.bits_per_byte, kPrinted) << run.stdout_text;
  EXPECT_GT(std::abs(direct_cut.loss - direct.loss), 1e-3) << "the heads do not move the loss";
  EXPECT_NE(run.stdout_text.find("ablating L1.0, L0.1"), std::string::npos) << run.stdout_text;
  EXPECT_NE(run.stdout_text.find("(" + std::to_string(45 * 16) + " tokens scored"),
            std::string::npos)
      << run.stdout_text;
  // How many there were: every window of the held-out books is what the default scores (a full
  // pass here would take 40 s under a sanitizer).
  EXPECT_NE(run.stdout_text.find(std::to_string(ids.size()) + " tokens; scoring 45 of their " +
                                 std::to_string((ids.size() - 1) / 16) +
                                 " windows of 16 + 1 tokens (--windows)"),
            std::string::npos)
      << run.stdout_text;

  // In memory only: every file of the checkpoint has the bytes it had, and no file came or went.
  EXPECT_TRUE(files_on_disk() == before) << "the checkpoint folder changed";

  // Without --ablate: the same unablated numbers, alone.
  const Output plain = evaluate(with_checkpoint("--windows 45"));
  ASSERT_EQ(plain.status, 0) << plain.stderr_text;
  const Printed alone = printed(plain.stdout_text, "  ");
  EXPECT_EQ(alone.loss, base.loss);
  EXPECT_EQ(alone.bits_per_byte, base.bits_per_byte);
  EXPECT_EQ(plain.stdout_text.find("ablated"), std::string::npos) << plain.stdout_text;
}

TEST_F(WorkbookEvaluate, IsListedByWorkbookHelp) {
  const Output help = evaluate("--help", "workbook");
  EXPECT_EQ(help.status, 0) << help.stderr_text;
  EXPECT_NE(help.stdout_text.find("\n  evaluate "), std::string::npos) << help.stdout_text;
}

TEST_F(WorkbookEvaluate, RejectsBadInputInOneLine) {
  expect_rejected("--checkpoint " + (tmp_ / "absent").string(), "absent");
  expect_rejected(with_checkpoint("--ablate 0.2"), "each layer has 2 heads, 0 to 1");
  expect_rejected(with_checkpoint("--ablate 2.0"), "the model has 2 layers, 0 to 1");
  expect_rejected(with_checkpoint("--ablate 1.1,0.2"), "--ablate L0.2");
  for (const std::string bad : {"3", "1.x", "1.0,", "\"\""})
    expect_rejected(with_checkpoint("--ablate " + bad), "LAYER.HEAD");
  expect_rejected(with_checkpoint("--windows 0"), "give 1 or more");
  expect_rejected(with_checkpoint("--windows 1.5"), "give a whole number");
  expect_rejected(with_checkpoint("--impl nobody"), "--impl");
  expect_rejected("", "--checkpoint");
  // The engine itself says the same.
  expect_rejected(with_checkpoint("--ablate 0.2"), "each layer has 2 heads",
                  "evaluate-gpt-reference");
  expect_rejected(with_checkpoint("--windows 0"), "give 1 or more", "evaluate-gpt-reference");
}

TEST_F(WorkbookEvaluate, SaysToGiveALab13CheckpointForOneOfLab10) {
  workbench::Checkpoint lab10;
  lab10.config = {11, 12, 8, 2, 2};
  lab10.params = minimodel::testing::random_model(lab10.config, 5);
  workbench::save_checkpoint(tmp_ / "lab10", lab10);
  expect_rejected("--checkpoint " + (tmp_ / "lab10").string(), "give a checkpoint of lab 13");
}

}  // namespace
