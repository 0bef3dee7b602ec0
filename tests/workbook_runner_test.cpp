// The `workbook` command's runner.
//
// LabRegistry and DevCheckFiles (label "reference", seconds): the registry on the real
// labs/labs.json, and `dev-check --files-only` on a scratch copy of the files, where an added
// registry entry makes it name exactly the files that lab lacks. LearnerTests (the same label): the
// one-line summary of each kind of GoogleTest failure text keeps its values. VerifyOutputs (the
// same label, seconds): each lab's reference verify program records an output of every block, for
// `workbook diff`.
//
// StandInPrograms (label "reference", seconds): how the verbs treat the learner programs they run
// (a crash, a loop past the time limit, a sanitizer's stop, Ctrl-C) and the build folder's lock,
// with a stand-in cmake and shell scripts for the programs.
//
// WorkbookScratch (label "maintainers", minutes): the learner's verbs end to end in a scratch git
// clone (one per process: ctest runs the tests in two halves side by side), configured in Release
// and building only what each verb needs. Each test starts from the pristine copy (so they pass in
// any order): check says "not started", the reference bodies copied in pass check, diff reports 0,
// grade counts, reset restores the stub with a backup, bad lab numbers, a syntax error, watch,
// lab 10's training shown as it goes through verify and break, attend and generate building first,
// and dev-check, intact and with each defect it lists. MINIMODEL_KEEP_SCRATCH=1 keeps the copy.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/learner_tests.hpp"
#include "runner/registry.hpp"
#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "runner/workspace.hpp"
#include "util/files.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& path) {  // "" for a missing file, as the tests expect
  return fs::exists(path) ? workbench::read_file(path) : "";
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Outcome {
  int status = -1;
  std::string out;  // stdout and stderr
};

// Runs a shell command, stdin from /dev/null (no terminal), capturing stdout and stderr.
Outcome sh(const std::string& command) {
  const workbench::CapturedRun run = workbench::run_captured("sh", {"-c", command});
  return {run.status.exited ? run.status.code : -1, run.output};
}

// ---- The registry, on the real labs/labs.json ---------------------------------------------------

const std::vector<workbook::Lab>& real_labs() {
  static const std::vector<workbook::Lab> labs = workbook::load_registry(MINIMODEL_SOURCE_DIR);
  return labs;
}

const workbook::Lab& real_lab(const std::string& number) {
  const workbook::Lab* lab = workbook::find_lab(real_labs(), number);
  if (!lab) throw std::runtime_error("no lab " + number);
  return *lab;
}

TEST(LabRegistry, ListsEveryLabInOrderWithItsPaths) {
  const auto& labs = real_labs();
  ASSERT_GE(labs.size(), 3u);
  // In increasing order, from 00; a number may be missing (lab 14 can come before lab 13).
  EXPECT_EQ(labs[0].number, "00");
  for (std::size_t i = 1; i < labs.size(); ++i)
    EXPECT_LT(labs[i - 1].number, labs[i].number) << labs[i].slug;
  const workbook::Lab& lab = labs[0];
  EXPECT_EQ(lab.slug, "attention-by-hand");
  EXPECT_EQ(lab.title, "Attention by hand");
  EXPECT_EQ(lab.text, "labs/00-attention-by-hand.md");
  EXPECT_EQ(lab.write_up, "solutions/00-attention-by-hand.md");
  EXPECT_EQ(lab.experiment, "experiments/00-attention-by-hand");
  EXPECT_EQ(lab.tests, "tests/lab00_test.cpp");
  EXPECT_EQ(lab.verify, "verify/lab00_verify.cpp");
  EXPECT_EQ(lab.target("test", "learner"), "test-lab00-learner");
}

TEST(LabRegistry, ReferenceFilesMirrorTheLearnerFiles) {
  EXPECT_EQ(real_lab("01").learner_files,
            (std::vector<std::string>{"src/minimodel/attention/attention.cpp",
                                      "src/minimodel/attention/head_permutation_test.cpp"}));
  EXPECT_EQ(real_lab("01").reference_files,
            (std::vector<std::string>{"solutions/minimodel/attention/attention.cpp",
                                      "solutions/minimodel/attention/head_permutation_test.cpp"}));
  EXPECT_TRUE(workbook::is_learner_test(real_lab("01").learner_files[1]));
  EXPECT_FALSE(workbook::is_learner_test(real_lab("01").learner_files[0]));
  EXPECT_EQ(real_lab("02").prerequisites, (std::vector<std::string>{"00", "01"}));
}

TEST(LabRegistry, ALabWithRanksRunsUnderMpiexecOnItsLargestNumber) {
  EXPECT_EQ(real_lab("14").ranks, (std::vector<int>{1, 2, 4}));
  const auto [program, args] = real_lab("14").command("build/bin/test-lab14-learner", {"--x"});
  EXPECT_EQ(program, "mpiexec");
  ASSERT_GE(args.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + 3),
            (std::vector<std::string>{"-n", "4", "--oversubscribe"}));
  EXPECT_EQ(std::vector<std::string>(args.end() - 2, args.end()),
            (std::vector<std::string>{"build/bin/test-lab14-learner", "--x"}));
  const auto [plain, plain_args] = real_lab("01").command("build/bin/test-lab01-learner", {"--x"});
  EXPECT_EQ(plain, "build/bin/test-lab01-learner");
  EXPECT_EQ(plain_args, (std::vector<std::string>{"--x"}));
  // A number of ranks that is not a small positive integer is refused, naming the lab.
  std::string text = read(fs::path(MINIMODEL_SOURCE_DIR) / "labs" / "labs.json");
  const std::string ranks = "\"ranks\": [";
  ASSERT_NE(text.find(ranks), std::string::npos);
  for (const std::string bad : {"1e300, ", "-1, ", "0, ", "65, ", "\"4\", "}) {
    std::string broken = text;
    broken.insert(broken.find(ranks) + ranks.size(), bad);
    EXPECT_THROW(
        try { workbook::parse_registry(broken); } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("lab 14: ranks"), std::string::npos) << e.what();
          throw;
        },
        std::runtime_error)
        << bad;
  }
}

TEST(LabRegistry, HintsAreTheHintSubsectionsOfTheLabTextInOrder) {
  const auto hints = workbook::hints_in(
      workbench::read_file(fs::path(MINIMODEL_SOURCE_DIR) / real_lab("00").text));
  ASSERT_EQ(hints.size(), 4u);
  EXPECT_EQ(hints[0].text.rfind("Do the paper derivation completely", 0), 0u) << hints[0].text;
  EXPECT_NE(hints[3].text.find("Block B, in order"), std::string::npos) << hints[3].text;
  EXPECT_EQ(hints[3].text.find("## Next lab"), std::string::npos);
  EXPECT_EQ(hints[1].block, "A");
  EXPECT_EQ(hints[3].block, "B");
  // A heading inside a code block is not a hint; a heading may leave out its block.
  const auto parsed = workbook::hints_in(
      "## Hints\n\n```\n### Hint 9\n```\n### Hint 1\n\nlook\n### Hint 2 (Block C)\nsee\n## Next\n");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].text, "look");
  EXPECT_EQ(parsed[0].block, "");
  EXPECT_EQ(parsed[1].text, "see");
  EXPECT_EQ(parsed[1].block, "C");
}

TEST(LabRegistry, AFailingTestPointsToItsBlock) {
  const workbook::Lab& lab = real_lab("00");
  EXPECT_EQ(lab.block_for("Softmax.IsStableForLargeLogits", "max |actual - expected| = nan"), "A");
  EXPECT_EQ(lab.block_for("SingleHeadAttention.MaskedKeysGetZeroWeight", "…"), "B");
  EXPECT_EQ(lab.block_for("Anything.Else", "threw: TODO(lab 00, Block B): implement …"), "B");
  EXPECT_EQ(lab.block_for("Anything.Else", "…"), "");
}

TEST(LabRegistry, NormalisesLabNumbers) {
  EXPECT_EQ(workbook::normalise_lab_number("7"), "07");
  EXPECT_EQ(workbook::normalise_lab_number("01"), "01");
  EXPECT_FALSE(workbook::normalise_lab_number("x1"));
  EXPECT_FALSE(workbook::normalise_lab_number("123"));
  EXPECT_EQ(workbook::todo_in("C++ exception \"TODO(lab 02, Block A): build\""),
            std::make_pair(std::string("02"), std::string("A")));
}

TEST(BreakPredictions, ABlockNamesThatBlocksTestsAndItsLetterNoOthers) {
  // "Block A": the "A" after "block" is the block's letter, not a piece of a test name (every
  // test whose name holds a capital A was counted before).
  const workbook::Lab& lab = real_lab("12");
  for (const workbook::Block& block : lab.blocks) {
    const std::set<std::string> expected(block.tests.begin(), block.tests.end());
    EXPECT_EQ(workbook::predicted_tests(lab, "Block " + block.id), expected) << block.id;
    EXPECT_EQ(workbook::predicted_tests(lab, "block " + block.id + " only"), expected) << block.id;
  }
  // A name after the block still counts.
  std::set<std::string> a_and_decode(lab.blocks.front().tests.begin(),
                                     lab.blocks.front().tests.end());
  for (const std::string& test : lab.test_names())
    if (test.find("Decode") != std::string::npos) a_and_decode.insert(test);
  EXPECT_EQ(workbook::predicted_tests(lab, "Block A, Decode"), a_and_decode);
  EXPECT_TRUE(workbook::predicted_tests(lab, "none").empty());
}

// ---- One-line summaries of a failure, from GoogleTest 1.12's own failure texts ------------------
// Each text is what a test program's --gtest_output=json report held for a failing assertion of
// that kind (a scratch program of such assertions, run with GoogleTest 1.12).

std::string summary_of(const std::string& failure) {
  return workbook::parse_failure("Suite.Test", failure).summary;
}

TEST(LearnerTests, AnEqualityFailureKeepsBothValues) {
  EXPECT_EQ(summary_of("tests/lab01_test.cpp:34\nExpected equality of these values:\n"
                       "  mha.d_head()\n    Which is: 3\n  4u\n    Which is: 4"),
            "mha.d_head() (3) != 4u (4)");
  EXPECT_EQ(summary_of("t.cpp:6\nExpected equality of these values:\n  mha.n_heads()\n"
                       "    Which is: 3\n  4"),
            "mha.n_heads() (3) != 4");
  EXPECT_EQ(summary_of("t.cpp:7\nExpected equality of these values:\n  4\n  mha.n_heads()\n"
                       "    Which is: 3"),
            "4 != mha.n_heads() (3)");
  EXPECT_EQ(summary_of("r.cpp:9\nExpected equality of these values:\n  mha.shape()\n"
                       "    Which is: { 2, 4, 5, 6 }\n  (std::array<std::size_t, 4>{2, 4, 5, 5})\n"
                       "    Which is: { 2, 4, 5, 5 }"),
            "mha.shape() ({ 2, 4, 5, 6 }) != (std::array<std::size_t, 4>{2, 4, 5, 5}) "
            "({ 2, 4, 5, 5 })");
  // The test's own message follows; the trace stays in the details.
  const workbook::TestFailure count = workbook::parse_failure(
      "GPT2Attention.ParameterCount",
      "r.cpp:10\nExpected equality of these values:\n  attn.parameter_count()\n"
      "    Which is: 99\n  4 * d * d + 4 * d\n    Which is: 288\nd_model 8\n"
      "Google Test trace:\nr.cpp:10: d_model 8");
  EXPECT_EQ(count.summary, "attn.parameter_count() (99) != 4 * d * d + 4 * d (288); d_model 8");
  EXPECT_EQ(count.details.back(), "trace: d_model 8");
  // A multi-line string's diff is left out; the message after it is kept.
  EXPECT_EQ(summary_of("r.cpp:17\nExpected equality of these values:\n  s\n    Which is: "
                       "\"a\\nb\"\n  \"a\\nc\"\nWith diff:\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\n"
                       "after diff"),
            "s (\"a\\nb\") != \"a\\nc\"; after diff");
  // A long value is cut so that the other operand still shows, on one line within the cap.
  const std::string long_one = summary_of(
      "r.cpp:18\nExpected equality of these values:\n  s\n"
      "    Which is: \"" +
      std::string(300, 'x') + "\"\n  \"y\"");
  EXPECT_LE(long_one.size(), 240u);
  EXPECT_EQ(long_one.find('\n'), std::string::npos);
  EXPECT_NE(long_one.find("...) != \"y\""), std::string::npos) << long_one;
}

