#include "runner/learner_tests.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>

#include <nlohmann/json.hpp>

#include "runner/last_results.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// gtest's JSON report escapes each byte of a non-ASCII character on its own ("—", E2 80 94, is
// written "\u00E2\u0080\u0094"), so the parsed text holds one code point per original byte. Put
// the bytes back; text with any other non-ASCII character is left as it is.
std::string gtest_bytes(const std::string& parsed) {
  std::string bytes;
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const auto lead = static_cast<unsigned char>(parsed[i]);
    if (lead < 0x80) {
      bytes += parsed[i];
      continue;
    }
    const bool two_byte = (lead == 0xC2 || lead == 0xC3) && i + 1 < parsed.size() &&
                          (static_cast<unsigned char>(parsed[i + 1]) & 0xC0) == 0x80;
    if (!two_byte) return parsed;
    bytes +=
        static_cast<char>(((lead & 0x03) << 6) | (static_cast<unsigned char>(parsed[++i]) & 0x3F));
  }
  return bytes;
}

// The lines of GoogleTest's own assertion text (gtest 1.12) after its "file:line", put on one line
// with its values, or nullopt for any other text:
//   EXPECT_EQ, _FLOAT_EQ   "Expected equality of these values:", "  a", "    Which is: 3", "  4"
//                          -> "a (3) != 4"
//   EXPECT_NE, _LT, _GT …  "Expected: (a) < (b), actual: 3 vs 1" -> "expected a < b, got 3 vs 1"
//   EXPECT_NEAR            "The difference between a and b is 0.5, which exceeds t, where",
//                          "a evaluates to 1,", "b evaluates to 1.5, and", "t evaluates to 0.1."
//                          -> "|a - b| = 0.5 > t: a = 1, b = 1.5"
//   EXPECT_TRUE, _FALSE    "Value of: ok", "  Actual: false", "Expected: true" -> "ok is false"
//   EXPECT_THROW           "Expected: s throws an exception of type E.", "  Actual: it throws
//                          nothing." -> "s should throw E: it throws nothing"
// A message the test streams in (EXPECT_EQ(a, b) << "head 1") follows on its own lines; it is
// appended after "; ". The trace ("Google Test trace:") and an EXPECT_EQ's "With diff:" are not.
std::optional<std::string> assertion_summary(const std::vector<std::string>& lines) {
  if (lines.empty()) return std::nullopt;
  using workbench::starts_with;
  using workbench::trim;
  std::string summary;
  std::size_t next = 1;  // the first line of the test's own message
  static const std::regex comparison(
      R"(^Expected: \((.*)\) (!=|<|<=|>|>=) \((.*)\), actual: (.*)$)");
  static const std::regex near(
      R"(^The difference between (.*) and (.*) is (.*), which exceeds (.*), where$)");
  static const std::regex throws(R"(^Expected: (.*) throws an exception of type (.*)\.$)");
  std::smatch m;
  const bool scannable = workbench::scannable(lines[0]);  // a longer first line is none of these
  if (lines[0] == "Expected equality of these values:") {
    // Two operands, each "  expression" and, unless it is a literal, "    Which is: value".
    std::vector<std::string> operands;
    for (; next < lines.size() && starts_with(lines[next], "  "); ++next) {
      const std::string& line = lines[next];
      if (starts_with(line, "    Which is: ") && !operands.empty()) {
        std::string value = line.substr(14);  // long values cut, so that both operands show
        if (value.size() > 80) value = value.substr(0, 77) + "...";
        operands.back() += " (" + value + ")";
      } else if (!starts_with(line, "    "))
        operands.push_back(trim(line));
    }
    if (operands.size() != 2) return std::nullopt;
    summary = operands[0] + " != " + operands[1];
    if (next < lines.size() && lines[next] == "With diff:") {  // a multi-line string's diff
      for (++next; next < lines.size() && !lines[next].empty(); ++next) {
      }
    }
  } else if (scannable && std::regex_match(lines[0], m, comparison)) {
    summary =
        "expected " + m[1].str() + " " + m[2].str() + " " + m[3].str() + ", got " + m[4].str();
  } else if (scannable && std::regex_match(lines[0], m, near)) {
    summary = "|" + m[1].str() + " - " + m[2].str() + "| = " + m[3].str() + " > " + m[4].str();
    // "a evaluates to 1,", "b evaluates to 1.5, and", "t evaluates to 0.1.": a's and b's values.
    for (const std::string& operand : {m[1].str(), m[2].str()}) {
      const std::string prefix = operand + " evaluates to ";
      if (next < lines.size() && starts_with(lines[next], prefix)) {
        std::string value = lines[next].substr(prefix.size());
        for (const std::string end : {", and", ","})
          if (value.size() >= end.size() &&
              value.compare(value.size() - end.size(), end.size(), end) == 0) {
            value.resize(value.size() - end.size());
            break;
          }
        summary += (operand == m[1].str() ? ": " : ", ") + operand + " = " + value;
        ++next;
      }
    }
    if (next < lines.size() && lines[next].find(" evaluates to ") != std::string::npos) ++next;
  } else if (starts_with(lines[0], "Value of: ") && lines.size() >= 3 &&
             (trim(lines[1]) == "Actual: false" || trim(lines[1]) == "Actual: true") &&
             starts_with(lines[2], "Expected: ")) {
    summary = lines[0].substr(10) + " is " + trim(lines[1]).substr(8);
    next = 3;
  } else if (scannable && std::regex_match(lines[0], m, throws) && lines.size() >= 2 &&
             starts_with(trim(lines[1]), "Actual: ")) {
    summary = m[1].str() + " should throw " + m[2].str() + ": " + trim(lines[1]).substr(8);
    if (summary.back() == '.') summary.pop_back();
    next = 2;
  } else {
    return std::nullopt;
  }
  std::string message;
  for (; next < lines.size() && lines[next] != "Google Test trace:"; ++next)
    if (!trim(lines[next]).empty()) message += (message.empty() ? "" : " ") + trim(lines[next]);
  return message.empty() ? summary : summary + "; " + message;
}

}  // namespace

