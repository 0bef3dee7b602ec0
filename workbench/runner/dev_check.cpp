// `workbook dev-check`: the maintainers' check, run by .ci/run on a pristine checkout, that the
// registry (labs/labs.json) and the files agree, so that one source of truth drives the others:
//   files        every lab has its text, stubs, reference, tests, verify program, write-up and
//                experiment template (at the registry's layout paths); nothing in labs/ is
//                missing from the registry
//   lab texts    title, estimated time, prerequisites, learner files and blocks as the registry
//                says; the required sections and at least one hint; every Suite.Test they name
//                exists, and every test count they quote is the registry's
//   stubs/tests  the stubs' TODO blocks are the registry's blocks; every test of the lab's
//                tests belongs to exactly one of its blocks
//   README       its lab map is the table the registry makes (--write-lab-map writes it)
//   commands     every `ctest --preset NAME` in the prose names a test preset that exists, every
//                `workbook break NN NAME` a mutant
//   mutants      each lab's catalogue (labs/mutants/) has at least five, each change applies to
//                the reference; the lab text has "Break it", the write-up template a question on
//                what surprised the learner
// Then, unless --files-only, it builds every lab and reuses ctest for what ctest checks: the
// pristine stubs (label "stubs"), the reference tests, verify programs and artifacts (label
// "reference"), read from ctest's JUnit report (unless --tests-just-ran: .ci/run has just run
// those labels with `ctest --preset test`); and it lists what each `ctest --preset …` quoted in a
// lab text runs, which must be tests of the lab it names. Last, if the reference passes, it builds
// every mutant and runs the lab's tests on it: a mutant no test catches (a survivor) is a defect,
// and so is one marked equivalent that a test catches; it prints the mutation table. It never
// deletes or writes a file in the sources (except README.md's lab map, when asked to write it).
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include "runner/learner_tests.hpp"
#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

const std::vector<std::string> kRequiredSections = {
    "Goal",        "Estimated time",  "Prereq",   "Files you edit", "What you produce",
    "TODO blocks", "Stop conditions", "Break it", "Hints"};

// Each lab's catalogue holds at least this many mutants that a test must catch.
constexpr std::size_t kMinMutants = 5;

using Defects = std::vector<std::string>;

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text.empty() ? "none" : text;
}

template <class Container>
std::vector<std::string> sorted(const Container& items) {
  std::vector<std::string> list(items.begin(), items.end());
  std::sort(list.begin(), list.end());
  return list;
}

// A lab text cut into its "## " sections (code blocks do not start one); "" holds the title.
std::map<std::string, std::string> sections_of(const std::string& text) {
  std::map<std::string, std::string> sections;
  std::string current;
  bool in_code = false;
  for (const std::string& line : workbench::split_lines(text)) {
    if (workbench::starts_with(line, "```")) in_code = !in_code;
    if (!in_code && workbench::starts_with(line, "## ")) {
      current = workbench::trim(line.substr(3));
      sections[current];
      continue;
    }
    sections[current] += line + "\n";
  }
  return sections;
}

std::set<std::string> matches(const std::string& text, const std::regex& pattern, int group = 1) {
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
    found.insert((*it)[group]);
  return found;
}

// Every file the layout says a lab has. Returns whether all exist.
bool check_files(const Context& ctx, const Lab& lab, Defects& defects) {
  std::vector<std::pair<std::string, std::string>> files = {
      {lab.text, "its text"},
      {lab.tests, "its tests"},
      {lab.verify, "its verify program"},
      {lab.write_up, "its reference write-up"},
      {lab.experiment + "/README.md", "its write-up template"},
      {lab.mutants, "its mutants"}};
  for (const std::string& file : lab.learner_files) files.emplace_back(file, "a learner stub");
  for (const std::string& file : lab.reference_files) files.emplace_back(file, "a reference file");
  bool all = true;
  for (const auto& [file, what] : files)
    if (!fs::exists(ctx.ws.repo / file)) {
      defects.push_back("lab " + lab.number + " lacks " + file + " (" + what + ")");
      all = false;
    }
  return all;
}

