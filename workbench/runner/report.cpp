#include "runner/report.hpp"

#include <algorithm>
#include <iostream>
#include <set>

namespace workbook {
namespace {

// "not started: Block A of labs/00-….md", one line per (lab, block) whose TODO was reached.
std::vector<std::string> not_started(const Context& ctx, const std::vector<TestFailure>& failures) {
  std::vector<std::string> lines;
  std::set<std::pair<std::string, std::string>> seen;
  for (const TestFailure& f : failures) {
    const auto todo = todo_in(f.message);
    if (!todo || !seen.insert(*todo).second) continue;
    const Lab* lab = find_lab(ctx.labs, todo->first);
    lines.push_back("not started: Block " + todo->second + " of " +
                    (lab ? lab->text : "lab " + todo->first));
  }
  return lines;
}

}  // namespace

std::string heading(const Lab& lab) { return "lab " + lab.number + " — " + lab.title; }

std::string status_text(const Context& ctx, LabStatus status) {
  const std::string name = status_name(status);
  switch (status) {
    case LabStatus::done:
      return ctx.green(name);
    case LabStatus::in_progress:
      return ctx.yellow(name);
    case LabStatus::todo:
      return name;
    case LabStatus::build_error:
      return ctx.red(name);
  }
  return name;
}

void print_build_error(const Context& ctx, const BuildResult& build) {
  std::cout << ctx.red("the build failed") << ":\n"
            << build.first_error << '\n'
            << "full build output: " << ctx.ws.relative(build.log) << '\n';
}

std::string next_step(const Lab& lab, const LabResult& result) {
  switch (result.status) {
    case LabStatus::done:
      return "workbook verify " + lab.number + "   (then the next lab)";
    case LabStatus::todo:
      return "read " + lab.text + ", edit " +
             (lab.learner_files.empty() ? "its files" : lab.learner_files[0]) +
             ", then: workbook check " + lab.number;
    case LabStatus::in_progress:
      return "workbook check " + lab.number + "   (or: workbook hint " + lab.number + ")";
    case LabStatus::build_error:
      return "fix the error above, then: workbook check " + lab.number;
  }
  return "";
}

int print_check(const Context& ctx, const Lab& lab, const LabResult& result) {
  std::cout << ctx.bold(heading(lab)) << ": ";
  if (result.status == LabStatus::build_error) {
    std::cout << status_text(ctx, result.status) << '\n';
    print_build_error(ctx, result.build);
    std::cout << "next: " << next_step(lab, result) << '\n';
    return kNotDone;
  }
  if (result.status == LabStatus::done) {
    std::cout << ctx.green("all " + std::to_string(result.total) + " tests pass") << " — done\n";
    std::cout << "next: " << next_step(lab, result) << '\n';
    return kSuccess;
  }
  std::cout << result.passed << " of " << result.total << " tests pass\n";
  if (!result.problem.empty()) std::cout << "  " << ctx.red(result.problem) << '\n';
  for (const std::string& line : not_started(ctx, result.failures))
    std::cout << "  " << ctx.yellow(line) << '\n';
  constexpr std::size_t kShown = 6;  // the rest is one ctest command away
  std::size_t shown = 0, other = 0;
  for (const TestFailure& f : result.failures) {
    if (todo_in(f.message)) continue;
    if (shown == kShown) {
      ++other;
      continue;
    }
    ++shown;
    std::cout << "  " << ctx.red("FAIL") << ' ' << f.test << '\n' << "       " << f.message << '\n';
    if (const std::string block = lab.block_for(f.test, f.message); !block.empty())
      std::cout << "       revisit Block " << block << " of " << lab.text << '\n';
  }
  if (other)
    std::cout << "  … and " << other << " more failing tests (ctest --preset learner -L lab"
              << lab.number << ")\n";
  std::cout << "next: " << next_step(lab, result) << '\n';
  return kNotDone;
}

const Lab* current_lab(const Context& ctx, LabResult* result) {
  std::vector<LabResult> results = run_all(ctx.ws, ctx.labs);
  for (std::size_t i = 0; i < ctx.labs.size(); ++i)
    if (results[i].status != LabStatus::done) {
      if (result) *result = std::move(results[i]);
      return &ctx.labs[i];
    }
  return nullptr;
}

std::string pad(const std::string& text, std::size_t width) {
  std::size_t columns = 0;  // UTF-8 code points
  for (const unsigned char c : text) columns += (c & 0xC0) != 0x80;
  return columns >= width ? text + " " : text + std::string(width - columns, ' ');
}

std::size_t title_width(const std::vector<Lab>& labs) {
  std::size_t width = 0;
  for (const Lab& lab : labs) width = std::max(width, lab.title.size());
  return width + 1;
}

}  // namespace workbook
