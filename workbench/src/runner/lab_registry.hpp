#pragma once
// The labs, discovered: every labs/NN-slug.md is a lab, and everything the workbook command knows
// about it comes from that text (its learner files, hints and blocks) and from naming conventions
// (tests/labNN_test.cpp, verify/labNN_verify.cpp, solutions/NN-slug.md, bin/test-labNN-learner).
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace workbook {

struct Lab {
  std::string number;  ///< "00"
  std::string slug;    ///< "attention-by-hand"
  std::string title;   ///< "Attention by hand", from the "# Lab 00 — …" heading
  std::vector<std::string> sections;       ///< the "## " headings, in order
  std::vector<std::string> learner_files;  ///< backticked src/….cpp paths of "## Files you edit"
  std::vector<std::string> hints;          ///< the bodies of "### Hint N" under "## Hints"
  std::vector<std::string> blocks;         ///< "A", "B": "### Block X" headings, TODOs in the stubs
  std::map<std::string, std::string> test_blocks;  ///< "Softmax.EveryRowSumsToOne" -> "A"

  std::string text() const { return "labs/" + number + "-" + slug + ".md"; }
  std::string write_up() const { return "solutions/" + number + "-" + slug + ".md"; }
  std::string experiment() const { return number + "-" + slug; }
  /// The learner files with src/ replaced by solutions/.
  std::vector<std::string> reference_files() const;
  bool has_section(const std::string& heading) const;
  /// The block a failing test belongs to: named by its message, listed under a block in the lab
  /// text, or the lab's only block. Empty if none of these says.
  std::string block_for(const std::string& test, const std::string& message) const;
};

/// Parses one lab text. @throws std::runtime_error if it cannot be read or is not named NN-slug.md.
Lab parse_lab(const std::filesystem::path& text);

/// Every labs/NN-*.md under `repo`, by number.
std::vector<Lab> discover_labs(const std::filesystem::path& repo);

/// "7" or "07" -> "07"; nullopt if `text` is not a number of at most two digits.
std::optional<std::string> normalise_lab_number(const std::string& text);

/// The lab numbered `number`, or nullptr.
const Lab* find_lab(const std::vector<Lab>& labs, const std::string& number);

/// "00–02" (or "00, 02, 05" when there are gaps).
std::string lab_range(const std::vector<Lab>& labs);

/// The first "TODO(lab NN, Block X)" in `text`: {"NN", "X"}; nullopt if there is none.
std::optional<std::pair<std::string, std::string>> todo_in(const std::string& text);

std::string read_file(const std::filesystem::path& path);

}  // namespace workbook
