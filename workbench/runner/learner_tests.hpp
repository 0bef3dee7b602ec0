#pragma once
// Running a lab's tests: bin/test-labNN-learner (or a mutant's test program) with
// --gtest_output=json, time-limited, whose report gives passed/total and each failure's message.
#include <chrono>
#include <string>
#include <vector>

#include "runner/registry.hpp"
#include "runner/workspace.hpp"

namespace workbook {

/// How long one lab's learner tests may run before they are stopped (an endless loop in a stub).
/// The reference runs each lab's tests in a few seconds.
constexpr std::chrono::seconds kTestTimeLimit{120};
/// How long a verify program may run (`verify`, and `break`'s run of a mutant's): lab 10's trains
/// for about 35 s in Release and several times that in the debug build; only an endless loop
/// should reach it.
constexpr std::chrono::seconds kVerifyTimeLimit{600};

enum class LabStatus { done, in_progress, todo, build_error };
std::string status_name(LabStatus status);  ///< "done", "in progress", "todo", "build error"

struct TestFailure {
  std::string test;                  ///< "Softmax.EveryRowSumsToOne"
  std::string summary;               ///< one line: what was expected and what came instead
  std::vector<std::string> details;  ///< the failure in full: expression, values, trace lines
};

struct LabResult {
  LabStatus status = LabStatus::build_error;
  int passed = 0;
  int total = 0;
  std::vector<TestFailure> failures;  ///< by block (A first), then as the registry lists them
  std::vector<std::string> passed_tests;
  BuildResult build;
  std::string problem;  ///< e.g. "test-lab00-learner crashed with signal 11 … in Softmax.X"
};

/// One failure of a test program's JSON report: `failure` is its "failure" text (GoogleTest's
/// "file:line", what failed, the test's own message, "Google Test trace:" lines). The summary keeps
/// the values: "mha.n_heads() (3) != 4" for an EXPECT_EQ, "threw: …" for an exception, the
/// parenthesised text of "Actual: false (…)" for our checks; at most 240 characters.
TestFailure parse_failure(const std::string& test, const std::string& failure);

/// The name after the last "[ RUN      ] " in a test program's output ("Softmax.RowsSumToOne"):
/// the test that was running when it stopped; "" if none started.
std::string last_test_started(const std::string& output);

/// What a sanitizer's "SUMMARY: …" line (or else UBSan's first "file:line:col: runtime error: …")
/// in `output` says, as ": AddressSanitizer: heap-buffer-overflow at src/…:17 in f"; "" if none.
std::string sanitizer_finding(const std::string& output, const Workspace& ws);

/// Builds lab `lab`'s learner tests and verify program (the target labNN-learner, so that neither
/// is ever stale), then runs the tests: those `gtest_filter` names, or all, whose result is
/// remembered (last_results.hpp). `labs` is the registry, for the lab's prerequisites.
/// @throws EnvironmentError as build_targets does.
LabResult run_learner_tests(const Workspace& ws, const std::vector<Lab>& labs, const Lab& lab,
                            const std::string& gtest_filter = "");

/// Runs the already built test program `target` of lab `lab` (bin/test-labNN-learner, or a
/// mutant's): the tests `gtest_filter` names, or all, each failure ordered by block; with
/// `fail_fast`, only until the first failure.
LabResult run_built_tests(const Workspace& ws, const Lab& lab, const std::string& target,
                          const std::string& gtest_filter = "", bool fail_fast = false);

/// Builds every lab's learner tests and verify program (the target learner; if that fails, one
/// build per lab, so that a compile error in one lab leaves the others' results intact), then runs
/// the tests and remembers each lab's result.
std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs);

}  // namespace workbook
