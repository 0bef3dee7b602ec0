// The learner's companion verbs of `workbook`, driven end to end in a scratch copy of the
// repository (a git clone, configured in Release, building only what each verb needs), and the lab
// registry's parsing of the real labs/.
//
// One scratch copy is shared by the WorkbookScratch tests, which run in order: pristine -> check
// says "not started" -> the reference bodies copied in -> check passes -> diff reports 0 -> reset
// restores the stub with a backup -> bad lab numbers -> a syntax error -> watch -> dev-check, intact
// and with each defect it lists. Set MINIMODEL_KEEP_SCRATCH=1 to keep the copy for inspection.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/lab_registry.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

struct Outcome {
  int status = -1;
  std::string out;  // stdout and stderr
};

// Runs a shell command, stdin from /dev/null (no terminal), capturing stdout and stderr.
Outcome sh(const std::string& command) {
  Outcome run;
  FILE* pipe = popen(("(" + command + ") < /dev/null 2>&1").c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.out.append(buffer, n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

// ---- The registry, on the real labs/ ------------------------------------------------------------

const workbook::Lab& real_lab(const std::string& number) {
  static const std::vector<workbook::Lab> labs = workbook::discover_labs(MINIMODEL_SOURCE_DIR);
  const workbook::Lab* lab = workbook::find_lab(labs, number);
  if (!lab) throw std::runtime_error("no lab " + number);
  return *lab;
}

TEST(LabRegistry, DiscoversEveryLabTextInOrder) {
  const auto labs = workbook::discover_labs(MINIMODEL_SOURCE_DIR);
  ASSERT_GE(labs.size(), 3u);
  for (std::size_t i = 0; i < labs.size(); ++i) EXPECT_EQ(std::stoi(labs[i].number), int(i)) << labs[i].slug;
  EXPECT_EQ(labs[0].slug, "attention-by-hand");
  EXPECT_EQ(labs[0].title, "Attention by hand");
  EXPECT_EQ(labs[0].text(), "labs/00-attention-by-hand.md");
  EXPECT_EQ(labs[0].write_up(), "solutions/00-attention-by-hand.md");
}

TEST(LabRegistry, ReadsTheSectionsOfALabText) {
  const workbook::Lab& lab = real_lab("00");
  for (const char* section : {"Goal", "Prereq", "Files you edit", "What you produce", "TODO blocks",
                              "Stop conditions", "Hints"})
    EXPECT_TRUE(lab.has_section(section)) << section;
  EXPECT_FALSE(lab.has_section("Block A — softmax"));  // a ### subsection, not a section
}

TEST(LabRegistry, LearnerFilesAreTheFilesYouEditNotTheFilesToRead) {
  EXPECT_EQ(real_lab("00").learner_files, std::vector<std::string>{"src/minimodel/attention/scaled_dot_product.cpp"});
  // Lab 01's text also names lab 00's file, under "Read, but do not edit".
  EXPECT_EQ(real_lab("01").learner_files, std::vector<std::string>{"src/minimodel/attention/attention.cpp"});
  EXPECT_EQ(real_lab("01").reference_files(), std::vector<std::string>{"solutions/minimodel/attention/attention.cpp"});
}

TEST(LabRegistry, HintsAreTheHintSubsectionsInOrder) {
  const workbook::Lab& lab = real_lab("00");
  ASSERT_EQ(lab.hints.size(), 4u);
  EXPECT_EQ(lab.hints[0].rfind("Do the paper derivation completely", 0), 0u) << lab.hints[0];
  EXPECT_NE(lab.hints[3].find("Block B, in order"), std::string::npos) << lab.hints[3];
  EXPECT_EQ(lab.hints[3].find("## Next lab"), std::string::npos);
}

TEST(LabRegistry, BlocksComeFromTheTextAndTheStubs) {
  EXPECT_EQ(real_lab("00").blocks, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(real_lab("01").blocks, (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(real_lab("02").blocks, std::vector<std::string>{"A"});
}

TEST(LabRegistry, AFailingTestPointsToItsBlock) {
  const workbook::Lab& lab = real_lab("00");
  EXPECT_EQ(lab.block_for("Softmax.IsStableForLargeLogits", "max |actual - expected| = nan"), "A");
  EXPECT_EQ(lab.block_for("SingleHeadAttention.MaskedKeysGetZeroWeight", "…"), "B");
  EXPECT_EQ(lab.block_for("Anything.Else", "threw: TODO(lab 00, Block B): implement …"), "B");
  EXPECT_EQ(real_lab("02").block_for("CausalMask.Whatever", "…"), "A");  // its only block
}

TEST(LabRegistry, NormalisesLabNumbers) {
  EXPECT_EQ(workbook::normalise_lab_number("7"), "07");
  EXPECT_EQ(workbook::normalise_lab_number("01"), "01");
  EXPECT_FALSE(workbook::normalise_lab_number("x1"));
  EXPECT_FALSE(workbook::normalise_lab_number("123"));
  EXPECT_EQ(workbook::todo_in("C++ exception \"TODO(lab 02, Block A): build\""),
            std::make_pair(std::string("02"), std::string("A")));
}

// ---- The verbs, in a scratch copy -----------------------------------------------------------------

class WorkbookScratch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/workbook_runner_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    scratch_ = pattern;
    repo_ = scratch_ / "repo";
    const Outcome clone = sh("git clone --quiet " + std::string(MINIMODEL_SOURCE_DIR) + " " + repo_.string());
    ASSERT_EQ(clone.status, 0) << clone.out;
    const Outcome configure = sh("cmake -S " + repo_.string() + " -B " + (repo_ / "build").string() +
                             " -DCMAKE_BUILD_TYPE=Release");
    ASSERT_EQ(configure.status, 0) << configure.out;
  }
  static void TearDownTestSuite() {
    if (!std::getenv("MINIMODEL_KEEP_SCRATCH")) fs::remove_all(scratch_);
  }
  void SetUp() override {
    if (!fs::exists(repo_ / "build" / "CMakeCache.txt")) GTEST_SKIP() << "the scratch copy could not be set up";
  }

  static Outcome workbook(const std::string& args) {
    return sh(std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + repo_.string() + " --build-dir " +
              (repo_ / "build").string() + " " + args);
  }
  static Outcome git(const std::string& args) { return sh("git -C " + repo_.string() + " " + args); }

  static const char* stub() { return "src/minimodel/attention/scaled_dot_product.cpp"; }
  static const char* reference() { return "solutions/minimodel/attention/scaled_dot_product.cpp"; }

  static fs::path scratch_, repo_;
};

fs::path WorkbookScratch::scratch_, WorkbookScratch::repo_;

TEST_F(WorkbookScratch, PristineCheckSaysNotStartedBlockA) {
  const Outcome check = workbook("check 00");
  EXPECT_EQ(check.status, 1) << check.out;
  EXPECT_NE(check.out.find("0 of 12 tests pass"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("not started: Block A of labs/00-attention-by-hand.md"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("not started: Block B of labs/00-attention-by-hand.md"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("FAIL"), std::string::npos) << "TODO failures collapse to one line per block\n" << check.out;
  EXPECT_EQ(check.out.find("\033["), std::string::npos) << "no colour when piped";

  const Outcome current = workbook("");
  EXPECT_EQ(current.status, 0) << current.out;
  EXPECT_NE(current.out.find("current lab: lab 00 — Attention by hand"), std::string::npos) << current.out;
  EXPECT_NE(current.out.find("status: todo"), std::string::npos) << current.out;
  EXPECT_NE(current.out.find("next: read labs/00-attention-by-hand.md"), std::string::npos) << current.out;
}

TEST_F(WorkbookScratch, HintShowsTheNextHintEachTimeAndKeepsItsCounterInTheBuildTree) {
  const Outcome first = workbook("hint 00"), second = workbook("hint 0");
  EXPECT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("Hint 1 of 4"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("Do the paper derivation"), std::string::npos) << first.out;
  EXPECT_NE(second.out.find("Hint 2 of 4"), std::string::npos) << second.out;
  EXPECT_NE(read(repo_ / "build" / "workbook-state.json").find("\"00\": 2"), std::string::npos);
  EXPECT_EQ(git("status --porcelain").out, "") << "the learner's sources are untouched";
  EXPECT_NE(workbook("hint 00 --restart").out.find("Hint 1 of 4"), std::string::npos);
}

TEST_F(WorkbookScratch, SolutionWaitsForPassingTestsUnlessForced) {
  const Outcome closed = workbook("solution 00");
  EXPECT_EQ(closed.status, 1) << closed.out;
  EXPECT_NE(closed.out.find("not done yet"), std::string::npos) << closed.out;
  EXPECT_NE(closed.out.find("--force"), std::string::npos) << closed.out;
  const Outcome forced = workbook("solution 00 --force");
  EXPECT_EQ(forced.status, 0) << forced.out;
  EXPECT_NE(forced.out.find("# Lab 00 — Reference write-up"), std::string::npos) << forced.out.substr(0, 400);
  EXPECT_NE(forced.out.find("==> solutions/minimodel/attention/scaled_dot_product.cpp <=="), std::string::npos);
}

TEST_F(WorkbookScratch, CheckPassesWithTheReferenceBodies) {
  fs::copy_file(repo_ / reference(), repo_ / stub(), fs::copy_options::overwrite_existing);
  const Outcome check = workbook("check 00");
  EXPECT_EQ(check.status, 0) << check.out;
  EXPECT_NE(check.out.find("all 12 tests pass"), std::string::npos) << check.out;
  const Outcome solution = workbook("solution 00");
  EXPECT_EQ(solution.status, 0) << solution.out.substr(0, 400);
}

TEST_F(WorkbookScratch, DiffOfTheReferenceBodiesReportsNoDifference) {
  const Outcome diff = workbook("diff 00");
  EXPECT_EQ(diff.status, 0) << diff.out;
  for (const char* output : {"softmax", "weights", "output", "masked_weights"})
    EXPECT_TRUE(std::regex_search(diff.out, std::regex(std::string("\n") + output + " +\\(2, 2\\) +0 +1\\.00e-05 +yes")))
        << output << "\n" << diff.out;
  EXPECT_NE(diff.out.find("4 of 4 outputs within tolerance: 0 differences"), std::string::npos) << diff.out;
}

TEST_F(WorkbookScratch, GradeJsonCountsEachLabsTests) {
  // Only lab 00 here, so that grading does not build the other labs: move their texts aside.
  const fs::path aside = scratch_ / "aside";
  fs::create_directories(aside);
  for (const auto& entry : fs::directory_iterator(repo_ / "labs"))
    if (entry.path().filename().string().rfind("00-", 0) != 0) fs::rename(entry.path(), aside / entry.path().filename());
  const Outcome grade = workbook("grade --json"), list = workbook("list");
  for (const auto& entry : fs::directory_iterator(aside)) fs::rename(entry.path(), repo_ / "labs" / entry.path().filename());

  ASSERT_EQ(grade.status, 0) << grade.out;
  const nlohmann::json report = nlohmann::json::parse(grade.out);
  ASSERT_EQ(report["labs"].size(), 1u);
  EXPECT_EQ(report["labs"][0]["lab"], "00");
  EXPECT_EQ(report["labs"][0]["passed"], 12);
  EXPECT_EQ(report["labs"][0]["total"], 12);
  EXPECT_EQ(report["labs"][0]["status"], "done");
  EXPECT_EQ(report["score"], 1.0);
  EXPECT_EQ(list.status, 0) << list.out;
  EXPECT_NE(list.out.find("00  Attention by hand"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("done"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("1/1 labs done"), std::string::npos) << list.out;
}

TEST_F(WorkbookScratch, ResetRestoresTheStubAndKeepsABackup) {
  const Outcome refused = workbook("reset 00");
  EXPECT_EQ(refused.status, 2) << refused.out;
  EXPECT_NE(refused.out.find("--yes"), std::string::npos) << refused.out;
  EXPECT_EQ(read(repo_ / stub()), read(repo_ / reference())) << "nothing changed without confirmation";

  const Outcome reset = workbook("reset 00 --yes");
  EXPECT_EQ(reset.status, 0) << reset.out;
  EXPECT_EQ(read(repo_ / stub()), git(std::string("show HEAD:") + stub()).out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(reset.out, m, std::regex(R"(saved your version to (\S+))"))) << reset.out;
  const fs::path backup = repo_ / m[1].str();
  EXPECT_EQ(backup.string().find((repo_ / ".workbook-backups").string()), 0u) << backup;
  ASSERT_TRUE(fs::exists(backup)) << backup;
  EXPECT_EQ(read(backup), read(repo_ / reference()));
  EXPECT_EQ(git("status --porcelain").out, "") << ".workbook-backups/ is ignored and the stub is back";
  EXPECT_NE(workbook("reset 00 --yes").out.find("nothing to do"), std::string::npos);
}

TEST_F(WorkbookScratch, BadLabNumbersAreUsageErrors) {
  const std::string range = workbook::lab_range(workbook::discover_labs(repo_));  // "00–02" today
  for (const char* verb : {"check 97", "verify 97", "diff 97", "hint 97", "solution 97", "reset 97 --yes"}) {
    const Outcome run = workbook(verb);
    EXPECT_EQ(run.status, 2) << verb << ": " << run.out;
    EXPECT_NE(run.out.find("no lab 97: labs are " + range), std::string::npos) << verb << ": " << run.out;
  }
  EXPECT_EQ(workbook("check x").status, 2);
  EXPECT_EQ(workbook("frobnicate").status, 2);
}

TEST_F(WorkbookScratch, ASyntaxErrorShowsTheFirstCompileErrorWithFileAndLine) {
  const std::string pristine = read(repo_ / stub());
  write(repo_ / stub(), pristine + "\nthis is not C++\n");
  const Outcome check = workbook("check 00");
  write(repo_ / stub(), pristine);
  EXPECT_EQ(check.status, 1) << check.out;
  EXPECT_NE(check.out.find("build error"), std::string::npos) << check.out;
  EXPECT_TRUE(std::regex_search(check.out, std::regex(R"(src/minimodel/attention/scaled_dot_product\.cpp:\d+:\d+: error: )")))
      << check.out;
  EXPECT_NE(check.out.find("workbook-build.log"), std::string::npos) << check.out;
}

TEST_F(WorkbookScratch, WatchRechecksWhenALearnerFileIsSaved) {
  const fs::path log = scratch_ / "watch.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string program = std::string(MINIMODEL_BIN_DIR) + "/workbook";
    execl(program.c_str(), program.c_str(), "--repo", repo_.c_str(), "--build-dir", (repo_ / "build").c_str(), "watch",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  auto count = [&](const std::string& what) {
    const std::string text = read(log);
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto wait_for = [&](const std::string& what, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (count(what) < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return count(what) >= n;
  };
  EXPECT_TRUE(wait_for("; Ctrl-C stops", 1)) << read(log);
  write(repo_ / stub(), read(repo_ / stub()));  // save it unchanged, as an editor would
  EXPECT_TRUE(wait_for("; Ctrl-C stops", 2)) << read(log);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string text = read(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  EXPECT_NE(text.find("scaled_dot_product.cpp saved"), std::string::npos) << text;
  EXPECT_EQ(count("not started: Block A of labs/00-attention-by-hand.md"), 2u) << text;
  EXPECT_NE(text.find("watch stopped"), std::string::npos) << text;
}

TEST_F(WorkbookScratch, DevCheckPassesOnThePristineCopy) {
  const Outcome check = workbook("dev-check --lab 00");
  EXPECT_EQ(check.status, 0) << check.out;
  EXPECT_NE(check.out.find("pass every check"), std::string::npos) << check.out;
}

TEST_F(WorkbookScratch, DevCheckFailsOnEachDefectAndNamesIt) {
  struct Defect {
    std::string what;
    std::function<void()> make;
    std::string expected;
  };
  auto remove_line = [&](const std::string& file, const std::string& line) {
    std::string text = read(repo_ / file);
    const auto at = text.find(line);
    ASSERT_NE(at, std::string::npos) << line;
    write(repo_ / file, text.erase(at, line.size()));
  };
  const std::vector<Defect> defects = {
      {"a missing section", [&] { remove_line("labs/01-multi-head-attention.md", "## Stop conditions\n"); },
       "labs/01-multi-head-attention.md: no \"## Stop conditions\" section"},
      {"missing hints", [&] { remove_line("labs/02-causal-mask.md", "## Hints\n"); },
       "labs/02-causal-mask.md: no \"## Hints\" section"},
      {"a missing README row",
       [&] {
         remove_line("README.md",
                     "| [01 — Multi-head attention](labs/01-multi-head-attention.md) | heads as column blocks of one "
                     "big matrix per role; W_O | `MultiHeadAttention`, `split_heads`, `merge_heads`, `heatmap.png` "
                     "(one panel per head) |\n");
       },
       "README.md's lab map has no row for lab 01"},
      {"a missing write-up", [&] { fs::remove(repo_ / "solutions/02-causal-mask.md"); },
       "lab 02 has no solutions write-up: solutions/02-causal-mask.md is missing"},
      {"a missing verify program", [&] { fs::remove(repo_ / "verify/lab01_verify.cpp"); },
       "lab 01 has no verify program: verify/lab01_verify.cpp is missing"},
      {"a lab text without tests", [&] { write(repo_ / "labs/98-extra.md", read(repo_ / "labs/02-causal-mask.md")); },
       "lab 98 has no tests: tests/lab98_test.cpp is missing"},
      {"a pristine stub that passes",
       [&] {
         fs::copy_file(repo_ / reference(), repo_ / stub(), fs::copy_options::overwrite_existing);
         git("-c user.name=t -c user.email=t@t commit --quiet -am 'stub passes'");
       },
       "lab 00: a pristine stub does not fail with its TODO (lab00.stubs): Softmax.MatchesTheHandExample passes on "
       "the pristine stubs"},
      {"a failing reference test",
       [&] {  // the reference softmax forgets to normalise
         std::string text = read(repo_ / reference());
         const std::string normalise = "return e / row_sum;";
         ASSERT_NE(text.find(normalise), std::string::npos);
         text.replace(text.find(normalise), normalise.size(), "return e;");
         write(repo_ / reference(), text);
       },
       "lab 00: a reference test fails: "},
      {"an invalid verify artifact",
       [&] {  // the figure is listed in the manifest but never drawn
         std::string text = read(repo_ / "verify/lab00_verify.cpp");
         const std::string draw = "workbench::render_heatmaps(run.artifact(\"attention_weights.png\"), figure);";
         ASSERT_NE(text.find(draw), std::string::npos);
         text.replace(text.find(draw), draw.size(), "(void)figure; run.artifact(\"attention_weights.png\");");
         write(repo_ / "verify/lab00_verify.cpp", text);
       },
       "lab 00: the reference verify program's artifacts are missing or invalid"},
  };
  for (const Defect& defect : defects) {
    SCOPED_TRACE(defect.what);
    defect.make();
    const Outcome check = workbook("dev-check --lab 00");
    EXPECT_EQ(check.status, 1) << check.out;
    EXPECT_NE(check.out.find(defect.expected), std::string::npos) << check.out;
    if (defect.what == "an invalid verify artifact") {
      EXPECT_NE(check.out.find("attention_weights.png is listed but missing"), std::string::npos) << check.out;
    }
    // Back to the pristine copy for the next defect.
    git("reset --quiet --hard origin/HEAD");
    fs::remove(repo_ / "labs/98-extra.md");
  }
}

}  // namespace
