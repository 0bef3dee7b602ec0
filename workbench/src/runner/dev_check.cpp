// `workbook dev-check`: the maintainers' check that every lab is complete, run by .ci/run on a
// pristine checkout. It parses labs/*.md, README.md's lab map and the file layout itself, and reuses
// ctest for what ctest already checks: the pristine stubs (label "stubs"), the reference tests, the
// verify programs and their artifacts (label "reference", tests labNN.reference.artifacts).
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "../process.hpp"
#include "verbs.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

const std::vector<std::string> kRequiredSections = {"Goal",        "Prereq",          "Files you edit", "What you produce",
                                                    "TODO blocks", "Stop conditions", "Hints"};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

void check_lab_text(const Context& ctx, const Lab& lab, std::vector<std::string>& defects) {
  for (const std::string& section : kRequiredSections)
    if (!lab.has_section(section)) defects.push_back(lab.text() + ": no \"## " + section + "\" section");
  if (lab.has_section("Hints") && lab.hints.empty())
    defects.push_back(lab.text() + ": \"## Hints\" has no \"### Hint 1\"");
  if (lab.has_section("Files you edit") && lab.learner_files.empty())
    defects.push_back(lab.text() + ": \"## Files you edit\" names no `src/….cpp` file");
  for (const std::string& file : lab.learner_files) {
    if (!fs::exists(ctx.ws.repo / file)) defects.push_back(lab.text() + ": learner file " + file + " does not exist");
    const std::string reference = "solutions/" + file.substr(4);
    if (!fs::exists(ctx.ws.repo / reference))
      defects.push_back(lab.text() + ": no reference " + reference + " for " + file);
  }
  if (lab.blocks.empty()) defects.push_back(lab.text() + ": no block (\"### Block A\" or TODO(lab " + lab.number + ", Block A))");

  const std::string tests = "tests/lab" + lab.number + "_test.cpp", verify = "verify/lab" + lab.number + "_verify.cpp";
  if (!fs::exists(ctx.ws.repo / tests)) defects.push_back("lab " + lab.number + " has no tests: " + tests + " is missing");
  if (!fs::exists(ctx.ws.repo / verify))
    defects.push_back("lab " + lab.number + " has no verify program: " + verify + " is missing");
  if (!fs::exists(ctx.ws.repo / lab.write_up()))
    defects.push_back("lab " + lab.number + " has no solutions write-up: " + lab.write_up() + " is missing");
}

// README.md's lab map: rows like "| [00 — Attention by hand](labs/00-attention-by-hand.md) | … |".
void check_readme(const Context& ctx, std::vector<std::string>& defects) {
  static const std::regex row(R"(^\| \[(\d\d) — ([^\]]*)\]\(([^)]*)\) \|.*$)");
  std::map<std::string, std::pair<std::string, std::string>> rows;  // number -> title, link
  std::istringstream lines(read_file(ctx.ws.repo / "README.md"));
  for (std::string line; std::getline(lines, line);)
    if (std::smatch m; std::regex_match(line, m, row)) rows[m[1]] = {m[2], m[3]};
  for (const Lab& lab : ctx.labs) {
    const auto it = rows.find(lab.number);
    if (it == rows.end()) {
      defects.push_back("README.md's lab map has no row for lab " + lab.number + " (" + lab.text() + ")");
      continue;
    }
    if (it->second.second != lab.text())
      defects.push_back("README.md's lab map links lab " + lab.number + " to " + it->second.second + ", not " + lab.text());
    if (it->second.first != lab.title)
      defects.push_back("README.md's lab map calls lab " + lab.number + " \"" + it->second.first + "\" but " +
                        lab.text() + " says \"" + lab.title + "\"");
  }
  for (const auto& [number, title_link] : rows)
    if (!find_lab(ctx.labs, number))
      defects.push_back("README.md's lab map lists lab " + number + " (" + title_link.second + ") but labs/ has no " +
                        number + "-*.md");
}

workbench::CapturedRun ctest(const Context& ctx, std::vector<std::string> args) {
  args.insert(args.begin(), {"--test-dir", ctx.ws.build.string()});
  try {
    return workbench::run_captured("ctest", args);
  } catch (const std::exception& e) {
    throw EnvironmentError(std::string(e.what()) + " (is ctest on PATH?)");
  }
}

bool registered_with_ctest(const Context& ctx, const Lab& lab) {
  const auto run = ctest(ctx, {"-N", "-R", "^lab" + lab.number + "\\.(stubs|reference\\.verify)$"});
  return run.output.find("Total Tests: 2") != std::string::npos;
}