// GoogleTest's failure text: "file:line", what failed (the expression, "Actual: false (…)" with
// our checks' expected vs got, max abs diff and where; or gtest's own text for EXPECT_EQ and the
// like, see assertion_summary), then "Google Test trace:" and one "file:line: text" per
// SCOPED_TRACE ("head 1", "role q"), which pinpoints the case.
TestFailure parse_failure(const std::string& test, const std::string& failure) {
  TestFailure parsed{test, "", {}};
  std::vector<std::string> lines = workbench::split_lines(failure);
  if (!lines.empty()) lines.erase(lines.begin());  // "…/lab00_test.cpp:37" or "unknown file"
  std::string rest;
  for (const auto& line : lines) rest += line + "\n";
  const std::string exception = "C++ exception with description \"";
  if (const auto at = rest.find(exception); at != std::string::npos) {
    const auto start = at + exception.size();
    const auto end = rest.find("\" thrown", start);
    parsed.summary =
        "threw: " + rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    parsed.details = {parsed.summary};
    if (parsed.summary.size() > 240) parsed.summary = parsed.summary.substr(0, 237) + "...";
    return parsed;
  }
  static const std::regex trace_line(R"(^.*?:\d+: (.*)$)");
  bool in_trace = false;
  for (const auto& raw : lines) {
    const std::string line = workbench::trim(raw);
    if (line.empty()) continue;
    if (line == "Google Test trace:") {
      in_trace = true;
      continue;
    }
    std::smatch m;
    if (in_trace && workbench::scannable(line) && std::regex_match(line, m, trace_line)) {
      parsed.details.push_back("trace: " + m[1].str());
      continue;
    }
    parsed.details.push_back(line);
    const std::string actual = "Actual: false (";
    if (const auto at = line.find(actual); at != std::string::npos && parsed.summary.empty()) {
      parsed.summary = line.substr(at + actual.size());
      if (!parsed.summary.empty() && parsed.summary.back() == ')') parsed.summary.pop_back();
    }
  }
  if (parsed.summary.empty())
    if (const auto summary = assertion_summary(lines)) parsed.summary = *summary;
  // FAIL() << message (a stub test's TODO) reads "Failed", then the message.
  if (parsed.summary.empty() && !parsed.details.empty())
    parsed.summary = parsed.details.size() > 1 && parsed.details.front() == "Failed"
                         ? parsed.details[1]
                         : parsed.details.front();
  if (parsed.summary.size() > 240) parsed.summary = parsed.summary.substr(0, 237) + "...";
  return parsed;
}

