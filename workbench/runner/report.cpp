#include "runner/report.hpp"

#include <algorithm>
#include <iostream>
#include <regex>
#include <set>

#include "util/text.hpp"

namespace workbook {
namespace {

// "not started: Block A of labs/00-….md", one line per (lab, block) whose TODO was reached.
std::vector<std::string> not_started(const Context& ctx, const std::vector<TestFailure>& failures) {
  std::vector<std::string> lines;
  std::set<std::pair<std::string, std::string>> seen;
  for (const TestFailure& f : failures) {
    const auto todo = todo_in(f.summary);
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

namespace {

// `warning` ("path:8:25: warning: …") as "file:8:25: warning: …" if its path is `file` (relative
// to the repository) or `file` in another checkout ("/elsewhere/src/…/x.cpp", which a compiler
// cache replays); "" otherwise.
std::string warning_in(const std::string& warning, const std::string& file) {
  if (workbench::starts_with(warning, file + ":")) return warning;
  const std::size_t head = warning.find(": warning: ");
  const std::size_t at = warning.find("/" + file + ":");
  if (warning.empty() || warning[0] != '/' || head == std::string::npos ||
      at == std::string::npos || at > head)
    return "";
  return warning.substr(at + 1);
}

}  // namespace

void print_learner_warnings(const Context& ctx, const Lab& lab, const BuildResult& build) {
  std::vector<std::string> files = lab.learner_files;
  for (const std::string& number : lab.prerequisites)
    if (const Lab* prerequisite = find_lab(ctx.labs, number))
      files.insert(files.end(), prerequisite->learner_files.begin(),
                   prerequisite->learner_files.end());
  std::vector<std::string> yours;
  for (const std::string& warning : build.warnings)
    for (const std::string& file : files)
      if (std::string in_file = warning_in(warning, file); !in_file.empty()) {
        yours.push_back(std::move(in_file));
        break;
      }
  if (yours.empty()) return;
  std::string first = yours.front();
  if (first.size() > 240) {  // a template's: one line, cut between two UTF-8 characters
    std::size_t cut = 237;
    while (cut > 0 && (static_cast<unsigned char>(first[cut]) & 0xC0) == 0x80) --cut;
    first = first.substr(0, cut) + "...";
  }
  std::cout << "  " << ctx.yellow(first) << '\n'
            << "  ("
            << (yours.size() == 1
                    ? "the compiler's only warning"
                    : "the first of " + std::to_string(yours.size()) + " compiler warnings")
            << " in your files; full build output: " << ctx.ws.relative(build.log) << ")\n";
}

std::string next_step(const Lab& lab, const LabResult& result) {
  switch (result.status) {
    case LabStatus::done:
      return "workbook verify " + lab.number + ", then answer the questions in " + lab.experiment +
             "/README.md";
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

namespace {

const Block* block_named(const Lab& lab, const std::string& id) {
  for (const Block& block : lab.blocks)
    if (block.id == id) return &block;
  return nullptr;
}

// A value that came out NaN, as gtest and the tests' checks print it ("actual nan", "evaluates to
// nan", "Which is: nan", "got nan"); not a NaN a test expects or talks about (lab 11's).
bool mentions_nan(const TestFailure& f) {
  static const std::regex nan(R"(\b(actual|evaluates to|Which is:|got) -?nan\b)");
  for (const std::string& line : f.details)
    if (workbench::scannable(line) && std::regex_search(line, nan)) return true;
  return false;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What the pattern of failures says that no single failure does.
std::vector<std::string> diagnoses(const Lab& lab, const LabResult& result,
                                   const std::vector<const TestFailure*>& failures) {
  std::vector<std::string> lines;
  if (std::any_of(failures.begin(), failures.end(),
                  [](const TestFailure* f) { return mentions_nan(*f); }))
    lines.push_back(
        "a NaN: an exp overflowed or a whole row was masked; subtract each row's maximum "
        "before exp, and give a fully masked row zeros (theory/02)");
  const bool weights_pass =
      std::any_of(result.passed_tests.begin(), result.passed_tests.end(),
                  [](const std::string& t) { return contains(t, "RowSumsToOne"); });
  const bool outputs_fail = std::any_of(failures.begin(), failures.end(), [](const TestFailure* f) {
    return contains(f->test, "MatchesTorch") || contains(f->test, "Equals");
  });
  const bool one_block = std::all_of(failures.begin(), failures.end(), [&](const TestFailure* f) {
    return lab.block_for(f->test, f->summary) ==
           lab.block_for(failures[0]->test, failures[0]->summary);
  });
  if (weights_pass && outputs_fail && one_block)
    lines.push_back(
        "the attention weights pass their checks but the outputs do not: look at what "
        "comes after the softmax (the values, merging the heads, W_O)");
  lines.push_back("`workbook diff " + lab.number +
                  "` runs your code and the reference on the same inputs and names each output "
                  "that differs");
  return lines;
}

}  // namespace

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
    print_learner_warnings(ctx, lab, result.build);
    std::cout << "next: " << next_step(lab, result) << '\n';
    return kSuccess;
  }
  std::cout << result.passed << " of " << result.total << " tests pass\n";
  print_learner_warnings(ctx, lab, result.build);
  if (!result.problem.empty()) std::cout << "  " << ctx.red(result.problem) << '\n';
  for (const std::string& line : not_started(ctx, result.failures))
    std::cout << "  " << ctx.yellow(line) << '\n';

  // The failures are in block order: the first failing block is most likely the root cause, so
  // it is shown in full; later blocks, which often fail only because of it, one line each.
  std::vector<const TestFailure*> failures;
  for (const TestFailure& f : result.failures)
    if (!todo_in(f.summary)) failures.push_back(&f);
  if (failures.empty()) {
    std::cout << "next: " << next_step(lab, result) << '\n';
    return kNotDone;
  }
  const std::string first_block = lab.block_for(failures.front()->test, failures.front()->summary);
  std::size_t later = 0;
  constexpr std::size_t kLaterShown = 6;  // the rest is one ctest command away
  for (const TestFailure* f : failures) {
    const std::string block = lab.block_for(f->test, f->summary);
    if (block == first_block) {
      std::cout << "  " << ctx.red("FAIL") << ' ' << f->test << '\n';
      for (const std::string& line : f->details) std::cout << "       " << line << '\n';
      continue;
    }
    if (later == 0) std::cout << "  later blocks, which may fail only because of the one above:\n";
    if (++later <= kLaterShown)
      std::cout << "  " << ctx.red("FAIL") << ' ' << f->test
                << (block.empty() ? "" : " (Block " + block + ")") << ": " << f->summary << '\n';
  }
  if (later > kLaterShown)
    std::cout << "  … and " << later - kLaterShown << " more (ctest --preset learner -L lab"
              << lab.number << " --output-on-failure)\n";
  if (const Block* block = block_named(lab, first_block))
    std::cout << "revisit Block " << block->id << " — " << block->title << " of " << lab.text
              << '\n';
  for (const std::string& line : diagnoses(lab, result, failures))
    std::cout << "hint: " << line << '\n';
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