void check_text(const Context& ctx, const Lab& lab, const std::set<std::string>& all_tests,
                Defects& defects) {
  if (!fs::exists(ctx.ws.repo / lab.text)) return;
  const std::string text = workbench::read_file(ctx.ws.repo / lab.text);
  const auto sections = sections_of(text);
  const std::string where = lab.text + ": ";

  const std::string title_line = "# Lab " + lab.number + " — " + lab.title;
  if (workbench::split_lines(text).empty() || workbench::split_lines(text)[0] != title_line)
    defects.push_back(where + "the first line is not \"" + title_line +
                      "\" (the registry's title)");
  for (const std::string& section : kRequiredSections)
    if (!sections.count(section)) defects.push_back(where + "no \"## " + section + "\" section");
  const std::vector<Hint> hints = hints_in(text);
  if (hints.empty()) defects.push_back(where + "\"## Hints\" has no \"### Hint 1\"");
  for (std::size_t i = 0; i < hints.size(); ++i)  // `workbook hint` follows the failing block
    if (std::none_of(lab.blocks.begin(), lab.blocks.end(),
                     [&](const Block& block) { return block.id == hints[i].block; }))
      defects.push_back(where + "\"### Hint " + std::to_string(i + 1) +
                        "\" does not end with \"(Block X)\" naming a block of the lab");

  if (const auto it = sections.find("Estimated time");
      it != sections.end() &&
      !workbench::starts_with(workbench::trim(it->second), lab.estimated_time))
    defects.push_back(where + "\"## Estimated time\" does not start with the registry's \"" +
                      lab.estimated_time + "\"");

  if (const auto it = sections.find("Prereq"); it != sections.end())
    for (const std::string& number : lab.prerequisites)
      if (const Lab* prereq = find_lab(ctx.labs, number);
          prereq &&
          it->second.find(fs::path(prereq->text).filename().string()) == std::string::npos)
        defects.push_back(where + "\"## Prereq\" does not link lab " + number + " (" +
                          fs::path(prereq->text).filename().string() +
                          "), a prerequisite in the registry");

  if (const auto it = sections.find("Files you edit"); it != sections.end()) {
    // The files before "Read, but do not edit" are the learner's.
    const std::string edited = it->second.substr(0, it->second.find("\nRead"));
    const auto named = matches(edited, std::regex(R"(`(src/[^`\s]+\.cpp)`)"));
    const std::set<std::string> registered(lab.learner_files.begin(), lab.learner_files.end());
    if (named != registered)
      defects.push_back(where + "\"## Files you edit\" names " + joined(sorted(named)) +
                        " but the registry's learner files are " + joined(sorted(registered)));
  }

  std::vector<std::string> headings, registered;
  for (const Block& block : lab.blocks)
    registered.push_back("Block " + block.id + " — " + block.title);
  static const std::regex block_heading(R"(^### (Block [A-Z] — .*)$)");
  for (const std::string& line :
       workbench::split_lines(sections.count("TODO blocks") ? sections.at("TODO blocks") : ""))
    if (std::smatch m; std::regex_match(line, m, block_heading)) headings.push_back(m[1]);
  if (headings != registered)
    defects.push_back(where + "its \"### Block\" headings are " + joined(headings) +
                      " but the registry's blocks are " + joined(registered));

  // Test names quoted in the lab's text, write-up and write-up template exist.
  static const std::regex test_name(R"(`([A-Z][A-Za-z0-9_]*\.[A-Z][A-Za-z0-9_]*)`)");
  for (const std::string& file : {lab.text, lab.write_up, lab.experiment + "/README.md"}) {
    if (!fs::exists(ctx.ws.repo / file)) continue;
    for (const std::string& test : matches(workbench::read_file(ctx.ws.repo / file), test_name))
      if (!all_tests.count(test))
        defects.push_back(file + ": names the test " + test +
                          ", which no lab's registry entry lists");
  }
}

// TEST(Suite, Name) and TEST_F(Suite, Name) in a test file.
std::set<std::string> tests_defined_in(const std::string& source) {
  static const std::regex test(R"(^TEST(_F)?\((\w+),\s*(\w+)\))");
  std::set<std::string> tests;
  for (const std::string& line : workbench::split_lines(source))
    if (std::smatch m; std::regex_search(line, m, test))
      tests.insert(m[2].str() + "." + m[3].str());
  return tests;
}