std::string last_test_started(const std::string& output) {
  static const std::string kRun = "[ RUN      ] ";
  std::string last;
  for (std::size_t at = output.find(kRun); at != std::string::npos;
       at = output.find(kRun, at + kRun.size())) {
    const std::size_t start = at + kRun.size();
    const std::size_t end = output.find_first_of(" \t\r\n\f\v", start);
    if (end != start) last = output.substr(start, end == std::string::npos ? end : end - start);
  }
  return last;
}

std::string sanitizer_finding(const std::string& output, const Workspace& ws) {
  static const std::regex sanitizer(
      R"(SUMMARY: (\w+Sanitizer: \S+) (\S+?:\d+)(:\d+)?( in ([^(]+))?)");
  static const std::regex runtime_error(R"(^(\S+?:\d+):\d+: runtime error: (.*)$)");
  const std::vector<std::string> lines = workbench::split_lines(output);
  std::smatch m;
  for (const std::string& line : lines)
    if (workbench::scannable(line) && std::regex_search(line, m, sanitizer))
      return ": " + m[1].str() + " at " + ws.relative(m[2].str()) +
             (m[5].matched ? " in " + m[5].str() : "");
  for (const std::string& line : lines)
    if (workbench::scannable(line) && std::regex_match(line, m, runtime_error))
      return ": " + m[2].str() + " at " + ws.relative(m[1].str());
  return "";
}

namespace {

// The registry's order: by block (A before B), then as the block lists its tests, which is the
// test file's order, the most basic first. Tests the registry does not list go last.
void order_by_block(const Lab& lab, std::vector<TestFailure>& failures) {
  auto rank = [&](const std::string& test) {
    std::size_t n = 0;
    for (const Block& block : lab.blocks)
      for (const std::string& listed : block.tests) {
        if (listed == test) return n;
        ++n;
      }
    return n;
  };
  std::stable_sort(
      failures.begin(), failures.end(),
      [&](const TestFailure& a, const TestFailure& b) { return rank(a.test) < rank(b.test); });
}

}  // namespace

