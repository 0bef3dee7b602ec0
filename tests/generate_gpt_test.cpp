// `workbook generate` for lab 13's GPT (workbench/generate/generate_gpt_main.cpp and
// utf8_stream): the text printed piece by piece is exactly what lab 12's decode gives for all the
// bytes, never half a character; the command picks the GPT engine by the checkpoint, encodes the
// prompt with the checkpoint's tokenizer and prints what the reference's generate samples with
// that seed; bad knobs, prompts and checkpoints get one line and exit status 2. And the main() the
// engines share (util/engine_main.hpp): what a run throws, told in one line with its exit status.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/gpt_checkpoint.hpp"
#include "generate/utf8_stream.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/todo.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "support/gpt_checkpoint_command.hpp"
#include "support/random_model.hpp"
#include "support/temp_dir.hpp"
#include "util/engine_main.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
using minimodel::TokenId;

namespace {

// ---- The UTF-8 stream ----

// Each piece Utf8Stream prints is whole characters only: valid UTF-8 that ends on a boundary.
bool whole_characters(const std::string& text) {
  return workbench::replace_invalid_utf8(text) == text;
}

TEST(Utf8Stream, PiecesJoinToLab12sDecodeOfAllTheBytesWhereverTheyAreCut) {
  // Characters of 1 to 4 bytes, invalid bytes, a cut character, a surrogate, an overlong form.
  const std::vector<std::string> texts = {
      "In the beginning God created the heaven and the earth.",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\x94 done",
      "ok\xff\xfe then \x80 and \xe2\x82",
      "\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \xe0\x80\xaf \xf0\x9f\x98",
      "\xe2\x82\xe2\x82\xac\xc3"};
  for (const std::string& text : texts) {
    const std::string expected = minimodel::utf8_replace_invalid(text);
    EXPECT_EQ(workbench::replace_invalid_utf8(text), expected);
    for (const std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
      workbench::Utf8Stream stream;
      std::string joined;
      for (std::size_t at = 0; at < text.size(); at += piece) {
        const std::string out = stream.push(std::string_view(text).substr(at, piece));
        EXPECT_TRUE(whole_characters(out)) << "a piece ends inside a character";
        joined += out;
      }
      joined += stream.finish();
      EXPECT_EQ(joined, expected) << "pieces of " << piece << " bytes";
    }
  }
}

TEST(Utf8Stream, HoldsACharacterUntilItsLastByteAndReplacesOneNeverFinished) {
  workbench::Utf8Stream stream;
  EXPECT_EQ(stream.push("a\xe2"), "a");
  EXPECT_EQ(stream.pending(), "\xe2");
  EXPECT_EQ(stream.push("\x82"), "");
  EXPECT_EQ(stream.push("\xac!"), "\xe2\x82\xac!");
  EXPECT_EQ(stream.push("\xf0\x9f"), "");
  EXPECT_EQ(stream.finish(), "\xef\xbf\xbd") << "two thirds of a character are one U+FFFD";
  // A byte that cannot continue the waiting character ends it at once.
  EXPECT_EQ(stream.push("\xe2"), "");
  EXPECT_EQ(stream.push("x"), "\xef\xbf\xbdx");
}

TEST(Utf8Stream, AgreesWithLab12OnRandomBytes) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) {  // mostly lead and continuation bytes, where the cases are
      const unsigned r = unsigned(rng() % 4);
      c = char(r == 0 ? rng() % 128 : r == 1 ? 0x80 + rng() % 64 : 0xC0 + rng() % 64);
    }
    EXPECT_EQ(workbench::replace_invalid_utf8(bytes), minimodel::utf8_replace_invalid(bytes));
    workbench::Utf8Stream stream;
    std::string joined;
    for (const char c : bytes) joined += stream.push(std::string(1, c));
    EXPECT_EQ(joined + stream.finish(), minimodel::utf8_replace_invalid(bytes));
  }
}

// ---- The engines' main() ----

struct EngineRun {
  int status;
  std::string stdout_text, stderr_text;
  bool ran;  // whether the engine's work was called
};