void check_stubs_and_tests(const Context& ctx, const Lab& lab, Defects& defects) {
  std::set<std::string> todo_blocks, registered_blocks;
  for (const Block& block : lab.blocks) registered_blocks.insert(block.id);
  static const std::regex todo(R"(TODO\(lab (\d\d), Block ([A-Z])\))");
  bool stubs_exist = true;  // a missing stub is already named by check_files
  for (const std::string& file : lab.learner_files) {
    stubs_exist = stubs_exist && fs::exists(ctx.ws.repo / file);
    if (!fs::exists(ctx.ws.repo / file)) continue;
    const std::string source = workbench::read_file(ctx.ws.repo / file);
    for (std::sregex_iterator it(source.begin(), source.end(), todo), end; it != end; ++it)
      if ((*it)[1] == lab.number) todo_blocks.insert((*it)[2]);
  }
  if (stubs_exist && todo_blocks != registered_blocks)
    defects.push_back("lab " + lab.number + ": the stubs have TODOs for blocks " +
                      joined(sorted(todo_blocks)) + " but the registry lists blocks " +
                      joined(sorted(registered_blocks)));

  if (!fs::exists(ctx.ws.repo / lab.tests)) return;
  std::set<std::string> defined = tests_defined_in(workbench::read_file(ctx.ws.repo / lab.tests));
  for (const std::string& file :
       lab.reference_files)  // the reference twins of tests learners write
    if (is_learner_test(file) && fs::exists(ctx.ws.repo / file))
      for (const std::string& test : tests_defined_in(workbench::read_file(ctx.ws.repo / file)))
        defined.insert(test);
  std::map<std::string, int> listed;
  for (const Block& block : lab.blocks)
    for (const std::string& test : block.tests) ++listed[test];
  for (const std::string& test : defined)
    if (!listed.count(test))
      defects.push_back("lab " + lab.number + ": " + lab.tests + " defines " + test +
                        ", which no block of the registry lists");
  for (const auto& [test, count] : listed) {
    if (!defined.count(test))
      defects.push_back("lab " + lab.number + ": the registry lists " + test + ", which " +
                        lab.tests + " does not define");
    if (count > 1)
      defects.push_back("lab " + lab.number + ": the registry lists " + test + " in two blocks");
  }
}

// The lab's mutants: enough of them, each in a block of the lab and each change found exactly once
// in the lab's reference files (else CMake makes no programs for it); the lab text's "Break it"
// shows the command, every `workbook break NN NAME` in the prose names a mutant, and the write-up
// template asks what surprised the learner. Returns the mutants, if the catalogue is readable.
std::vector<Mutant> check_mutants(const Context& ctx, const Lab& lab, Defects& defects) {
  std::vector<Mutant> mutants;
  try {
    mutants = load_mutants(ctx.ws.repo, lab);
  } catch (const std::runtime_error& e) {
    defects.push_back(e.what());
    return {};
  }
  if (!fs::exists(ctx.ws.repo / lab.mutants)) return {};  // check_files names it
  const std::string where = lab.mutants + ": ";
  const auto real = std::count_if(mutants.begin(), mutants.end(),
                                  [](const Mutant& m) { return m.equivalent.empty(); });
  if (static_cast<std::size_t>(real) < kMinMutants)
    defects.push_back(where + "has " + std::to_string(real) +
                      " mutants that a test must catch; every lab needs at least " +
                      std::to_string(kMinMutants));
  std::vector<std::string> code;  // the files CMake mutates: not the twin of a learner's test
  for (const std::string& file : lab.reference_files)
    if (!is_learner_test(file)) code.push_back(file);
  std::vector<std::string> references;
  for (const std::string& file : code)
    if (fs::exists(ctx.ws.repo / file))
      references.push_back(workbench::read_file(ctx.ws.repo / file));
  for (const Mutant& mutant : mutants) {
    if (std::none_of(lab.blocks.begin(), lab.blocks.end(),
                     [&](const Block& b) { return b.id == mutant.block; }))
      defects.push_back(where + mutant.name + "'s block " + mutant.block +
                        " is not a block of the lab");
    std::size_t found = 0;
    for (const std::string& text : references)
      for (auto at = text.find(mutant.replace); at != std::string::npos;
           at = text.find(mutant.replace, at + 1))
        ++found;
    if (found != 1)
      defects.push_back(where + mutant.name + "'s change (\"" +
                        workbench::trim(mutant.replace.substr(0, 60)) + "\") occurs " +
                        std::to_string(found) + " times in " + joined(code) + ", not once");
  }
  if (fs::exists(ctx.ws.repo / lab.text)) {
    const auto sections = sections_of(workbench::read_file(ctx.ws.repo / lab.text));
    if (const auto it = sections.find("Break it");
        it != sections.end() &&
        it->second.find("workbook break " + lab.number) == std::string::npos)
      defects.push_back(lab.text + ": \"## Break it\" does not show `workbook break " + lab.number +
                        "`");
  }
  const std::string template_file = lab.experiment + "/README.md";
  if (fs::exists(ctx.ws.repo / template_file) &&
      workbench::read_file(ctx.ws.repo / template_file).find("surprise") == std::string::npos)
    defects.push_back(template_file +
                      ": no question asks what surprised you when you broke the lab");
  return mutants;
}

