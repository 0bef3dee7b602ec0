#pragma once
// Building the workbook's targets and running a lab's learner tests, as child processes: cmake and
// ctest from PATH (as the README's commands find them), then bin/test-labNN-learner with
// --gtest_output=json, whose report gives passed/total and each failure's message.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab_registry.hpp"

namespace workbook {

/// A problem with the environment rather than the learner's code (exit status 2).
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The repository and its build folder.
struct Workspace {
  std::filesystem::path repo;
  std::filesystem::path build;
  /// Relative to the repository when inside it, for short messages.
  std::string relative(const std::filesystem::path& path) const;
};

struct BuildResult {
  bool ok = false;
  std::string first_error;  ///< "src/…/scaled_dot_product.cpp:18:5: error: …" and its source lines
  std::filesystem::path log;  ///< the full output of the build, always kept
};

/// `cmake --build BUILD --target …`, its whole output kept in BUILD/workbook-build.log.
/// @throws EnvironmentError if BUILD is not configured or cmake cannot run.
BuildResult build_targets(const Workspace& ws, const std::vector<std::string>& targets);

/// The first compiler or linker error in a build's output, trimmed to a few lines.
std::string first_error(const std::string& build_output, const Workspace& ws);

enum class LabStatus { done, in_progress, todo, build_error };
std::string status_name(LabStatus status);  ///< "done", "in progress", "todo", "build error"

struct TestFailure {
  std::string test;     ///< "Softmax.EveryRowSumsToOne"
  std::string message;  ///< the first useful line of GoogleTest's failure text
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

/// Runs every lab's learner tests in order, stopping early after the first lab that is not done
/// if `stop_at_first_not_done`.
std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs, bool stop_at_first_not_done);

}  // namespace workbook