TEST(LearnerTests, ComparisonNearBoolAndThrowFailuresKeepTheirValues) {
  EXPECT_EQ(summary_of("r.cpp:11\nExpected: (lowest) > (0.0f), actual: 0 vs 0\n"
                       "the last key is visible"),
            "expected lowest > 0.0f, got 0 vs 0; the last key is visible");
  EXPECT_EQ(summary_of("t.cpp:13\nExpected: (a) != (3), actual: 3 vs 3"),
            "expected a != 3, got 3 vs 3");
  EXPECT_EQ(summary_of("r.cpp:12\nThe difference between w and 1.0f is 0.5, which exceeds 1e-5, "
                       "where\nw evaluates to 0.5,\n1.0f evaluates to 1, and\n"
                       "1e-5 evaluates to 1.0000000000000001e-05."),
            "|w - 1.0f| = 0.5 > 1e-5: w = 0.5, 1.0f = 1");
  EXPECT_EQ(summary_of("r.cpp:13\nValue of: all_close(1, 2, 1e-3)\n  Actual: true\n"
                       "Expected: false\nthe seeds give other weights"),
            "all_close(1, 2, 1e-3) is true; the seeds give other weights");
  EXPECT_EQ(summary_of("t.cpp:18\nValue of: ok\n  Actual: false\nExpected: true"), "ok is false");
  EXPECT_EQ(summary_of("r.cpp:15\nExpected: n += 1 throws an exception of type "
                       "std::invalid_argument.\n  Actual: it throws nothing."),
            "n += 1 should throw std::invalid_argument: it throws nothing");
  EXPECT_EQ(summary_of("r.cpp:14\nExpected: throw std::runtime_error(\"not yet\") throws an "
                       "exception of type std::invalid_argument.\n  Actual: it throws "
                       "std::runtime_error with description \"not yet\"."),
            "throw std::runtime_error(\"not yet\") should throw std::invalid_argument: it throws "
            "std::runtime_error with description \"not yet\"");
  // Unchanged: our checks' "Actual: false (…)", an exception, FAIL() with a message.
  EXPECT_EQ(summary_of("r.cpp:16\nValue of: close(a, b)\n  Actual: false (max |actual - "
                       "expected| = 0.5 at (1, 2), tolerance 1e-06)\nExpected: true"),
            "max |actual - expected| = 0.5 at (1, 2), tolerance 1e-06");
  EXPECT_EQ(summary_of("unknown file\nC++ exception with description \"TODO(lab 01, Block A): "
                       "do it\" thrown in the test body."),
            "threw: TODO(lab 01, Block A): do it");
  EXPECT_EQ(summary_of("t.cpp:24\nFailed\nTODO: write the test"), "TODO: write the test");
}

// ---- Scanners of unbounded text: a line of 100,000 characters crashes no scanner ---------------
// libstdc++'s std::regex recurses once per character, so each of these segfaulted on such a line
// (issue 26: one long template error, a test printing 40,000 characters before crashing).

const std::string kHugeLine(100000, 'x');

TEST(OutputScanners, FirstErrorFindsAnErrorOnOrAfterAHugeLine) {
  const workbook::Workspace ws{"/repo", "/repo/build"};
  // A template error's message of 100,000 characters: the error is found, its message kept.
  const std::string huge_error =
      workbook::first_error("/repo/src/a.cpp:12:5: error: " + kHugeLine, ws);
  EXPECT_EQ(huge_error.rfind("src/a.cpp:12:5: error: xxx", 0), 0u) << huge_error.substr(0, 80);
  EXPECT_EQ(huge_error.size(), std::string("src/a.cpp:12:5: error: ").size() + kHugeLine.size());
  // A huge line of chatter, then the error and its source excerpt.
  EXPECT_EQ(workbook::first_error(kHugeLine +
                                      "\n/repo/src/b.cpp:3: fatal error: x.hpp: No such file\n"
                                      "    3 | #include \"x.hpp\"\n      |          ^~~~~~~\n" +
                                      kHugeLine,
                                  ws),
            "src/b.cpp:3: fatal error: x.hpp: No such file\n    3 | #include \"x.hpp\"\n"
            "      |          ^~~~~~~");
  EXPECT_EQ(workbook::progress_of(kHugeLine), "");
  EXPECT_EQ(workbook::progress_of("[ 45%] Building CXX object "
                                  "tests/CMakeFiles/lab01_test_objects.dir/lab01_test.cpp.o"),
            "[ 45%] compiling lab01_test.cpp");
}

// Compiler output captured from g++ 12 and clang 14 (Debian bookworm) on two small files in /repo,
// compiled with the workbook's warning flags, trimmed: template argument lists cut to "…", most
// of the candidate notes left out. view_range.cpp holds lab 13's learner's mistake, a const range
// in a view:
//   6  const auto rows = xt::range(b * T, (b + 1) * T);
//   7  return xt::view(x, rows, xt::all());
// view_helper.cpp the same lines (8 and 9) in a function template rows_of, called on line 11.

const std::string kGxxConstRangeInAView = R"(In file included from /repo/src/view_range.cpp:3:
/usr/include/xtensor/xview.hpp: In instantiation of ‘xt::xview<CT, S>::xview(std::false_type, CTA&&, FSL&&, SL&& ...) [with CTA = …]’:
/usr/include/xtensor/xview.hpp:884:11:   required from ‘xt::xview<CT, S>::xview(CTA&&, FSL&&, SL&& ...) [with CTA = …]’
/usr/include/xtensor/xview.hpp:1774:20:   required from ‘auto xt::detail::make_view_impl(E&&, std::index_sequence<I ...>, S&& ...) [with E = …]’
/usr/include/xtensor/xview.hpp:1792:38:   required from ‘auto xt::view(E&&, S&& ...) [with E = …; S = {const xrange_adaptor<long int, long int, placeholders::xtuph>&, xall_tag}]’
/repo/src/view_range.cpp:7:18:   required from here
/usr/include/xtensor/xview.hpp:906:11: error: no matching function for call to ‘std::tuple<const xt::xrange_adaptor<long int, long int, xt::placeholders::xtuph>, xt::xall<long unsigned int> >::tuple(xt::xrange<long int>, xt::xall<long unsigned int>)’
  906 |           m_slices(std::forward<FSL>(first_slice), std::forward<SL>(slices)...),
      |           ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
In file included from /usr/include/c++/12/functional:54,
                 from /usr/include/xtensor/xbuffer_adaptor.hpp:14,
                 from /usr/include/xtensor/xtensor.hpp:19,
                 from /repo/src/view_range.cpp:2:
/usr/include/c++/12/tuple:1259:9: note: candidate: ‘template<class _Alloc, class _U1, class _U2, …> std::tuple<_T1, _T2>::tuple(std::allocator_arg_t, const _Alloc&, std::pair<_U1, _U2>&&) [with …]’
 1259 |         tuple(allocator_arg_t __tag, const _Alloc& __a, pair<_U1, _U2>&& __in)
      |         ^~~~~
/usr/include/c++/12/tuple:1259:9: note:   template argument deduction/substitution failed:
/usr/include/xtensor/xtensor.hpp:555:30:   required from ‘xt::xtensor_container<EC, N, L, Tag>::xtensor_container(const xt::xexpression<E>&) [with E = …]’
/repo/src/view_range.cpp:7:18:   required from here
/usr/include/xtensor/xslice.hpp:873:16: error: invalid ‘static_cast’ from type ‘const xt::xrange_adaptor<long int, long int, xt::placeholders::xtuph>’ to type ‘std::size_t’ {aka ‘long unsigned int’}
  873 |         return static_cast<std::size_t>(s);
      |                ^~~~~~~~~~~~~~~~~~~~~~~~~~~
)";

const std::string kGxxConstRangeInATemplate = R"(In file included from /repo/src/view_helper.cpp:3:
/usr/include/xtensor/xview.hpp: In instantiation of ‘xt::xview<CT, S>::xview(std::false_type, CTA&&, FSL&&, SL&& ...) [with CTA = …]’:
/usr/include/xtensor/xview.hpp:884:11:   required from ‘xt::xview<CT, S>::xview(CTA&&, FSL&&, SL&& ...) [with CTA = …]’
/usr/include/xtensor/xview.hpp:1774:20:   required from ‘auto xt::detail::make_view_impl(E&&, std::index_sequence<I ...>, S&& ...) [with E = …]’
/usr/include/xtensor/xview.hpp:1792:38:   required from ‘auto xt::view(E&&, S&& ...) [with E = …]’
/repo/src/view_helper.cpp:8:18:   required from ‘xt::xtensor<float, 2> rows_of(const E&, std::size_t, std::size_t) [with E = xt::xtensor_container<xt::uvector<float, std::allocator<float> >, 2, xt::layout_type::row_major, xt::xtensor_expression_tag>; std::size_t = long unsigned int]’
/repo/src/view_helper.cpp:11:82:   required from here
/usr/include/xtensor/xview.hpp:906:11: error: no matching function for call to ‘std::tuple<const xt::xrange_adaptor<long int, long int, xt::placeholders::xtuph>, xt::xall<long unsigned int> >::tuple(xt::xrange<long int>, xt::xall<long unsigned int>)’
  906 |           m_slices(std::forward<FSL>(first_slice), std::forward<SL>(slices)...),
      |           ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
)";

// clang defers the view's instantiation, so its first error's notes stop inside xview.hpp; the next
// error's notes reach the learner's line.
const std::string kClangConstRangeInAView = R"(In file included from /repo/src/view_range.cpp:3:
/usr/include/xtensor/xview.hpp:906:11: error: no matching constructor for initialization of 'xt::xview<…>::slice_type' (aka 'tuple<const xt::xrange_adaptor<long, long, xt::placeholders::xtuph>, xt::xall<unsigned long>>')
          m_slices(std::forward<FSL>(first_slice), std::forward<SL>(slices)...),
          ^        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/usr/include/xtensor/xview.hpp:879:11: note: in instantiation of function template specialization 'xt::xview<…>::xview<…>' requested here
        : xview(
          ^
/usr/include/xtensor/xview.hpp:1774:20: note: in instantiation of function template specialization 'xt::xview<…>::xview<…>' requested here
            return view_type(std::forward<E>(e),
                   ^
/usr/bin/../lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/tuple:1063:2: note: candidate constructor template not viable: no known conversion from 'xt::xrange<long>' to 'const const xt::xrange_adaptor<long, long, xt::placeholders::xtuph>' for 1st argument
        tuple(const _T1& __a1, const _T2& __a2)
        ^
In file included from /repo/src/view_range.cpp:2:
In file included from /usr/include/xtensor/xtensor.hpp:20:
/usr/include/xtensor/xslice.hpp:873:16: error: cannot convert 'const xt::xrange_adaptor<long, long, xt::placeholders::xtuph>' to 'std::size_t' (aka 'unsigned long') without a conversion operator
        return static_cast<std::size_t>(s);
               ^~~~~~~~~~~~~~~~~~~~~~~~~~~
/usr/include/xtensor/xview.hpp:1313:41: note: in instantiation of function template specialization 'xt::value<xt::xrange_adaptor<long, long, xt::placeholders::xtuph>, int>' requested here
/usr/include/xtensor/xtensor.hpp:555:24: note: in instantiation of function template specialization 'xt::xsemantic_base<…>::assign<…>' requested here
        semantic_base::assign(e);
                       ^
/repo/src/view_range.cpp:7:10: note: in instantiation of function template specialization 'xt::xtensor_container<…>::xtensor_container<…>' requested here
  return xt::view(x, rows, xt::all());
         ^
2 errors generated.
)";

const std::string kClangConstRangeInATemplate =
    R"(In file included from /repo/src/view_helper.cpp:3:
/usr/include/xtensor/xview.hpp:906:11: error: no matching constructor for initialization of 'xt::xview<…>::slice_type' (aka 'tuple<const xt::xrange_adaptor<long, long, xt::placeholders::xtuph>, xt::xall<unsigned long>>')
          m_slices(std::forward<FSL>(first_slice), std::forward<SL>(slices)...),
          ^        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/usr/include/xtensor/xview.hpp:879:11: note: in instantiation of function template specialization 'xt::xview<…>::xview<…>' requested here
        : xview(
          ^
/usr/include/xtensor/xview.hpp:1774:20: note: in instantiation of function template specialization 'xt::xview<…>::xview<…>' requested here
            return view_type(std::forward<E>(e),
                   ^
/repo/src/view_helper.cpp:11:75: note: in instantiation of function template specialization 'rows_of<xt::xtensor_container<xt::uvector<float>, 2, xt::layout_type::row_major>>' requested here
xt::xtensor<float, 2> first_rows(const xt::xtensor<float, 2>& x) { return rows_of(x, 0, 2); }
                                                                          ^
)";

TEST(OutputScanners, AnErrorInALibraryHeaderAlsoNamesTheRepositoryLineItComesFrom) {
  const workbook::Workspace ws{"/repo", "/repo/build"};
  const std::string origin =
      ": the error above, in a file outside the repository, comes from this line";
  // g++: the chain above the error, innermost first; its innermost line in the repository.
  EXPECT_EQ(workbook::first_error(kGxxConstRangeInAView, ws),
            "/usr/include/xtensor/xview.hpp:906:11: error: no matching function for call to "
            "‘std::tuple<const xt::xrange_adaptor<long int, long int, xt::placeholders::xtuph>, "
            "xt::xall<long unsigned int> >::tuple(xt::xrange<long int>, xt::xall<long unsigned "
            "int>)’\n"
            "  906 |           m_slices(std::forward<FSL>(first_slice), "
            "std::forward<SL>(slices)...),\n"
            "      |           "
            "^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
            "src/view_range.cpp:7:18" +
                origin);
  auto last_line = [](const std::string& text) { return text.substr(text.rfind('\n') + 1); };
  EXPECT_EQ(last_line(workbook::first_error(kGxxConstRangeInATemplate, ws)),
            "src/view_helper.cpp:8:18" + origin)
      << "the line in the template, not the call of the template";
  // clang: the notes below the error, or the next error's when its own stop in the header.
  EXPECT_EQ(last_line(workbook::first_error(kClangConstRangeInAView, ws)),
            "src/view_range.cpp:7:10" + origin);
  EXPECT_EQ(last_line(workbook::first_error(kClangConstRangeInATemplate, ws)),
            "src/view_helper.cpp:11:75" + origin);
  // A 100,000-character instantiation line (only its head is scanned) hides nothing.
  std::string huge = kGxxConstRangeInATemplate;
  huge.insert(huge.find("’:\n"), kHugeLine);
  huge.insert(huge.find("’\n/repo/src/view_helper.cpp:11:82"), kHugeLine);
  EXPECT_EQ(last_line(workbook::first_error(huge, ws)), "src/view_helper.cpp:8:18" + origin);
  // Nothing in the repository, and an error in the repository: no such line.
  const std::string outside =
      "/usr/include/a.hpp:3:1: error: x\n/usr/include/b.hpp:9:2:   "
      "required from here\n/usr/include/c.hpp:1:1: note: in "
      "instantiation of 'f' requested here\n";
  EXPECT_EQ(workbook::first_error(outside, ws), "/usr/include/a.hpp:3:1: error: x");
  EXPECT_EQ(workbook::first_error("/repo/src/a.cpp:3:1: error: x\n/repo/src/b.cpp:9:2:   required "
                                  "from here\n",
                                  ws),
            "src/a.cpp:3:1: error: x");
}

// A narrowing brace initialisation (the learner's `Vector<float> merged({d})`, a one-element
// vector holding d): g++ warns (twice), clang stops with an error.
const std::string kGxxNarrowing =
    R"(/repo/src/minimodel/attention/scaled_dot_product.cpp: In function ‘Vector<float> merged_of(std::size_t)’:
/repo/src/minimodel/attention/scaled_dot_product.cpp:8:25: warning: narrowing conversion of ‘d’ from ‘std::size_t’ {aka ‘long unsigned int’} to ‘float’ [-Wnarrowing]
    8 |   Vector<float> merged({d});
      |                         ^
/repo/src/minimodel/attention/scaled_dot_product.cpp:8:25: warning: narrowing conversion of ‘d’ from ‘std::size_t’ {aka ‘long unsigned int’} to ‘float’ [-Wnarrowing]
)";
const std::string kClangNarrowing =
    R"(/repo/src/minimodel/attention/scaled_dot_product.cpp:8:25: error: non-constant-expression cannot be narrowed from type 'std::size_t' (aka 'unsigned long') to 'float' in initializer list [-Wc++11-narrowing]
  Vector<float> merged({d});
                        ^
/repo/src/minimodel/attention/scaled_dot_product.cpp:8:25: note: insert an explicit cast to silence this issue
  Vector<float> merged({d});
                        ^
                        static_cast<float>( )
/repo/src/minimodel/attention/scaled_dot_product.cpp:8:25: warning: implicit conversion from 'std::size_t' (aka 'unsigned long') to 'const float' may lose precision [-Wimplicit-int-float-conversion]
  Vector<float> merged({d});
                       ~^
1 warning and 1 error generated.
)";

