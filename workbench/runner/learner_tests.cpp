#include "runner/learner_tests.hpp"

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// GoogleTest's failure text starts with "file:line"; keep what a learner can act on.
std::string useful_message(const std::string& failure) {
  std::vector<std::string> lines = workbench::split_lines(failure);
  if (!lines.empty()) lines.erase(lines.begin());  // "…/lab00_test.cpp:37" or "unknown file"
  std::string rest;
  for (const auto& line : lines) rest += line + "\n";
  const std::string exception = "C++ exception with description \"";
  if (const auto at = rest.find(exception); at != std::string::npos) {
    const auto start = at + exception.size();
    const auto end = rest.find("\" thrown", start);
    return "threw: " +
           rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  for (const auto& line : lines) {
    const std::string actual = "Actual: false (";
    if (const auto at = line.find(actual); at != std::string::npos) {
      std::string inner = line.substr(at + actual.size());
      if (!inner.empty() && inner.back() == ')') inner.pop_back();
      return inner;
    }
  }
  std::string joined;
  for (const auto& line : lines)
    if (!workbench::trim(line).empty())
      joined += (joined.empty() ? "" : " ") + workbench::trim(line);
  if (joined.size() > 240) joined = joined.substr(0, 237) + "...";
  return joined;
}

// Runs the built bin/test-labNN-learner and reads its JSON report.
LabResult test_lab(const Workspace& ws, const Lab& lab) {
  LabResult result;
  result.build.ok = true;
  const std::string target = lab.target("test", "learner");
  const fs::path report = ws.build / "workbook" / ("lab" + lab.number + "-learner.json");
  fs::create_directories(report.parent_path());
  fs::remove(report);
  workbench::CaptureOptions options;
  options.time_limit = kTestTimeLimit;
  const workbench::CapturedRun run = workbench::run_captured(
      ws.bin(target).string(), {"--gtest_output=json:" + report.string()}, options);
  static const std::regex running(R"(\[ RUN      \] (\S+))");
  std::string last;  // the test that was running when it stopped
  for (std::sregex_iterator it(run.output.begin(), run.output.end(), running), end; it != end; ++it)
    last = (*it)[1];
  if (run.status.timed_out)
    result.problem = "lab " + lab.number + "'s tests ran past the " +
                     std::to_string(kTestTimeLimit.count()) + " s limit and were stopped" +
                     (last.empty() ? "" : ", in " + last) + ": is there an endless loop?";
  else if (!run.status.exited)
    result.problem =
        target + " crashed with " + run.status.describe() + (last.empty() ? "" : " in " + last);
  if (!fs::exists(report)) {
    result.status = LabStatus::in_progress;
    if (result.problem.empty())
      result.problem = target + " wrote no report (" + run.status.describe() + ")";
    return result;
  }

  const nlohmann::json json = nlohmann::json::parse(std::ifstream(report), nullptr, false);
  if (json.is_discarded()) {
    result.status = LabStatus::in_progress;
    result.problem = target + " wrote an unreadable report " + report.string();
    return result;
  }
  bool all_todo = true;
  for (const auto& suite : json.value("testsuites", nlohmann::json::array())) {
    for (const auto& test : suite.value("testsuite", nlohmann::json::array())) {
      if (test.value("status", "RUN") != "RUN" || test.value("result", "") == "SKIPPED") continue;
      ++result.total;
      const auto failures = test.value("failures", nlohmann::json::array());
      if (failures.empty()) {
        ++result.passed;
        all_todo = false;
        continue;
      }
      const std::string message = useful_message(failures[0].value("failure", ""));
      const auto todo = todo_in(message);
      all_todo = all_todo && todo && todo->first == lab.number;
      result.failures.push_back({suite.value("name", "") + "." + test.value("name", ""), message});
    }
  }
  if (result.total > 0 && result.passed == result.total && result.problem.empty())
    result.status = LabStatus::done;
  else if (result.total > 0 && all_todo && result.problem.empty())
    result.status = LabStatus::todo;
  else
    result.status = LabStatus::in_progress;
  return result;
}

}  // namespace

std::string status_name(LabStatus status) {
  switch (status) {
    case LabStatus::done:
      return "done";
    case LabStatus::in_progress:
      return "in progress";
    case LabStatus::todo:
      return "todo";
    case LabStatus::build_error:
      return "build error";
  }
  return "?";
}

LabResult run_learner_tests(const Workspace& ws, const Lab& lab) {
  const BuildResult build = build_targets(ws, {lab.target("test", "learner")});
  if (!build.ok) return {LabStatus::build_error, 0, 0, {}, build, ""};
  return test_lab(ws, lab);
}

std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs) {
  std::vector<std::string> targets;
  for (const Lab& lab : labs) targets.push_back(lab.target("test", "learner"));
  const BuildResult build = build_targets(ws, targets);
  std::vector<LabResult> results;
  for (const Lab& lab : labs)
    results.push_back(build.ok ? test_lab(ws, lab)
                               : LabResult{LabStatus::build_error, 0, 0, {}, build, ""});
  return results;
}

}  // namespace workbook
