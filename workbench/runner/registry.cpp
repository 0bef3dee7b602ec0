#include "runner/registry.hpp"

#include <unistd.h>  // geteuid

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "util/files.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

const std::string too_deep = "nests arrays and objects more than " +
                             std::to_string(workbench::kMaxJsonDepth) + " levels deep";

std::string expand(std::string pattern, const Lab& lab) {
  for (const auto& [key, value] :
       {std::pair<std::string, std::string>{"{number}", lab.number}, {"{slug}", lab.slug}})
    for (std::size_t at; (at = pattern.find(key)) != std::string::npos;)
      pattern.replace(at, key.size(), value);
  return pattern;
}

Lab lab_from(const nlohmann::json& entry, const nlohmann::json& layout) {
  Lab lab;
  lab.number = entry.at("number").get<std::string>();
  lab.slug = entry.at("slug").get<std::string>();
  static const std::regex number("\\d\\d"), slug("[a-z0-9]+(-[a-z0-9]+)*");
  if (!workbench::scannable(lab.number) || !std::regex_match(lab.number, number))
    throw std::runtime_error("lab number \"" + lab.number + "\" is not two digits");
  if (!workbench::scannable(lab.slug) || !std::regex_match(lab.slug, slug))
    throw std::runtime_error("lab " + lab.number + ": slug \"" + lab.slug +
                             "\" is not lower-case words joined by '-'");
  lab.title = entry.at("title").get<std::string>();
  lab.concept = entry.at("concept").get<std::string>();
  lab.produces = entry.at("produces").get<std::string>();
  lab.estimated_time = entry.at("estimated_time").get<std::string>();
  lab.prerequisites = entry.at("prerequisites").get<std::vector<std::string>>();
  lab.learner_files = entry.at("learner_files").get<std::vector<std::string>>();
  const std::string learner_root = layout.at("learner_root"),
                    reference_root = layout.at("reference_root");
  for (const std::string& file : lab.learner_files) {
    if (!workbench::starts_with(file, learner_root))
      throw std::runtime_error("lab " + lab.number + ": learner file " + file + " is not under " +
                               learner_root);
    lab.reference_files.push_back(reference_root + file.substr(learner_root.size()));
  }
  if (entry.contains("ranks")) {  // checked before any conversion: a float would overflow an int
    const nlohmann::json& ranks = entry.at("ranks");
    if (!ranks.is_array())
      throw std::runtime_error("lab " + lab.number + ": ranks is not a list of numbers");
    for (const nlohmann::json& count : ranks) {
      if (!count.is_number_unsigned() || count.get<std::uint64_t>() < 1 ||
          count.get<std::uint64_t>() > 64)
        throw std::runtime_error("lab " + lab.number + ": ranks " + count.dump() +
                                 " is not a number of ranks from 1 to 64");
      lab.ranks.push_back(static_cast<int>(count.get<std::uint64_t>()));
    }
  }
  for (const auto& block : entry.at("blocks"))
    lab.blocks.push_back({block.at("id").get<std::string>(), block.at("title").get<std::string>(),
                          block.at("tests").get<std::vector<std::string>>()});
  lab.text = expand(layout.at("text"), lab);
  lab.write_up = expand(layout.at("write_up"), lab);
  lab.experiment = expand(layout.at("experiment"), lab);
  lab.tests = expand(layout.at("tests"), lab);
  lab.verify = expand(layout.at("verify"), lab);
  lab.mutants = expand(layout.at("mutants"), lab);
  return lab;
}

}  // namespace

std::pair<std::string, std::vector<std::string>> Lab::command(const std::string& program,
                                                              std::vector<std::string> args) const {
  if (ranks.empty()) return {program, std::move(args)};
  // OpenMPI refuses to start as root unless told (CI runs as root); a container may forbid the
  // cross-memory copies of its shared-memory transport, which then copies through a buffer.
  std::vector<std::string> mpi = {"-n",
                                  std::to_string(*std::max_element(ranks.begin(), ranks.end())),
                                  "--oversubscribe",
                                  "--mca",
                                  "btl_vader_single_copy_mechanism",
                                  "none"};
  if (geteuid() == 0) mpi.push_back("--allow-run-as-root");
  // In a sanitizer build, OpenMPI's leaks at exit are suppressed by library, whose frames only the
  // slow unwinder finds (tests/lsan-suppressions.txt); without AddressSanitizer nothing reads it.
  const char* asan = std::getenv("ASAN_OPTIONS");
  mpi.insert(mpi.end(), {"-x", (asan && *asan ? "ASAN_OPTIONS=" + std::string(asan) + ":"
                                              : std::string("ASAN_OPTIONS=")) +
                                   "fast_unwind_on_malloc=0"});
  mpi.push_back(program);
  mpi.insert(mpi.end(), args.begin(), args.end());
  return {"mpiexec", mpi};
}

std::string Lab::block_for(const std::string& test, const std::string& message) const {
  if (const auto todo = todo_in(message); todo && todo->first == number) return todo->second;
  for (const Block& block : blocks)
    if (std::find(block.tests.begin(), block.tests.end(), test) != block.tests.end())
      return block.id;
  return "";
}

