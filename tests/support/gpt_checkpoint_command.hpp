#pragma once
// A small untrained lab 13 checkpoint in a fresh folder, and a workbook command run on it: the
// fixture of the tests of `workbook generate` and `workbook evaluate`.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/gpt_checkpoint.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "support/temp_dir.hpp"
#include "util/files.hpp"

namespace minimodel::testing {

/// What a command printed and how it ended.
struct CommandOutput {
  int status;
  std::string stdout_text, stderr_text;
};

/// A GPT (context 16, d_model 8, 2 heads, n_layers layers) with a tokenizer of 300 tokens trained
/// on Genesis 1:1–3, saved as a checkpoint of batch `batch` in a folder of its own; `program` (the
/// workbook command, or an engine run directly) runs on it.
class GptCheckpointCommand : public ::testing::Test {
 protected:
  GptCheckpointCommand(const std::string& name, std::string program, std::size_t n_layers,
                       std::size_t batch)
      : tmp_(name), program_(std::move(program)) {
    const std::string text =
        "In the beginning God created the heaven and the earth.\n"
        "And the earth was without form, and void; and darkness was upon the face of the deep.\n"
        "And God said, Let there be light: and there was light.\n";
    const std::vector<std::string> specials = {"<|endoftext|>"};
    bpe_ = train_bpe(text, 300, specials);
    checkpoint_.params = init_gpt({bpe_.vocab.size(), 16, 8, 2, n_layers}, 9);
    checkpoint_.vocab_json = to_vocab_json(bpe_);
    checkpoint_.merges_txt = to_merges_txt(bpe_);
    checkpoint_.special_tokens = specials;
    checkpoint_.batch = batch;
    checkpoint_.length = 16;
    checkpoint_.train.schedule = {1e-3, 1e-4, 1, 10};
    save_checkpoint();
  }

  /// Writes checkpoint_ into dir(), after a test or a fixture changed it.
  void save_checkpoint() const { workbench::save_gpt_checkpoint(dir(), checkpoint_); }

  /// `program args` (the fixture's program if none is given), its output captured.
  CommandOutput run(const std::string& args, const std::string& program = "") const {
    const std::filesystem::path out = tmp_ / "stdout.txt", err = tmp_ / "stderr.txt";
    const std::string command = std::string(MINIMODEL_BIN_DIR) + "/" +
                                (program.empty() ? program_ : program) + " " + args + " > " +
                                out.string() + " 2> " + err.string();
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, workbench::read_file(out),
            workbench::read_file(err)};
  }

  /// Exit status 2, nothing on stdout, one line on stderr that mentions `mention`.
  void expect_rejected(const std::string& args, const std::string& mention,
                       const std::string& program = "") const {
    const CommandOutput output = run(args, program);
    EXPECT_EQ(output.status, 2) << output.stderr_text;
    EXPECT_EQ(output.stdout_text, "");
    EXPECT_EQ(std::count(output.stderr_text.begin(), output.stderr_text.end(), '\n'), 1)
        << output.stderr_text;
    EXPECT_NE(output.stderr_text.find(mention), std::string::npos) << output.stderr_text;
  }

  std::string with_checkpoint(const std::string& args) const {
    return "--checkpoint " + dir().string() + " " + args;
  }
  std::filesystem::path dir() const { return tmp_ / "gpt"; }

  TempDir tmp_;
  Bpe bpe_;
  workbench::GptCheckpoint checkpoint_;

 private:
  std::string program_;
};

}  // namespace minimodel::testing