LabResult run_built_tests(const Workspace& ws, const Lab& lab, const std::string& target,
                          const std::string& gtest_filter, bool fail_fast) {
  LabResult result;
  result.build.ok = true;
  // One report per run: two commands on one build folder may run the same tests (BuildLock keeps
  // them apart, but a report must never be read by the wrong run).
  const fs::path report =
      ws.build / "workbook" / (target + "." + std::to_string(getpid()) + ".json");
  fs::create_directories(report.parent_path());
  fs::remove(report);
  struct RemovedAfterReading {
    const fs::path& path;
    ~RemovedAfterReading() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } removed{report};
  workbench::CaptureOptions options;
  const std::chrono::seconds limit = time_limit(kTestTimeLimit);
  options.time_limit = limit;
  std::vector<std::string> args = {"--gtest_output=json:" + report.string()};
  if (!gtest_filter.empty()) args.push_back("--gtest_filter=" + gtest_filter);
  if (fail_fast) args.push_back("--gtest_fail_fast");
  const auto [program, command_args] = lab.command(ws.bin(target).string(), args);
  const workbench::CapturedRun run = workbench::run_captured(program, command_args, options);
  const std::string last = last_test_started(run.output);  // running when it stopped
  if (run.status.timed_out)
    result.problem = "lab " + lab.number + "'s tests ran past the " +
                     std::to_string(limit.count()) + " s limit and were stopped" +
                     (last.empty() ? "" : ", in " + last) + ": is there an endless loop?";
  else if (crashed(run.status))
    result.problem =
        target + " " + how_it_ended(run.status, limit) + (last.empty() ? "" : " in " + last);
  if (!fs::exists(report)) {
    result.status = LabStatus::in_progress;
    if (result.problem.empty())
      result.problem = target + " stopped (" + run.status.describe() + ")" +
                       (last.empty() ? "" : " in " + last) + " and wrote no report";
    // In the debug preset a sanitizer stops the tests: its one-line summary names the line.
    result.problem += sanitizer_finding(run.output, ws);
    return result;
  }

  std::ifstream in(report);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json json = workbench::json_too_deep(text)
                                  ? nlohmann::json(nlohmann::json::value_t::discarded)
                                  : nlohmann::json::parse(text, nullptr, false);
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
        result.passed_tests.push_back(suite.value("name", "") + "." + test.value("name", ""));
        all_todo = false;
        continue;
      }
      const std::string name = suite.value("name", "") + "." + test.value("name", "");
      TestFailure failure = parse_failure(name, gtest_bytes(failures[0].value("failure", "")));
      const auto todo = todo_in(failure.summary);
      all_todo = all_todo && todo && todo->first == lab.number;
      result.failures.push_back(std::move(failure));
    }
  }
  order_by_block(lab, result.failures);
  if (result.total > 0 && result.passed == result.total && result.problem.empty())
    result.status = LabStatus::done;
  else if (result.total > 0 && all_todo && result.problem.empty())
    result.status = LabStatus::todo;
  else
    result.status = LabStatus::in_progress;
  return result;
}

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

LabResult run_learner_tests(const Workspace& ws, const std::vector<Lab>& labs, const Lab& lab,
                            const std::string& gtest_filter) {
  const std::string inputs = fingerprint(ws, labs, lab);  // before the build reads them
  LabResult result;                                       // status build_error
  result.build = build_targets(ws, {lab.learner_target()});
  if (result.build.ok) {
    BuildResult build = std::move(result.build);  // its warnings, which check shows
    result = run_built_tests(ws, lab, lab.target("test", "learner"), gtest_filter);
    result.build = std::move(build);
  }
  if (gtest_filter.empty()) remember_result(ws, lab, inputs, result);
  return result;
}

std::vector<LabResult> run_all(const Workspace& ws, const std::vector<Lab>& labs) {
  // One build of every lab's programs (the target "learner"); if it fails, one per lab, so that a
  // compile error in one lab's file marks that lab (and the labs built on it) and no other. A lab
  // the build folder has no programs for (one being added) gets its own build, which says so.
  std::vector<std::string> inputs;
  for (const Lab& lab : labs) inputs.push_back(fingerprint(ws, labs, lab));
  const BuildResult all = build_targets(ws, {"learner"});
  const bool all_built = all.ok;
  std::vector<LabResult> results;
  for (std::size_t i = 0; i < labs.size(); ++i) {
    const Lab& lab = labs[i];
    if (!all_built || !fs::exists(ws.bin(lab.target("test", "learner")))) {
      results.push_back(run_learner_tests(ws, labs, lab));
      continue;
    }
    results.push_back(run_built_tests(ws, lab, lab.target("test", "learner")));
    results.back().build = all;  // its warnings, which check shows
    remember_result(ws, lab, inputs[i], results.back());
  }
  return results;
}

}  // namespace workbook
