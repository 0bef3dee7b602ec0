#include "lab_registry.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace workbook {
namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

void add_unique(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

// Every "TODO(lab NN, Block X)" of lab `number` in `text`, added to `blocks`.
void add_todo_blocks(const std::string& text, const std::string& number, std::vector<std::string>& blocks) {
  static const std::regex todo(R"(TODO\(lab (\d\d), Block ([A-Z])\))");
  for (std::sregex_iterator it(text.begin(), text.end(), todo), end; it != end; ++it)
    if ((*it)[1] == number) add_unique(blocks, (*it)[2]);
}

}  // namespace

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lab::reference_files() const {
  std::vector<std::string> files;
  for (const std::string& file : learner_files) files.push_back("solutions/" + file.substr(4));
  return files;
}

bool Lab::has_section(const std::string& heading) const {
  return std::find(sections.begin(), sections.end(), heading) != sections.end();
}

std::string Lab::block_for(const std::string& test, const std::string& message) const {
  if (const auto todo = todo_in(message); todo && todo->first == number) return todo->second;
  static const std::regex named(R"(Block ([A-Z])\b)");
  if (std::smatch m; std::regex_search(message, m, named)) return m[1];
  if (const auto it = test_blocks.find(test); it != test_blocks.end()) return it->second;
  return blocks.size() == 1 ? blocks.front() : "";
}

Lab parse_lab(const fs::path& text_path) {
  static const std::regex file_name(R"((\d\d)-([a-z0-9-]+)\.md)");
  std::smatch m;
  const std::string name = text_path.filename().string();
  if (!std::regex_match(name, m, file_name))
    throw std::runtime_error(text_path.string() + " is not named labs/NN-slug.md");
  Lab lab;
  lab.number = m[1];
  lab.slug = m[2];

  static const std::regex title(R"(^# Lab \d\d\s*(—|-|:)\s*(.*)$)");
  static const std::regex hint_heading(R"(^### Hint \d+\s*$)");
  static const std::regex block_heading(R"(^### Block ([A-Z])\b.*$)");
  static const std::regex learner_file(R"(`(src/[^`\s]+\.cpp)`)");
  static const std::regex test_name(R"(`([A-Z][A-Za-z0-9_]*\.[A-Z][A-Za-z0-9_]*)`)");

  const std::string text = read_file(text_path);
  std::istringstream lines(text);
  std::string line, section, block, hint;
  bool in_code = false, reading_files = false, in_hint = false;
  auto finish_hint = [&] {
    if (in_hint) lab.hints.push_back(trim(hint));
    in_hint = false;
    hint.clear();
  };
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) in_code = !in_code;
    const bool heading = !in_code && line.rfind("#", 0) == 0;
    if (heading && line.rfind("# ", 0) == 0 && lab.title.empty()) {
      lab.title = std::regex_match(line, m, title) ? m[2].str() : trim(line.substr(2));
    } else if (heading && line.rfind("## ", 0) == 0) {
      finish_hint();
      section = trim(line.substr(3));
      lab.sections.push_back(section);
      reading_files = section == "Files you edit";
      block.clear();
      continue;
    } else if (heading && line.rfind("### ", 0) == 0) {
      finish_hint();
      block = std::regex_match(line, m, block_heading) ? m[1].str() : "";
      if (!block.empty()) add_unique(lab.blocks, block);
      in_hint = section == "Hints" && std::regex_match(line, hint_heading);
      continue;
    }
    if (in_hint) hint += line + "\n";
    if (reading_files) {
      if (line.rfind("Read", 0) == 0) reading_files = false;  // "Read, but do not edit:"
      for (std::sregex_iterator it(line.begin(), line.end(), learner_file), end; it != end; ++it)
        if (reading_files) add_unique(lab.learner_files, (*it)[1]);
    }
    if (!block.empty())
      for (std::sregex_iterator it(line.begin(), line.end(), test_name), end; it != end; ++it)
        lab.test_blocks.emplace((*it)[1], block);
  }
  finish_hint();

  // The text's own "TODO(lab NN, Block X)" is a placeholder; the stubs name the real blocks.
  const fs::path repo = text_path.parent_path().parent_path();
  for (const std::string& file : lab.learner_files)
    if (fs::exists(repo / file)) add_todo_blocks(read_file(repo / file), lab.number, lab.blocks);
  std::sort(lab.blocks.begin(), lab.blocks.end());
  return lab;
}

std::vector<Lab> discover_labs(const fs::path& repo) {
  std::vector<Lab> labs;
  static const std::regex file_name(R"(\d\d-.*\.md)");
  if (!fs::is_directory(repo / "labs")) throw std::runtime_error("no labs/ folder in " + repo.string());
  for (const auto& entry : fs::directory_iterator(repo / "labs"))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), file_name))
      labs.push_back(parse_lab(entry.path()));
  std::sort(labs.begin(), labs.end(), [](const Lab& a, const Lab& b) { return a.number < b.number; });
  return labs;
}

std::optional<std::string> normalise_lab_number(const std::string& text) {
  if (text.empty() || text.size() > 2 || !std::all_of(text.begin(), text.end(), ::isdigit)) return std::nullopt;
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
  if (contiguous) return labs.size() == 1 ? labs[0].number : labs.front().number + "–" + labs.back().number;
  std::string list;
  for (const Lab& lab : labs) list += (list.empty() ? "" : ", ") + lab.number;
  return list;
}

std::optional<std::pair<std::string, std::string>> todo_in(const std::string& text) {
  static const std::regex todo(R"(TODO\(lab (\d\d), Block ([A-Z])\))");
  std::smatch m;
  if (!std::regex_search(text, m, todo)) return std::nullopt;
  return std::make_pair(m[1].str(), m[2].str());
}

}  // namespace workbook