// One defect per failing or skipped test of a ctest run, with the lines of its output that say why.
void ctest_defects(const Context& ctx, const std::string& label, const std::string& names,
                   std::vector<std::string>& defects) {
  const auto run = ctest(ctx, {"-L", label, "-R", names, "--output-on-failure", "--timeout", "600"});
  static const std::regex status_line(R"(^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(\w+).*$)");
  static const std::regex lab_of(R"(^lab(\d\d)\.)");
  std::vector<std::string> lines;
  std::istringstream in(run.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  bool any = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, status_line)) continue;
    any = true;
    const std::string test = m[1], result = m[3];
    if (result == "Passed") continue;
    std::smatch lab_match;
    const std::string lab = std::regex_search(test, lab_match, lab_of) ? "lab " + lab_match[1].str() : test;
    // The test's output runs until the next status line or ctest's summary.
    std::vector<std::string> output;
    for (std::size_t j = i + 1; j < lines.size() && !std::regex_match(lines[j], status_line) &&
                                lines[j].find("% tests passed") == std::string::npos;
         ++j)
      if (!trim(lines[j]).empty()) output.push_back(trim(lines[j]));
    auto matching = [&](const std::vector<std::string>& needles) {
      std::string text;
      for (const std::string& line : output)
        for (const std::string& needle : needles)
          if (line.find(needle) != std::string::npos) {
            text += (text.empty() ? "" : "; ") + line;
            break;
          }
      return text.empty() ? (output.empty() ? result : output.back()) : text;
    };
    if (result == "Skipped" && test.find(".stubs") != std::string::npos)
      defects.push_back(lab + ": the pristine-stub check was skipped because its learner files differ from the "
                              "commit; run dev-check on a pristine checkout");
    else if (test.find(".stubs") != std::string::npos)
      defects.push_back(lab + ": a pristine stub does not fail with its TODO (" + test + "): " +
                        matching({"passes on the pristine stubs", "crashed", "without a TODO", "no tests", "no report"}));
    else if (test.find(".artifacts") != std::string::npos)
      defects.push_back(lab + ": the reference verify program's artifacts are missing or invalid (" + test + "): " +
                        matching({"missing", "does not", "lacks", "not valid", "not true", "no manifest"}));
    else if (test.find(".verify") != std::string::npos)
      defects.push_back(lab + ": the reference verify program failed (" + test + "): " + matching({"[FAIL]", "TODO", "verify "}));
    else
      defects.push_back(lab + ": a reference test fails: " + test + " (" + result + ")");
  }
  if (!any) defects.push_back("ctest ran no " + label + " tests matching " + names + ":\n" + run.output);
}

}  // namespace

int dev_check(const Context& ctx, const std::vector<std::string>& only_labs) {
  std::vector<std::string> defects;
  for (const Lab& lab : ctx.labs) check_lab_text(ctx, lab, defects);
  check_readme(ctx, defects);

  // What needs the build: only the labs asked for (all by default) that ctest knows.
  std::vector<const Lab*> built;
  for (const Lab& lab : ctx.labs) {
    if (!only_labs.empty() && std::find(only_labs.begin(), only_labs.end(), lab.number) == only_labs.end()) continue;
    if (registered_with_ctest(ctx, lab)) built.push_back(&lab);
    else defects.push_back("lab " + lab.number + " has no tests in the build: is minimodel_lab(" + lab.number +
                           " …) in CMakeLists.txt?");
  }
  if (!built.empty()) {
    std::vector<std::string> targets = {"check-artifacts"};
    std::string names;
    for (const Lab* lab : built) {
      for (const char* impl : {"learner", "reference"})
        for (const char* kind : {"test", "verify"})
          targets.push_back(std::string(kind) + "-lab" + lab->number + "-" + impl);
      names += (names.empty() ? "" : "|") + lab->number;
    }
    std::cout << "building " << targets.size() << " targets…\n" << std::flush;
    const BuildResult build = build_targets(ctx.ws, targets);
    if (!build.ok) {
      defects.push_back("the build fails: " + build.first_error + "\n  (full output: " + ctx.ws.relative(build.log) + ")");
    } else {
      // Stale artifacts of an earlier run would hide a figure that is no longer drawn: start clean.
      for (const Lab* lab : built) fs::remove_all(ctx.ws.repo / "experiments" / lab->experiment() / "reference");
      const std::string regex = "^lab(" + names + ")\\.";
      std::cout << "running ctest -L stubs and -L reference…\n" << std::flush;
      ctest_defects(ctx, "stubs", regex, defects);
      ctest_defects(ctx, "reference", regex, defects);
    }
  }

  for (const std::string& defect : defects) std::cout << red(ctx, "defect") << ": " << defect << '\n';
  if (!defects.empty()) {
    std::cout << "dev-check: " << defects.size() << " defect" << (defects.size() == 1 ? "" : "s") << '\n';
    return 1;
  }
  std::cout << green(ctx, "dev-check: labs " + lab_range(ctx.labs) + " pass every check") << '\n';
  return 0;
}

}  // namespace workbook