// The prose a learner follows: the README, and each lab's text, write-up and write-up template.
std::vector<std::string> prose_files(const Context& ctx) {
  std::vector<std::string> prose = {"README.md"};
  for (const Lab& lab : ctx.labs)
    for (const std::string& file : {lab.text, lab.write_up, lab.experiment + "/README.md"})
      prose.push_back(file);
  return prose;
}

// `workbook break NN NAME` quoted anywhere in the prose names a mutant of lab NN.
void check_break_commands(const Context& ctx,
                          const std::map<std::string, std::vector<Mutant>>& catalogues,
                          Defects& defects) {
  static const std::regex command(R"(workbook break (\d\d) ([a-z0-9-]+))");
  for (const std::string& file : prose_files(ctx)) {
    if (!fs::exists(ctx.ws.repo / file)) continue;
    const std::string text = workbench::read_file(ctx.ws.repo / file);
    for (std::sregex_iterator it(text.begin(), text.end(), command), end; it != end; ++it) {
      const auto catalogue = catalogues.find((*it)[1]);
      const std::string name = (*it)[2];
      if (catalogue == catalogues.end() ||
          std::none_of(catalogue->second.begin(), catalogue->second.end(),
                       [&](const Mutant& m) { return m.name == name; }))
        defects.push_back(file + ": `" + it->str() + "` names no mutant of lab " + (*it)[1].str());
    }
  }
}

// Every mutant's test program runs (the target `mutants` built them): a mutant no test catches
// is a survivor, a hole in the lab's tests; one marked equivalent must indeed pass every test.
// Prints the mutation table, one row per lab.
void run_mutants(const Context& ctx, const std::vector<const Lab*>& labs,
                 const std::map<std::string, std::vector<Mutant>>& catalogues, Defects& defects) {
  std::cout << "lab  mutants  caught  equivalent  survived\n";  // the mutation table
  for (const Lab* lab : labs) {
    const auto catalogue = catalogues.find(lab->number);
    if (catalogue == catalogues.end()) continue;
    int caught = 0, equivalent = 0, survived = 0;
    for (const Mutant& mutant : catalogue->second) {
      const std::string program = lab->mutant_target("test", mutant);
      if (!fs::exists(ctx.ws.bin(program))) {
        defects.push_back("lab " + lab->number + ": mutant " + mutant.name +
                          " has no test program " + program + " (reconfigure the build)");
        continue;
      }
      const LabResult result = run_built_tests(ctx.ws, *lab, program, "", /*fail_fast=*/true);
      const bool killed = !result.failures.empty() || !result.problem.empty();
      if (!mutant.equivalent.empty()) {
        ++equivalent;
        if (killed)
          defects.push_back(
              "lab " + lab->number + ": mutant " + mutant.name + " is marked equivalent (" +
              mutant.equivalent + ") but " +
              (result.failures.empty() ? result.problem : result.failures[0].test + " fails"));
      } else if (killed) {
        ++caught;
      } else {
        ++survived;
        defects.push_back("lab " + lab->number + ": mutant " + mutant.name +
                          " survives: no test catches \"" + mutant.bug + "\" (all " +
                          std::to_string(result.total) + " pass)");
      }
    }
    std::cout << pad(lab->number, 5) << pad(std::to_string(catalogue->second.size()), 9)
              << pad(std::to_string(caught), 8) << pad(std::to_string(equivalent), 12) << survived
              << '\n';
  }
}