// engine_main on `args` with one option (--n), the work `run`, stdout and stderr captured.
EngineRun run_engine_main(const std::vector<std::string>& args, const std::function<int()>& run) {
  CLI::App app{"an engine"};
  int n = 0;
  app.add_option("--n", n, "a number")->required();
  std::vector<std::string> words = {"engine"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  std::ostringstream out, err;
  std::streambuf* const cout = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const cerr = std::cerr.rdbuf(err.rdbuf());
  bool ran = false;
  const int status =
      workbench::engine_main(app, int(argv.size()), argv.data(),
                             {"workbook generate", "learner", "the model is too large"}, [&] {
                               ran = true;
                               return run();
                             });
  std::cout.rdbuf(cout);
  std::cerr.rdbuf(cerr);
  return {status, out.str(), err.str(), ran};
}

TEST(EngineMain, SaysWhatTheRunThrowsInOneLineWithItsExitStatus) {
  const auto throwing = [](auto error) { return [error]() -> int { throw error; }; };
  EngineRun run = run_engine_main({"--n", "3"}, [] { return 0; });
  EXPECT_EQ(run.status, 0);
  EXPECT_EQ(run.stderr_text, "");
  run = run_engine_main({"--n", "3"}, throwing(minimodel::Todo("TODO(lab 13, Block A): x")));
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.stderr_text, "workbook generate --impl learner: TODO(lab 13, Block A): x\n");
  run = run_engine_main({"--n", "3"}, throwing(std::invalid_argument("--prompt is empty")));
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.stderr_text, "workbook generate: --prompt is empty\n");
  run = run_engine_main({"--n", "3"}, throwing(std::runtime_error("cannot read x.npy")));
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.stderr_text, "workbook generate: cannot read x.npy\n");
  run = run_engine_main({"--n", "3"}, throwing(std::bad_alloc()));
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.stderr_text,
            "workbook generate: out of memory (std::bad_alloc): the model is too large\n");
  EXPECT_EQ(run.stdout_text, "");
}

TEST(EngineMain, ABadCommandLineIsOneLineAndExitStatus2WithoutRunning) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--n", "x"}, {}, {"--n", "3", "--what"}}) {
    const EngineRun run = run_engine_main(args, [] { return 0; });
    EXPECT_EQ(run.status, 2);
    EXPECT_FALSE(run.ran);
    EXPECT_EQ(run.stderr_text.rfind("workbook generate: ", 0), 0u) << run.stderr_text;
    EXPECT_EQ(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n'), 1)
        << run.stderr_text;
    EXPECT_EQ(run.stdout_text, "");
  }
  const EngineRun help = run_engine_main({"--help"}, [] { return 0; });
  EXPECT_EQ(help.status, 0);
  EXPECT_FALSE(help.ran);
  EXPECT_NE(help.stdout_text.find("--n"), std::string::npos) << help.stdout_text;
}

// ---- workbook generate on a GPT checkpoint ----

using Output = minimodel::testing::CommandOutput;

class WorkbookGenerateGpt : public minimodel::testing::GptCheckpointCommand {
 protected:
  // One layer, batch 2.
  WorkbookGenerateGpt() : GptCheckpointCommand("generate_gpt_test", "workbook generate", 1, 2) {}

  // `program`: the workbook command, or an engine run directly ("generate-gpt-reference").
  Output generate(const std::string& args, const std::string& program = "") const {
    return run(args, program);
  }
};

TEST_F(WorkbookGenerateGpt, PrintsThePromptAndWhatGenerateSamplesWithThatSeed) {
  const Output run = generate(with_checkpoint(
      "--prompt \"And God said\" --temperature 1.2 --top-k 50 --top-p 0.9 --max-new 30 --seed 4"));
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  minimodel::BpeEncoder encoder(bpe_);
  std::mt19937_64 rng(4);
  // Past the context of 16, generate slides it: 30 new tokens after a prompt of a few.
  const std::vector<TokenId> drawn = minimodel::generate(
      checkpoint_.params, encoder.encode("And God said"), 30, {1.2f, 50, 0.9f}, rng);
  EXPECT_EQ(run.stdout_text, "And God said" + encoder.decode(drawn) + "\n");
  EXPECT_NE(run.stderr_text.find("30 generated"), std::string::npos) << run.stderr_text;
  // Another seed, another text (an untrained model over 300 tokens at temperature 1.2).
  const Output other = generate(with_checkpoint(
      "--prompt \"And God said\" --temperature 1.2 --top-k 50 --top-p 0.9 --max-new 30 --seed 5"));
  EXPECT_NE(other.stdout_text, run.stdout_text);
}

