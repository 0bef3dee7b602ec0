#include "learner_tests.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../process.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// GoogleTest's failure text starts with "file:line"; keep what a learner can act on.
std::string useful_message(const std::string& failure) {
  std::vector<std::string> lines = split_lines(failure);
  if (!lines.empty()) lines.erase(lines.begin());  // "…/lab00_test.cpp:37" or "unknown file"
  const std::string rest = [&] {
    std::string joined;
    for (const auto& line : lines) joined += line + "\n";
    return joined;
  }();
  const std::string exception = "C++ exception with description \"";
  if (const auto at = rest.find(exception); at != std::string::npos) {
    const auto start = at + exception.size();
    const auto end = rest.find("\" thrown", start);
    return "threw: " + rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
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
    if (!trim(line).empty()) joined += (joined.empty() ? "" : " ") + trim(line);
  if (joined.size() > 240) joined = joined.substr(0, 237) + "...";
  return joined;
}

int parallel_jobs() {
  if (const char* level = std::getenv("CMAKE_BUILD_PARALLEL_LEVEL"); level && std::atoi(level) > 0)
    return std::atoi(level);
  return 2;  // as the default build preset
}

}  // namespace

std::string Workspace::relative(const fs::path& path) const {
  const fs::path rel = path.lexically_normal().lexically_relative(repo.lexically_normal());
  if (rel.empty() || rel.native().rfind("..", 0) == 0) return path.string();
  return rel.string();
}

std::string first_error(const std::string& build_output, const Workspace& ws) {
  static const std::regex error(R"(^(.+?):(\d+):(\d+:)? (fatal error|error): (.*)$)");
  static const std::regex source_line(R"(^\s*\d*\s*\|.*$)");
  const std::vector<std::string> lines = split_lines(build_output);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, error)) continue;
    std::string text = ws.relative(fs::path(m[1].str())) + ":" + m[2].str() + ":" + m[3].str() + " " +
                       m[4].str() + ": " + m[5].str();
    for (std::size_t j = i + 1; j < lines.size() && j <= i + 3 && std::regex_match(lines[j], source_line); ++j)
      text += "\n" + lines[j];
    return text;
  }
  for (const auto& line : lines)  // the linker's messages carry no line number
    if (line.find("undefined reference") != std::string::npos || line.find("error:") != std::string::npos)
      return trim(line);
  std::string tail;
  for (std::size_t i = lines.size() > 10 ? lines.size() - 10 : 0; i < lines.size(); ++i) tail += lines[i] + "\n";
  return trim(tail);
}

BuildResult build_targets(const Workspace& ws, const std::vector<std::string>& targets) {
  if (!fs::exists(ws.build / "CMakeCache.txt"))
    throw EnvironmentError(ws.build.string() + " is not a configured build folder; from " + ws.repo.string() +
                           " run `cmake --preset default` (or pass --build-dir)");
  std::vector<std::string> args = {"--build", ws.build.string(), "-j", std::to_string(parallel_jobs()), "--target"};
  args.insert(args.end(), targets.begin(), targets.end());
  workbench::CapturedRun run;
  try {
    run = workbench::run_captured("cmake", args);
  } catch (const std::exception& e) {
    throw EnvironmentError(std::string(e.what()) + " (is cmake on PATH?)");
  }
  BuildResult result;
  result.log = ws.build / "workbook-build.log";
  std::ofstream(result.log) << run.output;
  result.ok = run.status.exited && run.status.code == 0;
  if (!result.ok) result.first_error = first_error(run.output, ws);
  return result;
}

std::string status_name(LabStatus status) {
  switch (status) {
    case LabStatus::done: return "done";
    case LabStatus::in_progress: return "in progress";
    case LabStatus::todo: return "todo";
    case LabStatus::build_error: return "build error";
  }
  return "?";
}

LabResult run_learner_tests(const Workspace& ws, const Lab& lab) {
  LabResult result;
  const std::string target = "test-lab" + lab.number + "-learner";
  result.build = build_targets(ws, {target});
  if (!result.build.ok) return result;

  const fs::path report = ws.build / "workbook" / ("lab" + lab.number + "-learner.json");
  fs::create_directories(report.parent_path());
  fs::remove(report);
  const workbench::CapturedRun run =
      workbench::run_captured((ws.build / "bin" / target).string(), {"--gtest_output=json:" + report.string()});
  if (!run.status.exited) {
    static const std::regex running(R"(\[ RUN      \] (\S+))");
    std::string last;
    for (std::sregex_iterator it(run.output.begin(), run.output.end(), running), end; it != end; ++it)
      last = (*it)[1];
    result.problem = target + " crashed with " + run.status.describe() + (last.empty() ? "" : " in " + last);
  }
  if (!fs::exists(report)) {
    result.status = LabStatus::in_progress;
    if (result.problem.empty()) result.problem = target + " wrote no report (" + run.status.describe() + ")";
    return result;
  }

  std::ifstream report_file(report);
  const nlohmann::json json = nlohmann::json::parse(report_file);
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

std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs, bool stop_at_first_not_done) {
  std::vector<LabResult> results;
  for (const Lab& lab : labs) {
    results.push_back(run_learner_tests(ws, lab));
    if (stop_at_first_not_done && results.back().status != LabStatus::done) break;
  }
  return results;
}

}  // namespace workbook