TEST(OutputScanners, ANarrowingWarningInTheLearnersFileIsShownOnceWithTheLog) {
  const workbook::Workspace ws{"/repo", "/repo/build"};
  const std::string narrowing =
      "src/minimodel/attention/scaled_dot_product.cpp:8:25: warning: narrowing conversion of ‘d’ "
      "from ‘std::size_t’ {aka ‘long unsigned int’} to ‘float’ [-Wnarrowing]";
  // Once, though g++ printed it twice; a huge line hides nothing.
  const std::string output = "[ 40%] Building CXX object src/CMakeFiles/x.dir/a.cpp.o\n" +
                             kGxxNarrowing + "/usr/include/xtensor/x.hpp:1:2: warning: w\n" +
                             kHugeLine + "\n/repo/workbench/util/text.cpp:3:4: warning: v [-Wx]\n";
  EXPECT_EQ(workbook::compiler_warnings(output, ws),
            (std::vector<std::string>{narrowing, "/usr/include/xtensor/x.hpp:1:2: warning: w",
                                      "workbench/util/text.cpp:3:4: warning: v [-Wx]"}));
  // g++ 12 in lab 00's stub (`xt::xtensor<float, 1> merged({T})`, T a const std::size_t) says it
  // twice in other words: once too.
  const std::string in_lab00 =
      R"(/repo/src/minimodel/attention/scaled_dot_product.cpp:46:33: warning: narrowing conversion of ‘(std::size_t)T’ from ‘std::size_t’ {aka ‘long unsigned int’} to ‘float’ [-Wnarrowing]
   46 |   xt::xtensor<float, 1> merged({T});  // meant: T zeros
      |                                 ^
/repo/src/minimodel/attention/scaled_dot_product.cpp:46:33: warning: narrowing conversion of ‘T’ from ‘const std::size_t’ {aka ‘const long unsigned int’} to ‘float’ [-Wnarrowing]
)";
  EXPECT_EQ(workbook::compiler_warnings(in_lab00, ws),
            std::vector<std::string>{workbench::split_lines(in_lab00)[0].substr(6)});
  EXPECT_EQ(workbook::compiler_warnings(kClangNarrowing, ws),
            std::vector<std::string>{
                "src/minimodel/attention/scaled_dot_product.cpp:8:25: warning: implicit conversion "
                "from 'std::size_t' (aka 'unsigned long') to 'const float' may lose precision "
                "[-Wimplicit-int-float-conversion]"});
  EXPECT_EQ(workbook::first_error(kClangNarrowing, ws),
            "src/minimodel/attention/scaled_dot_product.cpp:8:25: error: non-constant-expression "
            "cannot be narrowed from type 'std::size_t' (aka 'unsigned long') to 'float' in "
            "initializer list [-Wc++11-narrowing]");

  // check shows the learner's file's warning, in two lines, and never a header's or the
  // workbench's.
  workbook::Context ctx{ws, real_labs(), false};
  workbook::BuildResult build;
  build.ok = true;
  build.log = "/repo/build/workbook-build.log";
  build.warnings = workbook::compiler_warnings(output, ws);
  auto printed = [&](const std::string& lab) {
    testing::internal::CaptureStdout();
    workbook::print_learner_warnings(ctx, real_lab(lab), build);
    return testing::internal::GetCapturedStdout();
  };
  const std::string once = "  " + narrowing +
                           "\n  (the compiler's only warning in your files; full build output: "
                           "build/workbook-build.log)\n";
  EXPECT_EQ(printed("00"), once);
  EXPECT_EQ(printed("01"), printed("00")) << "lab 00 is lab 01's prerequisite";
  EXPECT_EQ(printed("12"), "") << "lab 12 has none of these files";
  // A compiler cache replays the warning of the same file compiled in another checkout.
  const workbook::BuildResult here = build;
  build.warnings = {"/work/other/repo/" + narrowing};
  EXPECT_EQ(printed("00"), once);
  build = here;
  build.warnings.insert(build.warnings.begin(),
                        "src/minimodel/attention/scaled_dot_product.cpp:"
                        "2:1: warning: " +
                            kHugeLine);
  const std::string two = printed("00");
  EXPECT_EQ(two.rfind("  src/minimodel/attention/scaled_dot_product.cpp:2:1: warning: xxx", 0), 0u)
      << two.substr(0, 400);
  EXPECT_NE(two.find("xxx...\n  (the first of 2 compiler warnings in your files; "),
            std::string::npos)
      << two.substr(0, 400);
  EXPECT_LT(two.size(), 400u) << "a long warning is cut";
  // … between two characters: 237 bytes of the path and "‘" (3 bytes) end inside the quote.
  const std::string head = "src/minimodel/attention/scaled_dot_product.cpp:2:1: warning: ";
  build.warnings = {head + std::string(237 - head.size() - 1, 'y') + "‘" + kHugeLine};
  EXPECT_EQ(printed("00").substr(0, 2 + 236 + 4),
            "  " + build.warnings[0].substr(0, 236) + "...\n");
}

TEST(OutputScanners, AFailureTextWithAHugeLineIsSummarisedWithinTheCap) {
  for (const std::string& failure :
       {"t.cpp:1\n" + kHugeLine, "t.cpp:1\nExpected: (a) < (b), actual: " + kHugeLine + " vs 1",
        "t.cpp:1\nValue of: ok\n  Actual: false\nExpected: true\n" + kHugeLine,
        "t.cpp:1\nFailed\nx\nGoogle Test trace:\nt.cpp:2: " + kHugeLine,
        "unknown file\nC++ exception with description \"" + kHugeLine + "\" thrown"}) {
    const workbook::TestFailure parsed = workbook::parse_failure("Suite.Test", failure);
    EXPECT_LE(parsed.summary.size(), 240u);
    EXPECT_FALSE(parsed.summary.empty());
  }
}

TEST(OutputScanners, ATestsHugeOutputLineHidesNeitherTheTestNorTheSanitizersFinding) {
  const workbook::Workspace ws{"/repo", "/repo/build"};
  const std::string output =
      "[ RUN      ] Softmax.RowsSumToOne\n[       OK ] Softmax.Rows\n"
      "[ RUN      ] Mask.Causal\n" +
      kHugeLine + "\n[ RUN      ] " + kHugeLine + "x\n" + kHugeLine +
      "\n/repo/src/m.cpp:17:9: runtime error: load of null pointer\n" + "SUMMARY: " + kHugeLine +
      "\n";
  EXPECT_EQ(workbook::last_test_started(output), kHugeLine + "x");
  EXPECT_EQ(workbook::last_test_started("[ RUN      ] A.B\n" + kHugeLine), "A.B");
  EXPECT_EQ(workbook::sanitizer_finding(output, ws), ": load of null pointer at src/m.cpp:17");
  EXPECT_EQ(workbook::sanitizer_finding(kHugeLine +
                                            "\nSUMMARY: AddressSanitizer: "
                                            "heap-buffer-overflow /repo/src/m.cpp:17:3 in f(int)\n",
                                        ws),
            ": AddressSanitizer: heap-buffer-overflow at src/m.cpp:17 in f");
  EXPECT_FALSE(workbook::todo_in(kHugeLine + " TODO(lab 01, Block ) TODO(lab 1"));
  EXPECT_EQ(workbook::todo_in(kHugeLine + "TODO(lab 03, Block C): write it"),
            std::make_pair(std::string("03"), std::string("C")));
}

TEST(OutputScanners, ARegistryNestedDeeperThanTheBoundIsRefusedNotACrash) {
  const std::string deep = std::string(500000, '[') + std::string(500000, ']');
  try {
    workbook::parse_registry("{\"layout\": {}, \"labs\": " + deep + "}");
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 64 levels deep"), std::string::npos)
        << e.what();
  }
  // The same registry's text, read as load_registry reads it.
  EXPECT_EQ(
      workbook::parse_registry(read(fs::path(MINIMODEL_SOURCE_DIR) / "labs" / "labs.json")).size(),
      real_labs().size());
}

// ---- What `workbook diff` compares: the outputs each block produces ----------------------------
// Each lab's reference verify program, run with --dump into a scratch folder, names in
// outputs.json every output it records (run.record), with the block whose code produced it.

