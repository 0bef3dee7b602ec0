// `workbook tokenize` and `workbook corpus` end to end, on the reference's engine: train writes a
// tokenizer folder that encode and decode read back, the round trip through the command line gives
// the text back, and bad input (a tokenizer's or a corpus's) gets one line and exit status 2 with
// nothing written.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;

namespace minimodel {
namespace {

struct CommandResult {
  int status;
  std::string out;
  std::string err;
};

// Runs `workbook <args>` through the shell in `dir`, with stdin from `input` (a file in `dir`)
// when given, capturing stdout and stderr.
CommandResult workbook(const std::string& args, const fs::path& dir,
                       const std::string& input = "") {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string command = "cd '" + dir.string() + "' && " + MINIMODEL_BIN_DIR + "/workbook " + args;
  if (!input.empty()) command += " < " + (dir / input).string();
  command += " > " + out.string() + " 2> " + err.string();
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, workbench::read_file(out),
          workbench::read_file(err)};
}

const std::string kText =
    "In the beginning God created the heaven and the earth.\n<|endoftext|>\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep.\n"
    "caf\xc3\xa9 \xf0\x9f\x98\x80  two  spaces\n\n\nthe end\n";

TEST(WorkbookTokenize, TrainEncodeAndDecodeRoundTripThroughTheCommandLine) {
  testing::TempDir dir("workbook_tokenize");
  workbench::write_file_atomically(dir / "text.txt", kText + kText + kText);
  const CommandResult trained = workbook(
      "tokenize train --input text.txt --vocab-size 300 --special '<|endoftext|>' --out tok",
      dir.path());
  ASSERT_EQ(trained.status, 0) << trained.err;
  EXPECT_NE(trained.out.find("trained 300 tokens"), std::string::npos) << trained.out;
  for (const char* file : {"vocab.json", "merges.txt", "special_tokens.json"})
    EXPECT_TRUE(fs::is_regular_file(dir / "tok" / file)) << file;

  workbench::write_file_atomically(dir / "plain.txt", kText);
  const CommandResult encoded =
      workbook("tokenize encode --tokenizer " + (dir / "tok").string(), dir.path(), "plain.txt");
  ASSERT_EQ(encoded.status, 0) << encoded.err;
  std::istringstream ids(encoded.out);
  std::size_t count = 0;
  for (long id; ids >> id; ++count) EXPECT_TRUE(id >= 0 && id < 300) << id;
  EXPECT_GT(count, 0u);
  EXPECT_LT(count, kText.size());  // merges happened

  workbench::write_file_atomically(dir / "ids.txt", encoded.out);
  const CommandResult decoded =
      workbook("tokenize --impl reference decode --tokenizer tok", dir.path(), "ids.txt");
  ASSERT_EQ(decoded.status, 0) << decoded.err;
  EXPECT_EQ(decoded.out, kText);
}

TEST(WorkbookTokenize, BadInputGetsOneLineAndStatus2) {
  testing::TempDir dir("workbook_tokenize_bad");
  workbench::write_file_atomically(dir / "text.txt", kText);
  ASSERT_EQ(
      workbook("tokenize train --input text.txt --vocab-size 260 --out tok", dir.path()).status, 0);
  workbench::write_file_atomically(dir / "ids.txt", "1 2 99999\n");
  const CommandResult unknown = workbook("tokenize decode --tokenizer tok", dir.path(), "ids.txt");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("99999"), std::string::npos) << unknown.err;
  workbench::write_file_atomically(dir / "ids.txt", "1 two\n");
  EXPECT_EQ(workbook("tokenize decode --tokenizer tok", dir.path(), "ids.txt").status, 2);

  const CommandResult device =
      workbook("tokenize train --input text.txt --vocab-size 260 --out /dev/null", dir.path());
  EXPECT_EQ(device.status, 2);
  EXPECT_NE(device.err.find("/dev/null"), std::string::npos) << device.err;

  workbench::write_file_atomically(dir / "tok" / "merges.txt", "not a merge line\n");
  const CommandResult broken = workbook("tokenize encode --tokenizer tok", dir.path(), "text.txt");
  EXPECT_EQ(broken.status, 2);
  EXPECT_NE(broken.err.find("line 1"), std::string::npos) << broken.err;
}

TEST(WorkbookCorpus, WritesBothSplitsOrSaysHowToInstallTheBible) {
  testing::TempDir dir("workbook_corpus");
  const CommandResult run = workbook("corpus --out " + (dir / "kjv").string(), dir.path());
  if (run.status == 3) {
    EXPECT_NE(run.err.find("apt-get install bible-kjv"), std::string::npos) << run.err;
    GTEST_SKIP() << run.err;
  }
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string train = workbench::read_file(dir / "kjv" / "kjv-train.txt");
  const std::string validation = workbench::read_file(dir / "kjv" / "kjv-validation.txt");
  EXPECT_EQ(train.rfind("In the beginning God created the heaven and the earth.\n", 0), 0u);
  EXPECT_EQ(validation.rfind("Now it came to pass in the days when the judges ruled", 0), 0u);
  // 66 books, each followed by a line <|endoftext|>; 8 of them in the validation part.
  const auto count = [](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = text.find("\n<|endoftext|>\n"); at != std::string::npos;
         at = text.find("\n<|endoftext|>\n", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(train), 58u);
  EXPECT_EQ(count(validation), 8u);
  EXPECT_EQ(train.find("Ge1:1"), std::string::npos) << "a reference was left in";
}

TEST(WorkbookCorpus, AnOutThatIsNoFolderIsBadUsageWithNothingWritten) {
  testing::TempDir dir("workbook_corpus_bad");
  workbench::write_file_atomically(dir / "a-file", "kept\n");
  fs::create_directories(dir / "split-is-a-folder" / "kjv-train.txt");
  for (const std::string& out : {std::string("/dev/null"), (dir / "a-file").string(),
                                 (dir / "split-is-a-folder").string()}) {
    const CommandResult run = workbook("corpus --out " + out, dir.path());
    EXPECT_EQ(run.status, 2) << out << ": " << run.err;
    EXPECT_NE(run.err.find(out), std::string::npos) << run.err;
  }
  EXPECT_EQ(workbench::read_file(dir / "a-file"), "kept\n");
  EXPECT_TRUE(fs::is_directory(dir / "split-is-a-folder" / "kjv-train.txt"));
  EXPECT_FALSE(fs::exists(dir / "split-is-a-folder" / "kjv-validation.txt"));
}

}  // namespace
}  // namespace minimodel