// README.md's lab map, between these markers, is written from the registry.
const std::string kLabMapStart =
    "<!-- The lab map is written from labs/labs.json by `workbook dev-check --write-lab-map`. "
    "-->\n";
const std::string kLabMapEnd = "<!-- End of the lab map. -->";

std::string lab_map(const std::vector<Lab>& labs) {
  std::string table = "| Lab | Concept | What you produce |\n|---|---|---|\n";
  for (const Lab& lab : labs)
  table += "| [" + lab.number + " — " + lab.title + "](" + lab.text + ") | " + lab.concept + " | " +
           lab.produces + " |\n";
  return table;
}

// Where the lab map stands in README.md: {offset after the start marker, length}.
std::optional<std::pair<std::size_t, std::size_t>> lab_map_span(const std::string& readme) {
  const auto start = readme.find(kLabMapStart);
  const auto end = readme.find(kLabMapEnd);
  if (start == std::string::npos || end == std::string::npos || end < start) return std::nullopt;
  return std::make_pair(start + kLabMapStart.size(), end - start - kLabMapStart.size());
}

void write_lab_map(const Context& ctx) {
  const fs::path path = ctx.ws.repo / "README.md";
  std::string readme = workbench::read_file(path);
  const auto span = lab_map_span(readme);
  if (!span)
    throw EnvironmentError("README.md has no lab map markers (" + workbench::trim(kLabMapStart) +
                           ")");
  readme.replace(span->first, span->second, lab_map(ctx.labs));
  workbench::write_file_atomically(path, readme);
  std::cout << "wrote README.md's lab map from labs/labs.json\n";
}

// README.md's lab map is the one the registry makes; each row that differs is named.
void check_readme(const Context& ctx, Defects& defects) {
  const std::string readme = workbench::read_file(ctx.ws.repo / "README.md");
  const auto span = lab_map_span(readme);
  if (!span) {
    defects.push_back("README.md has no lab map between the markers " +
                      workbench::trim(kLabMapStart) + " and " + kLabMapEnd);
    return;
  }
  const std::vector<std::string> have =
      workbench::split_lines(readme.substr(span->first, span->second));
  const std::vector<std::string> want = workbench::split_lines(lab_map(ctx.labs));
  if (have == want) return;
  const std::string fix = " (`workbook dev-check --write-lab-map` writes it from labs/labs.json)";
  const std::size_t before = defects.size();
  auto row_of = [&](const std::string& number) {  // README's row for lab `number`, or ""
    for (const std::string& row : have)
      if (workbench::starts_with(row, "| [" + number + " ")) return row;
    return std::string();
  };
  for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
    const std::string row = row_of(ctx.labs[i].number);
    if (row.empty())
      defects.push_back("README.md's lab map has no row for lab " + ctx.labs[i].number + fix);
    else if (row != want[i + 2])  // after the header and the rule
      defects.push_back("README.md's lab map row of lab " + ctx.labs[i].number +
                        " is not what the registry says" + fix);
  }
  static const std::regex numbered_row(R"(^\| \[(\d\d) )");
  for (const std::string& row : have)
    if (std::smatch m; std::regex_search(row, m, numbered_row) && !find_lab(ctx.labs, m[1]))
      defects.push_back("README.md's lab map has a row for lab " + m[1].str() +
                        ", which is not in the registry" + fix);
  if (defects.size() == before)  // the rows agree, but not the rest of the table
    defects.push_back("README.md's lab map is not the table the registry makes" + fix);
}

// Every labs/NN-*.md belongs to a registry entry.
void check_unregistered(const Context& ctx, Defects& defects) {
  static const std::regex lab_text(R"((\d\d)-.*\.md)");
  for (const auto& entry : fs::directory_iterator(ctx.ws.repo / "labs")) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, lab_text)) continue;
    const Lab* lab = find_lab(ctx.labs, m[1]);
    if (!lab || fs::path(lab->text).filename() != name)
      defects.push_back("labs/" + name + " is not the text of any lab in labs/labs.json");
  }
}