// Runs lab `lab`'s reference verify program with --dump into a scratch folder; its outputs.json,
// and the artifacts its manifest lists in `artifacts`.
nlohmann::json recorded_outputs(const workbook::Lab& lab,
                                std::vector<std::string>* artifacts = nullptr) {
  const std::string target = lab.target("verify", "reference");
  const fs::path program = fs::path(MINIMODEL_BIN_DIR) / target;
  if (!fs::exists(program))
    throw std::runtime_error(program.string() + " is missing: cmake --build build --target " +
                             target);
  const fs::path dir = fs::temp_directory_path() /
                       ("verify_outputs_lab" + lab.number + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  // As the workbook runs it: a lab with ranks under mpiexec (Lab::command).
  const auto [command, args] = lab.command(
      program.string(), {"--out", (dir / "out").string(), "--dump", (dir / "dump").string()});
  const workbench::CapturedRun run = workbench::run_captured(command, args);
  const nlohmann::json outputs =
      run.status.ok() ? nlohmann::json::parse(read(dir / "dump" / "outputs.json"), nullptr, false)
                      : nlohmann::json();
  if (artifacts) {
    const auto manifest =
        nlohmann::json::parse(read(dir / "out" / "manifest.json"), nullptr, false);
    if (manifest.is_object() && manifest.contains("artifacts"))
      *artifacts = manifest["artifacts"].get<std::vector<std::string>>();
  }
  fs::remove_all(dir);
  if (!outputs.is_object())
    throw std::runtime_error(target + " failed (" + run.status.describe() +
                             ") or wrote no outputs.json:\n" + run.output);
  return outputs;
}

// `workbook diff` runs both verify programs with --dump: they stop after their last record, so
// that diff takes a second, not the minute of lab 07's timings or lab 10's training.
TEST(VerifyOutputs, ADumpRunStopsAfterItsLastRecordBeforeTimingsAndTraining) {
  const std::map<std::string, std::string> slow_artifact = {
      {"07", "time_vs_T.png"}, {"08", "time_per_token.png"}, {"10", "loss_log.csv"}};
  for (const auto& [number, artifact] : slow_artifact) {
    std::vector<std::string> artifacts;
    recorded_outputs(real_lab(number), &artifacts);
    EXPECT_FALSE(artifacts.empty()) << "lab " << number << ": no manifest";
    EXPECT_EQ(std::count(artifacts.begin(), artifacts.end(), artifact), 0)
        << "lab " << number << "'s --dump run went on to " << artifact;
  }
}

TEST(VerifyOutputs, Lab09RecordsEveryOutputOfEveryBlock) {
  const nlohmann::json outputs = recorded_outputs(real_lab("09"));
  std::map<std::string, std::string> expected = {
      {"softmax_backward", "A"},      {"attention_forward", "A"},
      {"attention_backward_dq", "A"}, {"attention_backward_dk", "A"},
      {"attention_backward_dv", "A"}, {"mha_forward", "B"},
      {"layer_norm_forward", "C"},    {"layer_norm_backward_dx", "C"},
      {"post_ln_block_forward", "C"}, {"pre_ln_block_forward", "C"}};
  for (const std::string grad :
       {"dx", "dw_q", "dw_k", "dw_v", "dw_o", "db_q", "db_k", "db_v", "db_o"}) {
    expected["mha_backward_" + grad] = "B";
    expected["post_ln_block_backward_" + grad] = "C";
    expected["pre_ln_block_backward_" + grad] = "C";
  }
  for (const auto& [name, block] : expected) {
    ASSERT_TRUE(outputs.contains(name)) << name << " is not recorded";
    EXPECT_EQ(outputs[name].value("block", ""), block) << name;
  }
}

TEST(VerifyOutputs, EveryBlockOfEveryLabRecordsAnOutputOfThatBlock) {
  // Lab 01's Block D is the learner's own test, which produces no tensor. With --dump, the verify
  // programs of labs 07, 08 and 10 stop after their last record, before their timings and training.
  for (const workbook::Lab& lab : real_labs()) {
    const nlohmann::json outputs = recorded_outputs(lab);
    std::set<std::string> blocks, recorded;
    for (const workbook::Block& block : lab.blocks) blocks.insert(block.id);
    for (const auto& [name, info] : outputs.items()) {
      const std::string block = info.value("block", "");
      EXPECT_TRUE(blocks.count(block)) << "lab " << lab.number << "'s output " << name
                                       << " names no block of the registry: \"" << block << "\"";
      recorded.insert(block);
    }
    for (const std::string& block : blocks) {
      if (lab.number == "01" && block == "D") continue;
      EXPECT_TRUE(recorded.count(block))
          << "lab " << lab.number << " records no output of Block " << block;
    }
  }
}

// ---- The registry drives dev-check: a scratch copy of the files, no build -----------------------

class DevCheckFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    repo_ = fs::temp_directory_path() /
            ("dev_check_files_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(repo_);
    fs::create_directories(repo_);
    const fs::path source = MINIMODEL_SOURCE_DIR;
    for (const char* part :
         {"labs", "solutions", "tests", "verify", "README.md", "CMakePresets.json"})
      fs::copy(source / part, repo_ / part,
               fs::copy_options::recursive | fs::copy_options::skip_symlinks);
    fs::remove_all(repo_ / "tests" / "fixtures");  // not needed, and large
    // The learner's folders as they were handed out, never as the learner has them now: a lab in
    // progress must not fail these tests. Without git (a tarball), the working copy is pristine.
    const std::string learners = "src experiments";
    const fs::path archive = repo_ / "pristine.tar";
    const Outcome pristine =
        fs::exists(source / ".git")
            ? sh("git -C " + source.string() + " archive -o " + archive.string() + " " +
                 workbook::pristine_ref(source) + " -- " + learners + " && tar -xf " +
                 archive.string() + " -C " + repo_.string() + " && rm " + archive.string())
            : sh("cd " + source.string() + " && cp -R " + learners + " " + repo_.string());
    ASSERT_EQ(pristine.status, 0) << pristine.out;
  }
  void TearDown() override { fs::remove_all(repo_); }
  Outcome dev_check(const std::string& options = "") {
    return sh(std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + repo_.string() +
              " --build-dir " + (repo_ / "build").string() + " dev-check --files-only " + options);
  }
  void edit_registry(const std::function<void(nlohmann::ordered_json&)>& change) {
    auto registry = nlohmann::ordered_json::parse(read(repo_ / "labs" / "labs.json"));
    change(registry);
    write(repo_ / "labs" / "labs.json", registry.dump(2));
  }
  fs::path repo_;
};

TEST_F(DevCheckFiles, PassesOnTheRepository) {
  const Outcome check = dev_check();
  EXPECT_EQ(check.status, 0) << check.out;
  EXPECT_NE(check.out.find("pass every check on their files"), std::string::npos) << check.out;
}

TEST_F(DevCheckFiles, ANewRegistryEntryListsExactlyTheFilesTheLabLacks) {
  edit_registry([](nlohmann::ordered_json& registry) {
    registry["labs"].push_back(
        {{"number", "97"},
         {"slug", "throwaway"},
         {"title", "A throwaway lab"},
         {"concept", "nothing yet"},
         {"produces", "nothing yet"},
         {"estimated_time", "5 minutes"},
         {"prerequisites", {"00"}},
         {"learner_files", {"src/minimodel/throwaway.cpp"}},
         {"blocks", {{{"id", "A"}, {"title", "nothing"}, {"tests", nlohmann::json::array()}}}}});
  });
  auto defects_of = [](const Outcome& check) {
    std::vector<std::string> defects;
    for (const std::string& line : workbench::split_lines(check.out))
      if (line.rfind("defect: ", 0) == 0) defects.push_back(line.substr(8));
    return defects;
  };
  const std::string fix = " (`workbook dev-check --write-lab-map` writes it from labs/labs.json)";
  const Outcome before = dev_check();
  EXPECT_EQ(before.status, 1) << before.out;
  ASSERT_FALSE(defects_of(before).empty()) << before.out;
  EXPECT_EQ(defects_of(before).back(), "README.md's lab map has no row for lab 97" + fix);

  // The lab map is written, not typed; then what is left is exactly the lab's own files.
  const Outcome check = dev_check("--write-lab-map");
  EXPECT_EQ(check.status, 1) << check.out;
  EXPECT_NE(
      read(repo_ / "README.md")
          .find("| [97 — A throwaway lab](labs/97-throwaway.md) | nothing yet | nothing yet |"),
      std::string::npos);
  EXPECT_EQ(defects_of(check),
            (std::vector<std::string>{
                "lab 97 lacks labs/97-throwaway.md (its text)",
                "lab 97 lacks tests/lab97_test.cpp (its tests)",
                "lab 97 lacks verify/lab97_verify.cpp (its verify program)",
                "lab 97 lacks solutions/97-throwaway.md (its reference write-up)",
                "lab 97 lacks experiments/97-throwaway/README.md (its write-up template)",
                "lab 97 lacks labs/mutants/97-throwaway.json (its mutants)",
                "lab 97 lacks src/minimodel/throwaway.cpp (a learner stub)",
                "lab 97 lacks solutions/minimodel/throwaway.cpp (a reference file)",
            }))
      << check.out;
}

TEST_F(DevCheckFiles, TheLabTextMustAgreeWithTheRegistry) {
  edit_registry([](nlohmann::ordered_json& registry) {
    registry["labs"][1]["title"] = "Many heads";
    registry["labs"][1]["estimated_time"] = "3 days";
    registry["labs"][1]["blocks"][0]["title"] = "constructors";
    registry["labs"][1]["learner_files"].push_back("src/minimodel/attention/extra.cpp");
    registry["labs"][2]["blocks"][0]["tests"].push_back("CausalMask.DoesNotExist");
    registry["labs"][3]["blocks"][3]["tests"].push_back("GPT2Attention.OneMore");
  });
  write(repo_ / "src/minimodel/attention/extra.cpp", "");
  write(repo_ / "solutions/minimodel/attention/extra.cpp", "");
  const Outcome check = dev_check();
  EXPECT_EQ(check.status, 1) << check.out;
  for (const char* expected :
       {"labs/01-multi-head-attention.md: the first line is not \"# Lab 01 — Many heads\"",
        "\"## Estimated time\" does not start with the registry's \"3 days\"",
        "its \"### Block\" headings are Block A — the two constructors, Block B",
        "\"## Files you edit\" names src/minimodel/attention/attention.cpp, "
        "src/minimodel/attention/head_permutation_test.cpp but the registry's learner files are "
        "src/minimodel/attention/attention.cpp, src/minimodel/attention/extra.cpp, "
        "src/minimodel/attention/head_permutation_test.cpp",
        "README.md's lab map row of lab 01 is not what the registry says",
        "lab 02: the registry lists CausalMask.DoesNotExist, which tests/lab02_test.cpp does not "
        "define"})
    EXPECT_NE(check.out.find(expected), std::string::npos) << expected << "\n" << check.out;
}

