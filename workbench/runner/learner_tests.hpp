#pragma once
// Running a lab's learner tests: bin/test-labNN-learner with --gtest_output=json, time-limited,
// whose report gives passed/total and each failure's message.
#include <chrono>
#include <string>
#include <vector>

#include "runner/registry.hpp"
#include "runner/workspace.hpp"

namespace workbook {

/// How long one lab's learner tests may run before they are stopped (an endless loop in a stub).
/// The reference runs each lab's tests in a few seconds.
constexpr std::chrono::seconds kTestTimeLimit{120};

enum class LabStatus { done, in_progress, todo, build_error };
std::string status_name(LabStatus status);  ///< "done", "in progress", "todo", "build error"

struct TestFailure {
  std::string test;     ///< "Softmax.EveryRowSumsToOne"
  std::string message;  ///< the useful part of GoogleTest's failure text
};

struct LabResult {
  LabStatus status = LabStatus::build_error;
  int passed = 0;
  int total = 0;
  std::vector<TestFailure> failures;
  BuildResult build;
  std::string problem;  ///< e.g. "test-lab00-learner crashed with signal 11 … in Softmax.X"
};

/// Builds bin/test-labNN-learner and runs it. @throws EnvironmentError as build_targets does.
LabResult run_learner_tests(const Workspace& ws, const Lab& lab);

/// Builds every lab's learner tests in one build, then runs them in order.
std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs);

}  // namespace workbook