// `ctest --preset NAME` in the prose learners follow names a test preset of CMakePresets.json.
void check_preset_commands(const Context& ctx, Defects& defects) {
  std::set<std::string> presets;
  const auto json = nlohmann::json::parse(workbench::read_file(ctx.ws.repo / "CMakePresets.json"));
  for (const auto& preset : json.value("testPresets", nlohmann::json::array()))
    if (!preset.value("hidden", false)) presets.insert(preset.at("name").get<std::string>());
  static const std::regex command(R"(ctest --preset ([A-Za-z0-9_-]+))");
  for (const std::string& file : prose_files(ctx)) {
    if (!fs::exists(ctx.ws.repo / file)) continue;
    for (const std::string& name : matches(workbench::read_file(ctx.ws.repo / file), command))
      if (!presets.count(name))
        defects.push_back(file + ": `ctest --preset " + name +
                          "` names no test preset of CMakePresets.json (" +
                          joined(sorted(presets)) + ")");
  }
}

// The names of the tests ctest knows, from `ctest --show-only=json-v1`.
std::set<std::string> ctest_test_names(const Context& ctx) {
  const ToolRun run =
      run_tool("ctest", {"--test-dir", ctx.ws.build.string(), "--show-only=json-v1"});
  const auto json = nlohmann::json::parse(run.output, nullptr, false);
  if (!run.ok || json.is_discarded())
    throw EnvironmentError("ctest --show-only=json-v1 failed in " + ctx.ws.build.string() + ":\n" +
                           run.output);
  std::set<std::string> names;
  for (const auto& test : json.value("tests", nlohmann::json::array()))
    names.insert(test.value("name", ""));
  return names;
}

// The lines of a test's output that say why it failed: those holding one of `needles`.
std::string why(const std::string& output, const std::vector<std::string>& needles) {
  std::string text;
  for (const std::string& line : workbench::split_lines(output))
    for (const std::string& needle : needles)
      if (line.find(needle) != std::string::npos) {
        text += (text.empty() ? "" : "; ") + workbench::trim(line);
        break;
      }
  return text.empty()
             ? workbench::trim(output.substr(output.size() > 300 ? output.size() - 300 : 0))
             : text;
}

// Runs ctest on the tests labelled `label` whose names match `names`, and adds one defect per test
// that did not pass, read from ctest's JUnit report.
void ctest_defects(const Context& ctx, const std::string& label, const std::string& names,
                   Defects& defects) {
  const fs::path report = ctx.ws.build / "workbook" / ("dev-check-" + label + ".xml");
  fs::create_directories(report.parent_path());
  fs::remove(report);
  run_tool("ctest", {"--test-dir", ctx.ws.build.string(), "-L", label, "-R", names, "--timeout",
                     "600", "--output-junit", report.string()});
  pugi::xml_document doc;
  if (!doc.load_file(report.c_str())) {
    defects.push_back("ctest wrote no readable JUnit report " + report.string());
    return;
  }
  int ran = 0;
  static const std::regex lab_of(R"(^lab(\d\d)\.)");
  for (const pugi::xml_node test : doc.child("testsuite").children("testcase")) {
    ++ran;
    const std::string name = test.attribute("name").value(),
                      status = test.attribute("status").value();
    if (status == "run") continue;
    std::smatch m;
    const std::string lab = std::regex_search(name, m, lab_of) ? "lab " + m[1].str() : name;
    const std::string output = test.child_value("system-out");
    if (name.find(".stubs") != std::string::npos &&
        output.find("check skipped") != std::string::npos)
      defects.push_back(lab +
                        ": the pristine-stub check was skipped because its learner files differ "
                        "from the commit; run dev-check on a pristine checkout");
    else if (name.find(".stubs") != std::string::npos)
      defects.push_back(lab + ": a pristine stub does not fail with its TODO (" + name + "): " +
                        why(output, {"passes on the pristine stubs", "crashed", "without a TODO",
                                     "no tests", "no report"}));
    else if (name.find(".artifacts") != std::string::npos)
      defects.push_back(
          lab + ": the reference verify program's artifacts are missing or invalid (" + name +
          "): " +
          why(output, {"missing", "does not", "lacks", "not valid", "not true", "no manifest"}));
    else if (name.find(".verify") != std::string::npos)
      defects.push_back(lab + ": the reference verify program failed (" + name +
                        "): " + why(output, {"[FAIL]", "TODO", "verify "}));
    else
      defects.push_back(lab + ": a reference test fails: " + name + " (" + status + ")");
  }
  if (ran == 0) defects.push_back("ctest ran no " + label + " tests matching " + names);
}