TEST_F(DevCheckFiles, EachMutantMustApplyAndEachLabMustShowHowToBreakIt) {
  const fs::path catalogue = repo_ / "labs/mutants/00-attention-by-hand.json";
  auto mutants = nlohmann::ordered_json::parse(read(catalogue));
  const std::string first = mutants["mutants"][0]["name"];
  mutants["mutants"][0]["replace"] = "text the reference does not hold";
  mutants["mutants"][1]["block"] = "Z";
  while (mutants["mutants"].size() > 4) mutants["mutants"].erase(2);
  write(catalogue, mutants.dump(2) + "\n");
  std::string text = read(repo_ / "labs/02-causal-mask.md");
  const auto at = text.find("workbook break 02 ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "workbook break 02 no-such-mutant ");
  write(repo_ / "labs/02-causal-mask.md", text);
  const Outcome check = dev_check();
  EXPECT_EQ(check.status, 1) << check.out;
  for (const std::string& expected :
       {"labs/mutants/00-attention-by-hand.json: " + first +
            "'s change (\"text the reference does "
            "not hold\") occurs 0 times in solutions/minimodel/attention/scaled_dot_product.cpp, "
            "not "
            "once",
        std::string("'s block Z is not a block of the lab"),
        std::string("labs/mutants/00-attention-by-hand.json: has 4 mutants that a test must catch; "
                    "every lab needs at least 5"),
        std::string("labs/02-causal-mask.md: `workbook break 02 no-such-mutant` names no mutant of "
                    "lab 02")})
    EXPECT_NE(check.out.find(expected), std::string::npos) << expected << "\n" << check.out;
}

TEST_F(DevCheckFiles, TestsStubsPresetsAndStrayTextsAreChecked) {
  edit_registry(
      [](nlohmann::ordered_json& registry) { registry["labs"][0]["blocks"][0]["tests"].erase(0); });
  std::string stub = read(repo_ / "src/minimodel/attention/causal_mask.cpp");
  stub.replace(stub.find("TODO(lab 02, Block A)"), 21, "TODO(lab 02, Block Z)");
  write(repo_ / "src/minimodel/attention/causal_mask.cpp", stub);
  write(repo_ / "labs/98-extra.md", "# Lab 98 — Extra\n\nRun `ctest --preset learner -L lab98`.\n");
  write(repo_ / "README.md", read(repo_ / "README.md") + "\nThen `ctest --preset nonexistent`.\n");
  const Outcome check = dev_check();
  EXPECT_EQ(check.status, 1) << check.out;
  for (const char* expected :
       {"lab 00: tests/lab00_test.cpp defines Softmax.MatchesTheHandExample, which no block of the "
        "registry lists",
        "lab 02: the stubs have TODOs for blocks A, Z but the registry lists blocks A",
        "labs/98-extra.md is not the text of any lab in labs/labs.json",
        "README.md: `ctest --preset nonexistent` names no test preset of CMakePresets.json"})
    EXPECT_NE(check.out.find(expected), std::string::npos) << expected << "\n" << check.out;
}

TEST_F(DevCheckFiles, AMalformedRegistryIsAnEnvironmentErrorNamingTheFile) {
  edit_registry([](nlohmann::ordered_json& registry) { registry["labs"][0]["number"] = "0"; });
  const Outcome check = dev_check();
  EXPECT_EQ(check.status, 3) << check.out;
  EXPECT_NE(check.out.find("labs.json: lab number \"0\" is not two digits"), std::string::npos)
      << check.out;
}

using GradeWithoutABuild = DevCheckFiles;  // the same scratch copy of the files, no build folder

TEST_F(GradeWithoutABuild, JsonStillGivesADocumentThatNamesTheProblem) {
  const Outcome grade =
      sh(std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + repo_.string() + " --build-dir " +
         (repo_ / "build").string() + " grade --json 2>/dev/null");
  EXPECT_EQ(grade.status, 0) << grade.out;
  const auto report = nlohmann::json::parse(grade.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << grade.out;
  EXPECT_NE(report.value("error", "").find("is not a configured build folder"), std::string::npos)
      << grade.out;
  ASSERT_EQ(report["labs"].size(), workbook::load_registry(repo_).size());
  EXPECT_EQ(report["labs"][0]["status"], "build error");
  EXPECT_EQ(report["score"], 0.0);
}

// ---- The verbs around the learner's programs, with stand-ins ------------------------------------
//
// A build folder whose "cmake" (first on PATH) builds nothing and succeeds, and whose learner
// programs are shell scripts that crash, loop or write a report: how the verbs treat the programs
// they run, in seconds and without compiling anything.
class StandInPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "workbook_stand_ins_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "build" / "bin");
    fs::create_directories(root_ / "tools");
    write(root_ / "build" / "CMakeCache.txt", "");
    program(root_ / "tools" / "cmake", "exit 0");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void program(const fs::path& path, const std::string& body) {
    write(path, "#!/bin/sh\n" + body + "\n");
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
  }
  void learner_program(const std::string& name, const std::string& body) const {
    program(root_ / "build" / "bin" / name, body);
  }
  // `workbook <args>` with the stand-in cmake, its output (stdout and stderr) also in `log`.
  std::string command(const std::string& args, const std::string& environment = "") const {
    return "env PATH=" + (root_ / "tools").string() + ":$PATH " + environment + " " +
           std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + MINIMODEL_SOURCE_DIR +
           " --build-dir " + (root_ / "build").string() + " " + args;
  }
  Outcome workbook(const std::string& args, const std::string& environment = "") const {
    return sh(command(args, environment));
  }
  // Waits up to `seconds` for `file` to contain `text`.
  static bool wait_for(const fs::path& file, const std::string& text, int seconds = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (read(file).find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }
  // Whether `pid` runs: it exists and is no zombie.
  static bool running(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return false;
    const auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
  }
  // Starts `workbook <args>` in the background, its output in `log`.
  pid_t start(const std::string& args, const fs::path& log) const {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string line = "exec " + command(args) + " >" + log.string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }

  fs::path root_;
};

TEST_F(StandInPrograms, CheckOfABlockReportsACrashNotThatNoTestMatches) {
  for (const char* end : {"kill -SEGV $$", "exit 0", "kill -ABRT $$"}) {
    learner_program("test-lab00-learner",
                    std::string("echo '[ RUN      ] Softmax.EveryRowSumsToOne'\n") + end);
    const Outcome check = workbook("check 00 --block A");
    EXPECT_EQ(check.status, 4) << end << "\n" << check.out;
    EXPECT_EQ(check.out.find("no test of lab 00 matches"), std::string::npos) << check.out;
    EXPECT_NE(check.out.find("in Softmax.EveryRowSumsToOne"), std::string::npos) << check.out;
  }
}

TEST_F(StandInPrograms, TestsThatLoopAreStoppedAtTheirTimeLimitAsACrash) {
  learner_program("test-lab00-learner", "exec 1>&- 2>&-; exec sleep 60");
  const auto started = std::chrono::steady_clock::now();
  const Outcome check = workbook("check 00", "WORKBOOK_TIME_LIMIT=1");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_EQ(check.status, 4) << check.out;
  EXPECT_NE(check.out.find("ran past the 1 s limit"), std::string::npos) << check.out;
}

TEST_F(StandInPrograms, VerifyStopsALearnerProgramAtItsTimeLimit) {
  learner_program("verify-lab00-learner", "echo started; exec sleep 60");
  const auto started = std::chrono::steady_clock::now();
  const Outcome verify = workbook("verify 00", "WORKBOOK_TIME_LIMIT=1");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_EQ(verify.status, 4) << verify.out;
  EXPECT_NE(verify.out.find("was stopped after 1 s, its time limit"), std::string::npos)
      << verify.out;
}

TEST_F(StandInPrograms, ASanitizersStopIsACrashNotATodoStub) {
  learner_program("verify-lab00-learner",
                  "echo 'SUMMARY: AddressSanitizer: heap-buffer-overflow x.cpp:3 in f'\n"
                  "exit ${ASAN_OPTIONS##*exitcode=}");  // as a sanitizer exits with exitcode=…
  const Outcome verify = workbook("verify 00");
  EXPECT_EQ(verify.status, 4) << verify.out;
  EXPECT_NE(verify.out.find("was stopped by a sanitizer"), std::string::npos) << verify.out;
}

TEST_F(StandInPrograms, ACrashingLearnerEngineIsACrashNotBadInput) {
  const std::string options =
      "--impl learner --x x.npy --wq w.npy --wk w.npy --wv w.npy --wo w.npy --heads 1 --out y.npy";
  learner_program("attend-learner", "kill -SEGV $$");
  const Outcome crashed = workbook("attend " + options);
  EXPECT_EQ(crashed.status, 4) << crashed.out;
  EXPECT_NE(crashed.out.find("crashed with signal 11"), std::string::npos) << crashed.out;
  learner_program("attend-learner", "exit ${UBSAN_OPTIONS##*exitcode=}");
  const Outcome sanitized = workbook("attend " + options);
  EXPECT_EQ(sanitized.status, 4) << sanitized.out;
  EXPECT_NE(sanitized.out.find("a sanitizer stopped"), std::string::npos) << sanitized.out;
  learner_program("attend-learner", "exit 2");  // the engine's own bad-input status is kept
  EXPECT_EQ(workbook("attend " + options).status, 2);
}

TEST_F(StandInPrograms, ASecondCommandOnTheBuildFolderWaitsForTheFirstAndSaysSo) {
  // A test program that writes a passing report where it is told to.
  learner_program("test-lab00-learner",
                  "report=${1#--gtest_output=json:}\n"
                  "echo '{\"testsuites\": [{\"name\": \"Softmax\", \"testsuite\": [{\"name\": "
                  "\"EveryRowSumsToOne\", \"status\": \"RUN\", \"result\": \"COMPLETED\"}]}]}' "
                  "> \"$report\"");
  const fs::path lock_file = root_ / "build" / "workbook.lock";
  const int fd = open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  const std::string pid = std::to_string(getpid());
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  const fs::path log = root_ / "check.txt";
  const pid_t second = start("check 00 --block A", log);
  EXPECT_TRUE(wait_for(log, "waiting for another workbook command on ")) << read(log);
  EXPECT_NE(read(log).find("(pid " + pid + ")"), std::string::npos) << read(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(read(log).find("tests of Block A pass"), std::string::npos) << read(log);
  close(fd);  // the first command ends
  int status = 0;
  waitpid(second, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read(log);
  EXPECT_NE(read(log).find("tests of Block A pass"), std::string::npos) << read(log);
  // Each run's report has a name of its own, and none is left behind.
  for (const auto& entry : fs::directory_iterator(root_ / "build" / "workbook"))
    EXPECT_NE(entry.path().extension(), ".json") << entry.path();
}

TEST_F(StandInPrograms, CtrlCStopsWatchAndItsTestsAtOnce) {
  const fs::path test_pid = root_ / "test.pid";
  learner_program("test-lab00-learner", "echo $$ > " + test_pid.string() + "; exec sleep 300");
  const fs::path log = root_ / "watch.txt";
  const pid_t watch = start("watch --poll", log);
  ASSERT_TRUE(wait_for(test_pid, "\n")) << read(log);
  const pid_t test = std::stoi(read(test_pid));
  EXPECT_TRUE(running(test));
  const auto interrupted = std::chrono::steady_clock::now();
  kill(watch, SIGINT);
  int status = 0;
  for (int i = 0; i < 100 && waitpid(watch, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, std::chrono::seconds(5)) << read(log);
  if (waitpid(watch, &status, WNOHANG) == 0) {  // still running: a second Ctrl-C must end it
    kill(watch, SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_NE(waitpid(watch, &status, WNOHANG), 0) << "a second Ctrl-C did not end watch";
    kill(watch, SIGKILL);
    waitpid(watch, &status, 0);
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read(log);
    EXPECT_NE(read(log).find("watch stopped"), std::string::npos) << read(log);
  }
  for (int i = 0; i < 50 && running(test); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(running(test));
  if (running(test)) kill(test, SIGKILL);
}

TEST_F(StandInPrograms, CtrlCOnCheckKillsTheTestsItRuns) {
  const fs::path test_pid = root_ / "test.pid";
  learner_program("test-lab00-learner", "echo $$ > " + test_pid.string() + "; exec sleep 300");
  const pid_t check = start("check 00", root_ / "check.txt");
  ASSERT_TRUE(wait_for(test_pid, "\n"));
  const pid_t test = std::stoi(read(test_pid));
  kill(check, SIGINT);
  int status = 0;
  waitpid(check, &status, 0);
  for (int i = 0; i < 50 && running(test); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(running(test));
  if (running(test)) kill(test, SIGKILL);
}

// ---- The verbs, in a scratch copy ---------------------------------------------------------------

class WorkbookScratch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // In TMPDIR if set: .ci/run makes it a folder of its clone, so that the scratch clone's compile
    // commands, relative to it, are those of the release build and its compiler cache shares them.
    std::string pattern = (fs::temp_directory_path() / "workbook_runner_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    scratch_ = pattern;
    repo_ = scratch_ / "repo";
    const Outcome clone =
        sh("git clone --quiet " + std::string(MINIMODEL_SOURCE_DIR) + " " + repo_.string());
    ASSERT_EQ(clone.status, 0) << clone.out;
    const Outcome configure = sh("cmake -S " + repo_.string() + " -B " +
                                 (repo_ / "build").string() + " -DCMAKE_BUILD_TYPE=Release");
    ASSERT_EQ(configure.status, 0) << configure.out;
    // The learner programs of the labs the tests use, once, so that no test's time goes into
    // their first build (the verbs rebuild what changed). A test whose verb reaches every lab
    // (grade, list, watch, the current lab) first cuts the registry down to these labs with
    // keep_labs.
    std::string targets;
    for (const workbook::Lab& lab : workbook::load_registry(repo_))
      if (std::stoi(lab.number) <= kLastLabUsed)
        targets += " " + lab.target("test", "learner") + " " + lab.target("verify", "learner");
    const Outcome build =
        sh("cmake --build " + (repo_ / "build").string() + " -j 2 --target" + targets);
    ASSERT_EQ(build.status, 0) << build.out;
  }
  static void TearDownTestSuite() {
    if (!std::getenv("MINIMODEL_KEEP_SCRATCH")) fs::remove_all(scratch_);
  }
  // Each test starts from the pristine copy, so that they pass in any order (--gtest_shuffle).
  void SetUp() override {
    if (!fs::exists(repo_ / "build" / "CMakeCache.txt"))
      GTEST_SKIP() << "the scratch copy could not be set up";
    ASSERT_EQ(git("reset --quiet --hard origin/HEAD").status, 0);
    ASSERT_EQ(git("clean -fdq").status, 0);  // untracked files; build/ and backups are ignored
    fs::remove(repo_ / "build" / "workbook-state.json");
  }
  // The labs the tests below use: 00–04.
  static constexpr int kLastLabUsed = 4;

  // Cuts the scratch copy's registry down to labs 00 … last (SetUp restores it), so that a verb
  // over every lab builds only those; returns the registry as it was.
  static std::string keep_labs(int last) {
    const fs::path registry = repo_ / "labs" / "labs.json";
    const std::string all_labs = read(registry);
    nlohmann::ordered_json kept = nlohmann::ordered_json::parse(all_labs);
    kept["labs"].erase(kept["labs"].begin() + last + 1, kept["labs"].end());
    write(registry, kept.dump(2));
    return all_labs;
  }

  static void copy_reference_into_stub() {
    fs::copy_file(repo_ / reference(), repo_ / stub(), fs::copy_options::overwrite_existing);
  }

  static Outcome workbook(const std::string& args) {
    return sh(std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + repo_.string() +
              " --build-dir " + (repo_ / "build").string() + " " + args);
  }
  static Outcome git(const std::string& args) {
    return sh("git -C " + repo_.string() + " " + args);
  }

  static const char* stub() { return "src/minimodel/attention/scaled_dot_product.cpp"; }
  static const char* reference() { return "solutions/minimodel/attention/scaled_dot_product.cpp"; }

  static fs::path scratch_, repo_;
};

fs::path WorkbookScratch::scratch_, WorkbookScratch::repo_;

TEST_F(WorkbookScratch, PristineCheckSaysNotStartedBlockA) {
  const Outcome check = workbook("check 00");
  EXPECT_EQ(check.status, 1) << check.out;
  EXPECT_NE(check.out.find("0 of 12 tests pass"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("not started: Block A of labs/00-attention-by-hand.md"),
            std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("not started: Block B of labs/00-attention-by-hand.md"),
            std::string::npos)
      << check.out;
  EXPECT_EQ(check.out.find("FAIL"), std::string::npos)
      << "TODO failures collapse to one line per block\n"
      << check.out;
  EXPECT_EQ(check.out.find("\033["), std::string::npos) << "no colour when piped";

  keep_labs(kLastLabUsed);  // the current lab is the first not done: every lab is built
  const Outcome current = workbook("");
  EXPECT_EQ(current.status, 0) << current.out;
  EXPECT_NE(current.out.find("current lab: lab 00 — Attention by hand"), std::string::npos)
      << current.out;
  EXPECT_NE(current.out.find("status: todo"), std::string::npos) << current.out;
  EXPECT_NE(current.out.find("next: read labs/00-attention-by-hand.md"), std::string::npos)
      << current.out;
}

TEST_F(WorkbookScratch, HintShowsTheNextHintEachTimeAndKeepsItsCounterInTheBuildTree) {
  const Outcome first = workbook("hint 00"), second = workbook("hint 0");
  EXPECT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("Hint 1 of 4"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("Do the paper derivation"), std::string::npos) << first.out;
  EXPECT_NE(second.out.find("Hint 2 of 4"), std::string::npos) << second.out;
  const auto state = nlohmann::json::parse(read(repo_ / "build" / "workbook-state.json"));
  EXPECT_EQ(state["hints_shown"]["00"], nlohmann::json::array({1, 2})) << state.dump();
  EXPECT_EQ(git("status --porcelain").out, "") << "the learner's sources are untouched";
  EXPECT_NE(workbook("hint 00 --restart").out.find("Hint 1 of 4"), std::string::npos);
}

TEST_F(WorkbookScratch, BreakAsksForAPredictionThenShowsWhatTheMutantBreaks) {
  const Outcome list = workbook("break 00");
  EXPECT_EQ(list.status, 0) << list.out;
  EXPECT_NE(list.out.find("Block A  softmax-without-max"), std::string::npos) << list.out;

  const Outcome unanswered = workbook("break 00 softmax-without-max </dev/null");
  EXPECT_EQ(unanswered.status, 2) << unanswered.out;
  EXPECT_NE(unanswered.out.find("--no-predict"), std::string::npos) << unanswered.out;

  // Two tests predicted (one right, one wrong), and a verify program that notices: it does not.
  const Outcome run =
      sh("printf 'IsStableForLargeLogits MatchesTheHandExample\\ny\\n' | " +
         std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " + repo_.string() + " --build-dir " +
         (repo_ / "build").string() + " break 00 softmax-without-max 2>/dev/null");
  EXPECT_EQ(run.status, 0) << run.out;
  for (const char* expected :
       {"the tests: 1 of 12 fail", "predicted  Softmax.IsStableForLargeLogits",
        "predicted to fail, but passed:", "Softmax.MatchesTheHandExample",
        "the verify program does not notice: every check passes, no error  (you predicted "
        "otherwise)",
        "you foresaw 1 of the 1 failures; 2 tests you named passed."})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
  const auto state = nlohmann::json::parse(read(repo_ / "build" / "workbook-state.json"));
  const auto& record = state["break"]["00"]["softmax-without-max"];
  EXPECT_EQ(record["failed"], nlohmann::json::array({"Softmax.IsStableForLargeLogits"})) << state;
  EXPECT_EQ(record["verify_predicted"], true) << state;
  EXPECT_EQ(git("status --porcelain").out, "") << "neither the learner's files nor the reference";
}

TEST_F(WorkbookScratch, BreakKeepsAHintShownWhileItBuilds) {
  // Another verb writes the state while break builds: a `cmake` first on PATH shows a hint, once,
  // then hands over to the real one. Break's record must join that hint, not erase it.
  const fs::path bin = scratch_ / "cmake-that-shows-a-hint";
  fs::create_directories(bin);
  const std::string real_cmake = workbench::trim(sh("command -v cmake").out);
  const std::string command = std::string(MINIMODEL_BIN_DIR) + "/workbook --repo " +
                              repo_.string() + " --build-dir " + (repo_ / "build").string();
  const fs::path shown = bin / "shown";
  write(bin / "cmake", "#!/bin/sh\nif [ ! -e '" + shown.string() + "' ]; then touch '" +
                           shown.string() + "'; " + command + " hint 00 >/dev/null; fi\nexec '" +
                           real_cmake + "' \"$@\"\n");
  fs::permissions(bin / "cmake", fs::perms::owner_all, fs::perm_options::add);
  const Outcome run = sh("printf 'all\\ny\\n' | PATH='" + bin.string() + "':\"$PATH\" " + command +
                         " break 00 softmax-without-max 2>/dev/null");
  EXPECT_EQ(run.status, 0) << run.out;
  ASSERT_TRUE(fs::exists(shown)) << "the hint was shown while break built";
  // Not const: a key that is missing reads as null instead of failing the access.
  nlohmann::json state = nlohmann::json::parse(read(repo_ / "build" / "workbook-state.json"));
  EXPECT_EQ(state["hints_shown"]["00"], nlohmann::json::array({1})) << state;
  nlohmann::json& record = state["break"]["00"]["softmax-without-max"];
  EXPECT_EQ(record["failed"], nlohmann::json::array({"Softmax.IsStableForLargeLogits"})) << state;
  EXPECT_EQ(record["prediction"], "all") << state;
}

TEST_F(WorkbookScratch, BreakCountsAVerifyProgramThatStopsWithAnErrorAsNoticedAndSaysSo) {
  // A mutant of this test's own: softmax throws, so the verify program stops before its checks.
  const fs::path catalogue = repo_ / "labs/mutants/00-attention-by-hand.json";
  nlohmann::ordered_json mutants = nlohmann::ordered_json::parse(read(catalogue));
  mutants["mutants"].push_back({{"name", "softmax-throws"},
                                {"block", "A"},
                                {"bug", "softmax throws instead of returning"},
                                {"replace", "  return e / row_sum;"},
                                {"with",
                                 "  if (e.size() > 0) throw std::runtime_error(\"a "
                                 "mutant that stops\");\n  return e / row_sum;"}});
  write(catalogue, mutants.dump(1));
  const Outcome run = sh("printf 'all\\ny\\n' | " + std::string(MINIMODEL_BIN_DIR) +
                         "/workbook --repo " + repo_.string() + " --build-dir " +
                         (repo_ / "build").string() + " break 00 softmax-throws 2>/dev/null");
  EXPECT_EQ(run.status, 0) << run.out;
  // The question names both ways of noticing, and the verdict says which one happened.
  for (const char* expected :
       {"Does the verify program notice: a [FAIL] check, or stopping with an error? y or n:",
        "the verify program notices: it stopped with an error (exit status 2: ",
        "a mutant that stops)  (as you predicted)"})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
}

// The arrival time of each line of `workbook <args>`'s output, read through a pipe as it comes.
struct TimedLine {
  double seconds;  // since the command started
  std::string text;
};

std::vector<TimedLine> timed_lines(const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<TimedLine> lines;
  workbench::CaptureOptions options;
  options.on_line = [&](const std::string& line) {
    lines.push_back(
        {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), line});
  };
  workbench::run_captured(std::string(MINIMODEL_BIN_DIR) + "/workbook", args, options);
  return lines;
}

// The first line that matches `pattern`, or nullptr.
const TimedLine* first_line(const std::vector<TimedLine>& lines, const std::string& pattern) {
  const std::regex re(pattern);
  for (const TimedLine& line : lines)
    if (std::regex_search(line.text, re)) return &line;
  return nullptr;
}

std::string joined(const std::vector<TimedLine>& lines) {
  std::string text;
  for (const TimedLine& line : lines)
    text += std::to_string(line.seconds) + "  " + line.text + "\n";
  return text;
}

// Lab 10's verify program trains for about half a minute: its progress lines come through the
// pipe while it trains, the first of them long before the training ends (half its time at least).
TEST_F(WorkbookScratch, VerifyAndBreakOfLab10ShowTheTrainingAsItGoesThroughAPipe) {
  const std::vector<std::string> base = {"--repo", repo_.string(), "--build-dir",
                                         (repo_ / "build").string()};
  std::vector<std::string> verify = base;
  verify.insert(verify.end(), {"verify", "10", "--impl", "reference"});
  const std::vector<TimedLine> lines = timed_lines(verify);
  const TimedLine* progress = first_line(lines, R"(^step \d+/\d+ .*s left$)");
  const TimedLine* trained = first_line(lines, R"(^Trained in [0-9.]+ s)");
  ASSERT_NE(progress, nullptr) << joined(lines);
  ASSERT_NE(trained, nullptr) << joined(lines);
  const double training_seconds =
      std::stod(trained->text.substr(std::string("Trained in ").size()));
  EXPECT_LT(progress->seconds, trained->seconds - training_seconds / 2) << joined(lines);

  const std::string mutant = "no-position-table";
  std::vector<std::string> breaks = base;
  breaks.insert(breaks.end(), {"break", "10", mutant, "--no-predict"});
  const std::vector<TimedLine> broken = timed_lines(breaks);
  const TimedLine* shown = first_line(broken, R"(^  step \d+/\d+ )");
  const TimedLine* verdict = first_line(broken, R"(^the verify program )");
  ASSERT_NE(shown, nullptr) << joined(broken);
  ASSERT_NE(verdict, nullptr) << joined(broken);
  const auto manifest = nlohmann::json::parse(
      read(repo_ / "build/mutants/lab10" / mutant / "experiment/manifest.json"), nullptr, false);
  ASSERT_TRUE(manifest.contains("measurements")) << joined(broken);
  const double mutant_seconds = manifest["measurements"]["training_seconds"].get<double>();
  EXPECT_LT(shown->seconds, verdict->seconds - mutant_seconds / 2) << joined(broken);
}

TEST_F(WorkbookScratch, SolutionWaitsForPassingTestsUnlessForced) {
  const Outcome closed = workbook("solution 00");
  EXPECT_EQ(closed.status, 1) << closed.out;
  EXPECT_NE(closed.out.find("not done yet"), std::string::npos) << closed.out;
  EXPECT_NE(closed.out.find("--force"), std::string::npos) << closed.out;
  const Outcome forced = workbook("solution 00 --force");
  EXPECT_EQ(forced.status, 0) << forced.out;
  EXPECT_NE(forced.out.find("# Lab 00 — Reference write-up"), std::string::npos)
      << forced.out.substr(0, 400);
  EXPECT_NE(forced.out.find("==> solutions/minimodel/attention/scaled_dot_product.cpp <=="),
            std::string::npos);
}

TEST_F(WorkbookScratch, CheckPassesWithTheReferenceBodies) {
  copy_reference_into_stub();
  const Outcome check = workbook("check 00");
  EXPECT_EQ(check.status, 0) << check.out;
  EXPECT_NE(check.out.find("all 12 tests pass"), std::string::npos) << check.out;
  const Outcome solution = workbook("solution 00");
  EXPECT_EQ(solution.status, 0) << solution.out.substr(0, 400);
}

TEST_F(WorkbookScratch, DiffOfTheReferenceBodiesReportsNoDifference) {
  copy_reference_into_stub();
  const Outcome diff = workbook("diff 00");
  EXPECT_EQ(diff.status, 0) << diff.out;
  for (const char* output :
       {"A +softmax", "B +single_head_attention_weights", "B +single_head_attention_output",
        "B +single_head_attention_masked_weights"})
    EXPECT_TRUE(std::regex_search(
        diff.out, std::regex(std::string("\n") + output + " +\\(2, 2\\) +0 +1\\.00e-05 +yes")))
        << output << "\n"
        << diff.out;
  EXPECT_NE(diff.out.find("4 of 4 outputs within tolerance: 0 differences"), std::string::npos)
      << diff.out;
}

TEST_F(WorkbookScratch, GradeJsonCountsEachLabsTests) {
  copy_reference_into_stub();
  // Only lab 00 in the registry here, so that grading does not build the other labs.
  const std::string all_labs = keep_labs(0);
  // Build progress goes to stderr; stdout is the JSON document alone.
  const Outcome grade = workbook("grade --json 2>/dev/null"), list = workbook("list");
  write(repo_ / "labs" / "labs.json", all_labs);

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

  // The build system was regenerated with lab 00 alone: a verb for lab 01 regenerates it again
  // instead of reporting "No rule to make target" as a build error.
  const Outcome lab01 = workbook("check 01");
  EXPECT_NE(lab01.out.find("not started: Block A of labs/01-multi-head-attention.md"),
            std::string::npos)
      << lab01.out;
}

TEST_F(WorkbookScratch, ResetRestoresTheStubAndKeepsABackup) {
  copy_reference_into_stub();
  const Outcome refused = workbook("reset 00");
  EXPECT_EQ(refused.status, 2) << refused.out;
  EXPECT_NE(refused.out.find("--yes"), std::string::npos) << refused.out;
  EXPECT_EQ(read(repo_ / stub()), read(repo_ / reference()))
      << "nothing changed without confirmation";

  const Outcome reset = workbook("reset 00 --yes");
  EXPECT_EQ(reset.status, 0) << reset.out;
  EXPECT_EQ(read(repo_ / stub()), git(std::string("show HEAD:") + stub()).out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(reset.out, m, std::regex(R"(saved your version to (\S+))")))
      << reset.out;
  const fs::path backup = repo_ / m[1].str();
  EXPECT_EQ(backup.string().find((repo_ / ".workbook-backups").string()), 0u) << backup;
  ASSERT_TRUE(fs::exists(backup)) << backup;
  EXPECT_EQ(read(backup), read(repo_ / reference()));
  EXPECT_EQ(git("status --porcelain").out, "")
      << ".workbook-backups/ is ignored and the stub is back";
  EXPECT_NE(workbook("reset 00 --yes").out.find("nothing to do"), std::string::npos);
}

TEST_F(WorkbookScratch, ResetRestoresTheStubByteForByteWhenGitWarns) {
  // A branch named origin/HEAD makes the ref ambiguous: git warns on stderr at each `git show`.
  ASSERT_EQ(git("branch origin/HEAD").status, 0);
  copy_reference_into_stub();
  const Outcome reset = workbook("reset 00 --yes");
  const Outcome pristine =
      sh("git -C " + repo_.string() + " show refs/remotes/origin/HEAD:" + stub() + " 2>/dev/null");
  ASSERT_EQ(git("branch -D origin/HEAD").status, 0);  // SetUp's reset leaves branches
  EXPECT_EQ(reset.status, 0) << reset.out;
  EXPECT_NE(reset.out.find("ambiguous"), std::string::npos) << "git's warning reaches the learner";
  ASSERT_EQ(pristine.status, 0) << pristine.out;
  EXPECT_EQ(read(repo_ / stub()), pristine.out) << "the stub, and not git's warning in it";
}

TEST_F(WorkbookScratch, BadLabNumbersAreUsageErrors) {
  const std::string range = workbook::lab_range(workbook::load_registry(repo_));  // "00–06" today
  for (const char* verb :
       {"check 97", "verify 97", "diff 97", "hint 97", "solution 97", "reset 97 --yes"}) {
    const Outcome run = workbook(verb);
    EXPECT_EQ(run.status, 2) << verb << ": " << run.out;
    EXPECT_NE(run.out.find("no lab 97: labs are " + range), std::string::npos)
        << verb << ": " << run.out;
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
  EXPECT_TRUE(std::regex_search(
      check.out, std::regex(R"(src/minimodel/attention/scaled_dot_product\.cpp:\d+:\d+: error: )")))
      << check.out;
  EXPECT_NE(check.out.find("workbook-build.log"), std::string::npos) << check.out;
}

// ---- The learner's loop (issue 8): labs cannot break each other, the root cause comes first,
// nothing stale writes an artifact ----------------------------------------------------------------

// The reference bodies of `files` (under src/minimodel/attention/) copied into the stubs.
void copy_references(const fs::path& repo, const std::vector<std::string>& files) {
  for (const std::string& file : files)
    fs::copy_file(repo / "solutions/minimodel/attention" / file,
                  repo / "src/minimodel/attention" / file, fs::copy_options::overwrite_existing);
}

// Replaces `from` by `to` in `path`, which must contain it.
void replace_in(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = read(path);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " is not in " << path;
  write(path, text.replace(at, from.size(), to));
}

TEST_F(WorkbookScratch, ANarrowingWarningInTheLearnersFileIsShownBeforeTheTestResults) {
  // `xt::xtensor<float, 1> merged({T})` is one element holding T, not T zeros: g++ only warns
  // (-Wnarrowing), and the build succeeds. CI configures the scratch clone with warnings as errors
  // (CI=true); the pragma keeps this one a warning there, as in a learner's build.
  copy_reference_into_stub();
  replace_in(repo_ / stub(), "namespace minimodel {",
             "#pragma GCC diagnostic warning \"-Wnarrowing\"\nnamespace minimodel {");
  replace_in(repo_ / stub(), "  Tensor2 output = xt::linalg::dot(weights, v);",
             "  xt::xtensor<float, 1> merged({T});\n"
             "  Tensor2 output = xt::linalg::dot(weights, v) + merged(0) * 0.0f;");
  const Outcome check = workbook("check 00 2>/dev/null");
  EXPECT_EQ(check.status, 0) << check.out;
  EXPECT_TRUE(std::regex_search(
      check.out,
      std::regex(R"(all 12 tests pass — done\n  src/minimodel/attention/scaled_dot_product\.cpp:)"
                 R"(\d+:\d+: warning: narrowing conversion of .* \[-Wnarrowing\]\n)"
                 R"(  \(the compiler's only warning in your files; full build output: )"
                 R"(build/workbook-build\.log\)\nnext: )")))
      << check.out;
}

TEST_F(WorkbookScratch, ATestThatPrintsA40000CharacterLineThenCrashesIsReportedNotACrash) {
  // The runner's scans of the test's output used std::regex, which recursed per character.
  const std::string pristine = read(repo_ / stub());
  replace_in(repo_ / stub(), "#include <cmath>",
             "#include <cmath>\n#include <cstdio>\n#include <cstdlib>\n#include <string>");
  replace_in(repo_ / stub(), "  throw Todo(",
             "  std::puts(std::string(40000, 'x').c_str());\n  std::fflush(stdout);\n"
             "  std::abort();\n  throw Todo(");
  const Outcome check = workbook("check 00");
  write(repo_ / stub(), pristine);
  // sh reports a command killed by a signal as 128 + the signal (139: workbook segfaulted).
  EXPECT_TRUE(check.status >= 0 && check.status < 128) << "exit status " << check.status;
  EXPECT_NE(check.out.find("crashed with signal 6"), std::string::npos)
      << check.out.substr(0, 2000);
}

TEST_F(WorkbookScratch, ACompileErrorInLab03LeavesLabs00To02Done) {
  copy_references(repo_, {"scaled_dot_product.cpp", "attention.cpp", "head_permutation_test.cpp",
                          "causal_mask.cpp"});
  const fs::path lab03 = repo_ / "src/minimodel/attention/gpt2_attention.cpp";
  write(lab03, read(lab03) + "\nthis is not C++\n");
  keep_labs(kLastLabUsed);  // lab 04 depends on labs 01 and 02, not on 03
  const Outcome grade = workbook("grade --json 2>/dev/null"), list = workbook("list");
  ASSERT_EQ(grade.status, 0) << grade.out;
  const nlohmann::json report = nlohmann::json::parse(grade.out);
  std::map<std::string, std::string> status;
  for (const auto& lab : report["labs"]) status[lab["lab"]] = lab["status"];
  EXPECT_EQ(status["00"], "done");
  EXPECT_EQ(status["01"], "done");
  EXPECT_EQ(status["02"], "done");
  EXPECT_EQ(status["03"], "build error");
  EXPECT_EQ(status["04"], "todo") << "lab 04 builds on labs 01 and 02, not on lab 03";
  EXPECT_TRUE(std::regex_search(list.out, std::regex("02  Causal mask +done"))) << list.out;
  const Outcome check = workbook("check 2>/dev/null");
  EXPECT_NE(check.out.find("lab 03 — Fused QKV, GPT-2 layout: build error"), std::string::npos)
      << check.out;
  EXPECT_TRUE(std::regex_search(check.out, std::regex(R"(gpt2_attention\.cpp:\d+:\d+: error: )")))
      << check.out;
}

// The README's test command passes at every stage of a learner's progress past the fresh clone
// (which .ci/run's own test workflow is): labs 00–02 done, lab 03 half done (the reference with
// one Block C bug, so that some of its tests pass), and lab 03 not compiling. Its own ctest test
// (workbook.runner.scratch.states): a whole test workflow per stage takes minutes.
TEST_F(WorkbookScratch, TheTestWorkflowPassesAtEveryStageOfALearnersProgress) {
  const fs::path lab03 = repo_ / "src/minimodel/attention/gpt2_attention.cpp";
  const std::vector<workbook::Mutant> mutants =
      workbook::load_mutants(repo_, *workbook::find_lab(workbook::load_registry(repo_), "03"));
  const auto block_c = std::find_if(mutants.begin(), mutants.end(), [](const workbook::Mutant& m) {
    return m.block == "C" && m.equivalent.empty();
  });
  ASSERT_NE(block_c, mutants.end());
  const std::vector<std::pair<std::string, std::function<void()>>> stages = {
      {"labs 00-02 done",
       [&] {
         copy_references(repo_, {"scaled_dot_product.cpp", "attention.cpp",
                                 "head_permutation_test.cpp", "causal_mask.cpp"});
       }},
      {"lab 03 half done",
       [&] {
         copy_references(repo_, {"gpt2_attention.cpp"});
         replace_in(lab03, block_c->replace, block_c->with);
       }},
      {"lab 03 does not compile", [&] { write(lab03, read(lab03) + "\nthis is not C++\n"); }},
  };
  for (const auto& [stage, reach] : stages) {
    reach();
    const Outcome workflow = sh("cd " + repo_.string() + " && cmake --workflow --preset test");
    const std::string tail =
        workflow.out.substr(workflow.out.size() > 6000 ? workflow.out.size() - 6000 : 0);
    // A failed test's own output scrolled past the tail: run the failed tests again, with theirs.
    const std::string again =
        workflow.status == 0 ? ""
                             : sh("cd " + repo_.string() +
                                  " && ctest --test-dir build --rerun-failed --output-on-failure")
                                   .out;
    EXPECT_EQ(workflow.status, 0) << stage << ":\n"
                                  << tail << "\nthe failed tests again:\n"
                                  << again;
    EXPECT_NE(workflow.out.find("100% tests passed"), std::string::npos) << stage << ":\n" << tail;
  }
}

// `workbook` with no verb answers from what is known: a lab whose files are the stubs as handed
// out is not started, and a lab's last result stands while its files are unchanged. It builds and
// tests only a lab with neither.
TEST_F(WorkbookScratch, BareWorkbookAnswersFromWhatIsKnownAndBuildsAtMostTheCurrentLab) {
  const fs::path log = repo_ / "build" / "workbook-build.log";
  fs::remove(log);
  const Outcome pristine = workbook("");
  EXPECT_EQ(pristine.status, 0) << pristine.out;
  EXPECT_NE(pristine.out.find("current lab: lab 00"), std::string::npos) << pristine.out;
  EXPECT_NE(
      pristine.out.find("status: todo, 0 of 12 tests pass (its files are the stubs as handed out)"),
      std::string::npos)
      << pristine.out;
  EXPECT_FALSE(fs::exists(log)) << "nothing is built for pristine stubs";

  copy_reference_into_stub();
  ASSERT_EQ(workbook("check 00").status, 0);
  fs::remove(log);
  const Outcome known = workbook("");
  EXPECT_NE(known.out.find("current lab: lab 01"), std::string::npos) << known.out;
  EXPECT_FALSE(fs::exists(log)) << "lab 00's result from check stands, and lab 01 is untouched";

  write(repo_ / stub(), read(repo_ / stub()) + "\n// a learner's comment\n");
  const Outcome edited = workbook("");
  EXPECT_NE(edited.out.find("current lab: lab 01"), std::string::npos) << edited.out;
  ASSERT_TRUE(fs::exists(log)) << "lab 00 changed since its last run: built and tested again";
  EXPECT_NE(read(log).find("lab00"), std::string::npos) << read(log);
  EXPECT_EQ(read(log).find("lab01"), std::string::npos) << "only lab 00 is built\n" << read(log);
}

// `workbook hint` gives the hints of the block that fails first in the last run of the lab's
// tests, not the next one in the text.
TEST_F(WorkbookScratch, HintFollowsTheFirstFailingBlockOfTheLastRun) {
  const std::vector<workbook::Mutant> mutants =
      workbook::load_mutants(repo_, *workbook::find_lab(workbook::load_registry(repo_), "00"));
  // A Block B bug that compiles under CI's -Werror (removing the scale would leave it unused).
  const auto block_b = std::find_if(mutants.begin(), mutants.end(), [](const workbook::Mutant& m) {
    return m.name == "scale-by-sqrt-key-count";
  });
  ASSERT_NE(block_b, mutants.end());
  ASSERT_EQ(block_b->block, "B");
  copy_reference_into_stub();
  replace_in(repo_ / stub(), block_b->replace, block_b->with);
  const Outcome check = workbook("check 00");
  ASSERT_NE(check.out.find("revisit Block B"), std::string::npos) << check.out;
  const Outcome first = workbook("hint 00"), second = workbook("hint 00"),
                third = workbook("hint 00");
  EXPECT_NE(first.out.find("Hint 3 of 4"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("on Block B, the first to fail"), std::string::npos) << first.out;
  EXPECT_NE(second.out.find("Hint 4 of 4"), std::string::npos) << second.out;
  EXPECT_NE(third.out.find("that is Block B's last hint"), std::string::npos) << third.out;
}

TEST_F(WorkbookScratch, AWrongSplitHeadsReportsBlockBFirstWithItsTraceLine) {
  copy_references(repo_, {"scaled_dot_product.cpp", "attention.cpp"});
  const fs::path lab01 = repo_ / "src/minimodel/attention/attention.cpp";
  // The reshape puts d_head before H.
  replace_in(lab01, "{B, T, n_heads, d_head}", "{B, T, d_head, n_heads}");
  replace_in(lab01, "return xt::transpose(by_head, {0, 2, 1, 3});",
             "return xt::transpose(by_head, {0, 3, 1, 2});");
  const Outcome check = workbook("check 01 2>/dev/null");
  EXPECT_EQ(check.status, 1) << check.out;
  const auto first_fail = check.out.find("FAIL ");
  ASSERT_NE(first_fail, std::string::npos) << check.out;
  EXPECT_EQ(check.out.compare(first_fail, 15, "FAIL SplitHeads"), 0) << check.out;
  EXPECT_NE(check.out.find("       head 0\n"), std::string::npos) << "the failing head\n"
                                                                  << check.out;
  EXPECT_NE(check.out.find("revisit Block B — split_heads and merge_heads"), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("(Block C): "), std::string::npos) << "Block C in one line\n"
                                                              << check.out;

  const Outcome only_b = workbook("check 01 --block B 2>/dev/null");
  EXPECT_NE(only_b.out.find("1 of 3 tests pass"), std::string::npos) << only_b.out;  // and Rejects…
  EXPECT_EQ(workbook("check 01 --block Z").status, 2);
}

TEST_F(WorkbookScratch, ForgettingWoSuggestsLookingAfterTheSoftmaxAndDiff) {
  copy_references(repo_, {"scaled_dot_product.cpp", "attention.cpp"});
  replace_in(repo_ / "src/minimodel/attention/attention.cpp",
             "return project(merge_heads(context), w_o_);", "return merge_heads(context);");
  const Outcome check = workbook("check 01 2>/dev/null");
  EXPECT_EQ(check.status, 1) << check.out;
  EXPECT_NE(check.out.find("revisit Block C"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("hint: the attention weights pass their checks but the outputs do not"),
            std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("hint: `workbook diff 01`"), std::string::npos) << check.out;
  const Outcome diff = workbook("diff 01 2>/dev/null");
  EXPECT_EQ(diff.status, 1) << diff.out;
  EXPECT_TRUE(std::regex_search(diff.out,
                                std::regex(R"(\nC +forward_attention_weights +\([0-9, ]+\) +0 )")))
      << diff.out;
}

TEST_F(WorkbookScratch, NoStaleVerifyProgramWritesALearnerArtifact) {
  // The reference body passes; then a syntax error: ctest must not run the old verify program.
  copy_references(repo_, {"scaled_dot_product.cpp"});
  const fs::path manifest = repo_ / "experiments/00-attention-by-hand/manifest.json";
  ASSERT_EQ(
      sh("cmake --build " + (repo_ / "build").string() + " --target verify-lab00-learner").status,
      0);
  write(repo_ / stub(), read(repo_ / stub()) + "\nthis is not C++\n");
  const Outcome ctest =
      sh("cd " + repo_.string() + " && ctest --preset learner -L lab00 --test-dir " +
         (repo_ / "build").string());
  EXPECT_NE(ctest.status, 0) << ctest.out;
  EXPECT_NE(ctest.out.find("lab00.learner.build ..."), std::string::npos) << ctest.out;
  EXPECT_FALSE(fs::exists(manifest)) << "a stale verify-lab00-learner wrote " << manifest << "\n"
                                     << ctest.out;
  // `workbook verify` rebuilds first too, and says so when it cannot.
  const Outcome verify = workbook("verify 00 2>/dev/null");
  EXPECT_EQ(verify.status, 1) << verify.out;
  EXPECT_NE(verify.out.find("the build failed"), std::string::npos) << verify.out;
  EXPECT_FALSE(fs::exists(manifest));
}

// `workbook attend` builds the engine of the implementation it runs, in its build folder, so that
// an edit of the learner's code is what runs; so does `generate`.
TEST_F(WorkbookScratch, AttendAndGenerateBuildTheLearnersLatestCodeFirst) {
  const fs::path fixture = repo_ / "tests/fixtures/mha_batched";
  auto attend = [&](const std::string& impl, const std::string& out) {
    return workbook("attend --impl " + impl + " --heads 4 --x " + (fixture / "x.npy").string() +
                    " --wq " + (fixture / "w_q.npy").string() + " --wk " +
                    (fixture / "w_k.npy").string() + " --wv " + (fixture / "w_v.npy").string() +
                    " --wo " + (fixture / "w_o.npy").string() + " --out " +
                    (scratch_ / (out + "_y.npy")).string() + " --attn-out " +
                    (scratch_ / (out + "_attn.npy")).string());
  };
  const Outcome stubs = attend("learner", "stubs");
  EXPECT_EQ(stubs.status, 1) << stubs.out;
  EXPECT_NE(stubs.out.find("TODO(lab 0"), std::string::npos) << stubs.out;

  copy_references(repo_, {"scaled_dot_product.cpp", "attention.cpp"});  // lab 01's layer, done
  const Outcome learner = attend("learner", "learner");
  ASSERT_EQ(learner.status, 0) << learner.out;
  ASSERT_EQ(attend("reference", "reference").status, 0);
  EXPECT_EQ(read(scratch_ / "learner_y.npy"), read(scratch_ / "reference_y.npy"));
  EXPECT_EQ(read(scratch_ / "learner_attn.npy"), read(scratch_ / "reference_attn.npy"));

  const Outcome generate = workbook("generate --impl learner --checkpoint " +
                                    (scratch_ / "none").string() + " --prompt 1");
  EXPECT_EQ(generate.status, 2) << generate.out;  // no checkpoint there, once it is built
  EXPECT_TRUE(fs::exists(repo_ / "build/bin/generate-learner")) << generate.out;
}

TEST_F(WorkbookScratch, WatchRechecksWhenALearnerFileIsSaved) {
  keep_labs(kLastLabUsed);  // watch builds every lab of the registry first
  const fs::path log = scratch_ / "watch.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string program = std::string(MINIMODEL_BIN_DIR) + "/workbook";
    execl(program.c_str(), program.c_str(), "--repo", repo_.c_str(), "--build-dir",
          (repo_ / "build").c_str(), "watch", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto count = [&](const std::string& what) {
    const std::string text = read(log);
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto wait_for = [&](const std::string& what, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
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
    // How dev-check runs: --files-only finds a defect of the files unbuilt. The mutants are left
    // out, except where the reference fails, to show they are not run then.
    std::string options = "--skip-mutants";
    std::string also = "";  // more that the output says
  };
  auto remove_line = [&](const std::string& file, const std::string& line) {
    std::string text = read(repo_ / file);
    const auto at = text.find(line);
    ASSERT_NE(at, std::string::npos) << line;
    write(repo_ / file, text.erase(at, line.size()));
  };
  const std::vector<Defect> defects = {
      {"a missing section",
       [&] { remove_line("labs/00-attention-by-hand.md", "## Stop conditions\n"); },
       "labs/00-attention-by-hand.md: no \"## Stop conditions\" section", "--files-only"},
      {"a missing README row",
       [&] {
         remove_line("README.md",
                     "| [01 — Multi-head attention](labs/01-multi-head-attention.md) | heads as "
                     "column blocks of one "
                     "big matrix per role; W_O | `MultiHeadAttention`, `split_heads`, "
                     "`merge_heads`, `heatmap.png` "
                     "(one panel per head) |\n");
       },
       "README.md's lab map has no row for lab 01", "--files-only"},
      {"a quoted command that leaves the lab",
       [&] {
         write(repo_ / "labs/00-attention-by-hand.md",
               read(repo_ / "labs/00-attention-by-hand.md") +
                   "\nRun `ctest --preset learner -R Rejects`.\n");
       },
       "labs/00-attention-by-hand.md: `ctest --preset learner -R Rejects` names no lab (-L labNN), "
       "so it runs every lab's tests"},
      {"a quoted command that runs nothing",
       [&] {
         write(
             repo_ / "labs/00-attention-by-hand.md",
             read(repo_ / "labs/00-attention-by-hand.md") +
                 "\nRun `cmake --build build && ctest --preset learner -L lab00 -R NoSuchTest`.\n");
       },
       "labs/00-attention-by-hand.md: `ctest --preset learner -L lab00 -R NoSuchTest` runs no "
       "test"},
      {"a missing write-up", [&] { fs::remove(repo_ / "solutions/02-causal-mask.md"); },
       "lab 02 lacks solutions/02-causal-mask.md (its reference write-up)", "--files-only"},
      {"a pristine stub that passes",
       [&] {  // committed and pushed: the stubs as handed out are origin/HEAD's (pristine_ref)
         copy_reference_into_stub();
         git("-c user.name=t -c user.email=t@t commit --quiet -am 'stub passes'");
         git("update-ref refs/remotes/origin/HEAD HEAD");
       },
       "lab 00: a pristine stub does not fail with its TODO (lab00.stubs): "
       "Softmax.MatchesTheHandExample passes on "
       "the pristine stubs"},
      {"a failing reference test",
       [&] {  // the reference softmax forgets to normalise
         std::string text = read(repo_ / reference());
         const std::string normalise = "return e / row_sum;";
         ASSERT_NE(text.find(normalise), std::string::npos);
         text.replace(text.find(normalise), normalise.size(), "return e;");
         write(repo_ / reference(), text);
       },
       "lab 00: a reference test fails: ", "", "mutants not run: the reference fails"},
      {"a figure that is listed but not drawn",
       [&] {  // an earlier run's PNG is still there: the verify program must not pass it off as its
              // own
         std::string text = read(repo_ / "verify/lab00_verify.cpp");
         const std::string draw =
             "workbench::render_heatmaps(run.artifact(\"attention_weights.png\"), figure);";
         ASSERT_NE(text.find(draw), std::string::npos);
         text.replace(text.find(draw), draw.size(),
                      "(void)figure; run.artifact(\"attention_weights.png\");");
         write(repo_ / "verify/lab00_verify.cpp", text);
       },
       "lab 00: the reference verify program failed (lab00.reference.verify): verify "
       "00-attention-by-hand "
       "(reference): attention_weights.png is listed as an artifact but this run did not write it"},
  };
  // Reference artifacts from a passing run. None of the defects is a mutant's: no mutants here
  // (DevCheckPassesOnThePristineCopy builds and runs them).
  ASSERT_EQ(workbook("dev-check --lab 00 --skip-mutants").status, 0);
  const std::string status_before = git("status --porcelain --ignored experiments").out;
  const std::string pristine = workbench::trim(git("rev-parse origin/HEAD").out);
  for (const Defect& defect : defects) {
    SCOPED_TRACE(defect.what);
    defect.make();
    const Outcome check = workbook("dev-check --lab 00 " + defect.options);
    EXPECT_EQ(check.status, 1) << check.out;
    EXPECT_NE(check.out.find(defect.expected), std::string::npos) << check.out;
    EXPECT_NE(check.out.find(defect.also), std::string::npos) << check.out;
    EXPECT_EQ(git("status --porcelain --ignored experiments").out, status_before)
        << "dev-check deletes nothing in the sources";
    // Back to the pristine copy for the next defect.
    git("update-ref refs/remotes/origin/HEAD " + pristine);
    git("reset --quiet --hard " + pristine);
    git("clean -fdq");
  }
}

}  // namespace