std::vector<Lab> load_registry(const fs::path& repo) {
  const fs::path path = repo / "labs" / "labs.json";
  try {
    return parse_registry(workbench::read_file(path));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

std::vector<Lab> parse_registry(const std::string& text) {
  std::vector<Lab> labs;
  try {
    if (workbench::json_too_deep(text)) throw std::runtime_error(too_deep);
    const nlohmann::json registry = nlohmann::json::parse(text);
    const nlohmann::json& layout = registry.at("layout");
    std::set<std::string> numbers;
    for (const auto& entry : registry.at("labs")) {
      labs.push_back(lab_from(entry, layout));
      if (!numbers.insert(labs.back().number).second)
        throw std::runtime_error("lab " + labs.back().number + " is listed twice");
    }
    for (const Lab& lab : labs)
      for (const std::string& number : lab.prerequisites)
        if (!numbers.count(number) || number >= lab.number)
          throw std::runtime_error("lab " + lab.number + ": prerequisite \"" + number +
                                   "\" is not an earlier lab of the registry");
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(e.what());
  }
  std::sort(labs.begin(), labs.end(),
            [](const Lab& a, const Lab& b) { return a.number < b.number; });
  return labs;
}

std::vector<Mutant> load_mutants(const fs::path& repo, const Lab& lab) {
  const fs::path path = repo / lab.mutants;
  if (!fs::exists(path)) return {};
  std::vector<Mutant> mutants;
  try {
    const std::string text = workbench::read_file(path);
    if (workbench::json_too_deep(text)) throw std::runtime_error(too_deep);
    const nlohmann::json catalogue = nlohmann::json::parse(text);
    static const std::regex name("[a-z0-9]+(-[a-z0-9]+)*");
    std::set<std::string> names;
    for (const auto& entry : catalogue.at("mutants")) {
      Mutant mutant{entry.at("name"),    entry.at("block"), entry.at("bug"),
                    entry.at("replace"), entry.at("with"),  entry.value("equivalent", "")};
      if (!workbench::scannable(mutant.name) || !std::regex_match(mutant.name, name))
        throw std::runtime_error("mutant \"" + mutant.name +
                                 "\": its name is not lower-case words joined by '-'");
      if (!names.insert(mutant.name).second)
        throw std::runtime_error("mutant " + mutant.name + " is listed twice");
      if (mutant.replace.empty() || mutant.replace == mutant.with)
        throw std::runtime_error("mutant " + mutant.name + " changes nothing");
      mutants.push_back(std::move(mutant));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
  return mutants;
}

std::vector<Hint> hints_in(const std::string& lab_text) {
  static const std::regex hint_heading(R"(^### Hint \d+( \(Block ([A-Z])\))?\s*$)");
  std::vector<Hint> hints;
  bool in_hints = false, in_code = false;
  std::optional<Hint> hint;
  auto finish = [&] {
    if (hint) hints.push_back({hint->block, workbench::trim(hint->text)});
    hint.reset();
  };
  for (const std::string& line : workbench::split_lines(lab_text)) {
    if (workbench::starts_with(line, "```")) in_code = !in_code;
    if (!in_code && workbench::starts_with(line, "## ")) {
      finish();
      in_hints = workbench::trim(line.substr(3)) == "Hints";
      continue;
    }
    if (!in_code && workbench::starts_with(line, "### ")) {
      finish();
      std::smatch m;
      if (in_hints && workbench::scannable(line) && std::regex_match(line, m, hint_heading))
        hint = Hint{m[2].str(), ""};
      continue;
    }
    if (hint) hint->text += line + "\n";
  }
  finish();
  return hints;
}

std::optional<std::string> normalise_lab_number(const std::string& text) {
  if (text.empty() || text.size() > 2 || !std::all_of(text.begin(), text.end(), ::isdigit))
    return std::nullopt;
  return text.size() == 1 ? "0" + text : text;
}

const Lab* find_lab(const std::vector<Lab>& labs, const std::string& number) {
  for (const Lab& lab : labs)
    if (lab.number == number) return &lab;
  return nullptr;
}

std::string lab_range(const std::vector<Lab>& labs) {
  if (labs.empty()) return "none";
  bool contiguous = true;
  for (std::size_t i = 1; i < labs.size(); ++i)
    contiguous = contiguous && std::stoi(labs[i].number) == std::stoi(labs[i - 1].number) + 1;
  if (contiguous)
    return labs.size() == 1 ? labs[0].number : labs.front().number + "–" + labs.back().number;
  std::string list;
  for (const Lab& lab : labs) list += (list.empty() ? "" : ", ") + lab.number;
  return list;
}

std::optional<std::pair<std::string, std::string>> todo_in(const std::string& text) {
  // "TODO(lab 01, Block B)", scanned by hand: `text` is a program's whole output.
  static const std::string kTodo = "TODO(lab ";
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (std::size_t at = text.find(kTodo); at != std::string::npos; at = text.find(kTodo, at + 1)) {
    const std::string rest = text.substr(at + kTodo.size(), 12);  // "01, Block B)"
    if (rest.size() == 12 && digit(rest[0]) && digit(rest[1]) &&
        rest.compare(2, 8, ", Block ") == 0 && rest[10] >= 'A' && rest[10] <= 'Z' &&
        rest[11] == ')')
      return std::make_pair(rest.substr(0, 2), rest.substr(10, 1));
  }
  return std::nullopt;
}

}  // namespace workbook