// The words of a command as a shell would split them: blanks separate, '…' quotes.
std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, in_word = false;
  for (const char c : command) {
    if (c == '\'') {
      quoted = !quoted;
      in_word = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// ctest --preset NAME creates the preset's binary folder (build-debug/Testing) even with
// --test-dir, and then lists that folder's tests: none. Removes such a folder that the listing
// created, with nothing in it but ctest's Testing log, so that dev-check runs the same each time.
void remove_folders_ctest_created(const fs::path& repo, const std::set<fs::path>& before) {
  for (const auto& entry : fs::directory_iterator(repo)) {
    if (!entry.is_directory() || before.count(entry.path())) continue;
    std::vector<fs::path> inside;
    for (const auto& item : fs::directory_iterator(entry.path())) inside.push_back(item.path());
    if (inside.size() == 1 && inside[0].filename() == "Testing") fs::remove_all(entry.path());
  }
}

// Every `ctest --preset …` a lab text gives runs, and runs only the tests of the lab it names
// with -L labNN: listed with -N, as the learner would type it, from the repository.
void check_quoted_commands(const Context& ctx, const Lab& lab, Defects& defects) {
  if (!fs::exists(ctx.ws.repo / lab.text)) return;
  static const std::regex command(R"(`[^`]*?(ctest --preset [^`&|;]*?)\s*`)");
  static const std::regex lab_label(R"(^lab(\d\d)$)");
  static const std::regex listed(R"(Test +#\d+: (\S+))");
  for (const std::string& quoted : matches(workbench::read_file(ctx.ws.repo / lab.text), command)) {
    std::vector<std::string> args = shell_words(quoted);
    args.erase(args.begin());  // "ctest"
    std::string label;
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
      if (std::smatch m; args[i] == "-L" && std::regex_match(args[i + 1], m, lab_label))
        label = m[1];
    const std::string where = lab.text + ": `" + quoted + "` ";
    if (label.empty()) {
      defects.push_back(where + "names no lab (-L labNN), so it runs every lab's tests");
      continue;
    }
    args.insert(args.end(), {"--test-dir", ctx.ws.build.string(), "-N"});
    workbench::CaptureOptions in_repo;
    in_repo.working_dir = ctx.ws.repo;
    std::set<fs::path> folders;
    for (const auto& entry : fs::directory_iterator(ctx.ws.repo)) folders.insert(entry.path());
    const workbench::CapturedRun run = workbench::run_captured("ctest", args, in_repo);
    remove_folders_ctest_created(ctx.ws.repo, folders);
    std::set<std::string> tests = matches(run.output, listed);
    tests.erase("lab" + label + ".learner.build");  // the fixture ctest adds to any selection
    if (!run.status.ok() || tests.empty()) {
      const auto lines = workbench::split_lines(workbench::trim(run.output));
      defects.push_back(where + (run.status.ok()
                                     ? "runs no test"
                                     : "fails: " + (lines.empty() ? "" : lines.back())));
      continue;
    }
    for (const std::string& test : tests)
      if (!workbench::starts_with(test, "lab" + label + ".")) {
        defects.push_back(where + "also runs " + test + ", which is not a test of lab " + label);
        break;
      }
  }
}

}  // namespace

int dev_check(const Context& ctx, const DevCheckOptions& options) {
  if (options.write_lab_map) write_lab_map(ctx);
  Defects defects;
  std::set<std::string> all_tests;
  for (const Lab& lab : ctx.labs)
    for (const std::string& test : lab.test_names()) all_tests.insert(test);

  std::vector<const Lab*> complete;  // labs with every file, which the build then checks
  std::map<std::string, std::vector<Mutant>> catalogues;
  for (const Lab& lab : ctx.labs) {
    const bool has_all = check_files(ctx, lab, defects);
    check_text(ctx, lab, all_tests, defects);
    check_stubs_and_tests(ctx, lab, defects);
    catalogues[lab.number] = check_mutants(ctx, lab, defects);
    const bool asked = options.only_labs.empty() ||
                       std::find(options.only_labs.begin(), options.only_labs.end(), lab.number) !=
                           options.only_labs.end();
    if (has_all && asked) complete.push_back(&lab);
  }
  check_unregistered(ctx, defects);
  check_readme(ctx, defects);
  check_preset_commands(ctx, defects);
  check_break_commands(ctx, catalogues, defects);

  if (!options.files_only && !complete.empty()) {
    const std::set<std::string> known = ctest_test_names(ctx);
    // Every lab's programs through the two targets that gather them: make walks the libraries
    // they share once (8 s, where naming its 45 programs took 43 s). With --lab, lab by lab.
    std::vector<std::string> targets = {"check-artifacts"};
    if (options.only_labs.empty()) targets = {"learner", "reference-checks"};
    std::string names;
    for (const Lab* lab : complete) {
      if (!known.count("lab" + lab->number + ".stubs")) {
        defects.push_back(
            "lab " + lab->number +
            " has no tests in the build folder: reconfigure it (cmake --preset default)");
        continue;
      }
      if (!options.only_labs.empty())
        targets.insert(targets.end(), {lab->learner_target(), lab->target("test", "reference"),
                                       lab->target("verify", "reference")});
      names += (names.empty() ? "" : "|") + lab->number;
    }
    if (!names.empty()) {
      std::cout << "building " << targets.size() << " targets…\n" << std::flush;
      const BuildResult build = build_targets(ctx.ws, targets);
      if (!build.ok) {
        defects.push_back("the build fails: " + build.first_error +
                          "\n  (full output: " + ctx.ws.relative(build.log) + ")");
      } else {
        const std::string regex = "^lab(" + names + ")\\.";
        bool reference_fails = false;
        if (!options.tests_just_ran) {
          std::cout << "running ctest -L stubs and -L reference…\n" << std::flush;
          ctest_defects(ctx, "stubs", regex, defects);
          const std::size_t before = defects.size();
          ctest_defects(ctx, "reference", regex, defects);
          reference_fails = defects.size() > before;
        }
        for (const Lab* lab : complete) check_quoted_commands(ctx, *lab, defects);
        // All of them through the one target that gathers them, as above; with --lab, by lab.
        // A mutant is caught or not only against a reference that passes.
        std::vector<std::string> mutant_targets;
        if (reference_fails && !options.skip_mutants)
          std::cout << "mutants not run: the reference fails (see the defects below)\n";
        if (options.skip_mutants || reference_fails) catalogues.clear();
        for (const Lab* lab : complete)
          if (!catalogues[lab->number].empty())
            mutant_targets.push_back("lab" + lab->number + "-mutants");
        if (options.only_labs.empty() && !mutant_targets.empty()) mutant_targets = {"mutants"};
        if (!mutant_targets.empty())
          std::cout << "building and running every mutant…\n" << std::flush;
        const BuildResult mutants_built = mutant_targets.empty()
                                              ? BuildResult{true, "", {}, {}}
                                              : build_targets(ctx.ws, mutant_targets);
        if (!mutants_built.ok)
          defects.push_back("a mutant does not build: " + mutants_built.first_error +
                            "\n  (full output: " + ctx.ws.relative(mutants_built.log) + ")");
        else if (!mutant_targets.empty())
          run_mutants(ctx, complete, catalogues, defects);
      }
    }
  }

  for (const std::string& defect : defects)
    std::cout << ctx.red("defect") << ": " << defect << '\n';
  if (!defects.empty()) {
    std::cout << "dev-check: " << defects.size() << " defect" << (defects.size() == 1 ? "" : "s")
              << '\n';
    return kNotDone;
  }
  std::cout << ctx.green("dev-check: labs " + lab_range(ctx.labs) + " pass every check") +
                   (options.files_only ? " on their files (no build: --files-only)" : "")
            << '\n';
  return kSuccess;
}

}  // namespace workbook