TEST_F(WorkbookGenerateGpt, TemperatureZeroIsGreedyWhateverTheSeed) {
  const Output a = generate(with_checkpoint("--prompt \"In the\" --temperature 0 --seed 1"));
  const Output b = generate(with_checkpoint("--prompt \"In the\" --temperature 0 --seed 2"));
  ASSERT_EQ(a.status, 0) << a.stderr_text;
  EXPECT_EQ(a.stdout_text, b.stdout_text);
  EXPECT_EQ(a.stdout_text.rfind("In the", 0), 0u);
}

TEST_F(WorkbookGenerateGpt, RejectsBadKnobsNamingThem) {
  expect_rejected(with_checkpoint("--prompt x --top-p 0"), "--top-p");
  expect_rejected(with_checkpoint("--prompt x --top-p 1.5"), "--top-p");
  expect_rejected(with_checkpoint("--prompt x --temperature -1"), "--temperature");
  expect_rejected(with_checkpoint("--prompt x --top-k 5000"),
                  "--top-k 5000 but the vocabulary has " + std::to_string(bpe_.vocab.size()));
  expect_rejected(with_checkpoint("--prompt x --max-new 0"), "--max-new");
  expect_rejected(with_checkpoint("--prompt x --tokens 5"), "--max-new");
}

// The sampler refuses a NaN temperature too, but only once sampling starts, after the prompt is
// printed: the knobs are checked as the command line is read, by the command and by the engine.
TEST_F(WorkbookGenerateGpt, RefusesBadKnobsBeforePrintingAnything) {
  for (const std::string program : {"workbook generate", "generate-gpt-reference"}) {
    SCOPED_TRACE(program);
    for (const std::string knob :
         {"--temperature nan", "--temperature -nan", "--temperature -0.5", "--temperature inf"})
      expect_rejected(with_checkpoint("--prompt \"In the\" " + knob), "--temperature", program);
    for (const std::string knob : {"--top-p nan", "--top-p 0", "--top-p -0.1", "--top-p 1.01"})
      expect_rejected(with_checkpoint("--prompt \"In the\" " + knob), "--top-p", program);
    expect_rejected(with_checkpoint("--prompt \"In the\" --top-k -1"), "--top-k", program);
  }
}

TEST_F(WorkbookGenerateGpt, RejectsAPromptThatFillsTheContextOrIsEmpty) {
  expect_rejected(with_checkpoint("--prompt \"In the beginning God created the heaven and the "
                                  "earth. And the earth was without form, and void\""),
                  "but the model's context is 16: give at most 15");
  expect_rejected(with_checkpoint("--prompt \"\""), "--prompt is empty");
}

TEST_F(WorkbookGenerateGpt, RejectsBrokenCheckpointsNamingTheFile) {
  fs::remove(dir() / "h0.mlp.w_fc.npy");
  expect_rejected(with_checkpoint("--prompt x"), "h0.mlp.w_fc.npy");
  workbench::save_gpt_checkpoint(dir(), checkpoint_);
  workbench::write_file_atomically(dir() / "merges.txt", "#version: 0.2\nzz qq\n");
  expect_rejected(with_checkpoint("--prompt x"), "tokenizer");
  checkpoint_.params.layers[0].attn.w_v(1, 2) = std::numeric_limits<float>::infinity();
  workbench::save_gpt_checkpoint(dir(), checkpoint_);
  expect_rejected(with_checkpoint("--prompt x"), "h0.attn.w_v.npy holds inf");
}

TEST_F(WorkbookGenerateGpt, Lab10sGreedyEngineRefusesTheSamplingKnobs) {
  workbench::Checkpoint lab10;
  lab10.config = {11, 12, 8, 2, 2};
  lab10.params = minimodel::testing::random_model(lab10.config, 5);
  workbench::save_checkpoint(tmp_ / "lab10", lab10);
  const Output run =
      generate("--checkpoint " + (tmp_ / "lab10").string() + " --prompt \"3 4\" --temperature 0.5");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.stderr_text.find("lab 10's model, decoded greedily"), std::string::npos)
      << run.stderr_text;
  const Output greedy =
      generate("--checkpoint " + (tmp_ / "lab10").string() + " --prompt \"3 4\" --tokens 2");
  EXPECT_EQ(greedy.status, 0) << greedy.stderr_text;
  EXPECT_EQ(greedy.stdout_text.rfind("prompt:  3 4\noutput:  ", 0), 0u) << greedy.stdout_text;
}

}  // namespace
