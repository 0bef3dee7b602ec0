#pragma once
// The labs, as labs/labs.json (the registry) says: number, slug, title, learner files, blocks and
// their tests, prerequisites and estimated time. Paths follow from number and slug by the
// registry's "layout" patterns. The one thing read from a lab's text is its hints, because the
// learner reads them there.
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace workbook {

struct Block {
  std::string id;                  ///< "A"
  std::string title;               ///< "softmax", as in the lab text's "### Block A — softmax"
  std::vector<std::string> tests;  ///< "Softmax.EveryRowSumsToOne", …: the tests of this block
};

/// A realistic bug in a lab's code: the reference with one change, from the lab's catalogue
/// (labs/mutants/NN-slug.json). CMake builds it as bin/test-labNN-mutant-NAME (cmake/labs.cmake).
struct Mutant {
  std::string name;        ///< "reshape-straight-to-heads"
  std::string block;       ///< "B": the block whose code it changes
  std::string bug;         ///< one line: what was done wrong, not what it causes
  std::string replace;     ///< text that occurs exactly once in the lab's reference files…
  std::string with;        ///< …and what it becomes
  std::string equivalent;  ///< why no test can tell it from the reference; empty for a real bug
};

struct Lab {
  std::string number;                        ///< "00"
  std::string slug;                          ///< "attention-by-hand"
  std::string title;                         ///< "Attention by hand"
  std::string concept;                       ///< the README lab map's "Concept" (markdown)
  std::string produces;                      ///< the README lab map's "What you produce" (markdown)
  std::string estimated_time;                ///< "45–60 minutes"
  std::vector<std::string> prerequisites;    ///< lab numbers
  std::vector<std::string> learner_files;    ///< "src/minimodel/attention/scaled_dot_product.cpp"
  std::vector<std::string> reference_files;  ///< the same under solutions/
  std::vector<Block> blocks;
  std::vector<int> ranks;  ///< the MPI ranks its programs run on (lab 14's 1, 2, 4); empty: no MPI

  // Paths relative to the repository, from the registry's layout.
  std::string text;        ///< "labs/00-attention-by-hand.md"
  std::string write_up;    ///< "solutions/00-attention-by-hand.md"
  std::string experiment;  ///< "experiments/00-attention-by-hand"
  std::string tests;       ///< "tests/lab00_test.cpp"
  std::string verify;      ///< "verify/lab00_verify.cpp"
  std::string mutants;     ///< "labs/mutants/00-attention-by-hand.json"

  std::string target(const std::string& kind, const std::string& impl) const {
    return kind + "-lab" + number + "-" + impl;  ///< "test-lab00-learner", "verify-lab01-reference"
  }
  /// Every test of the lab, block by block, as the registry lists them.
  std::vector<std::string> test_names() const {
    std::vector<std::string> names;
    for (const Block& block : blocks)
      names.insert(names.end(), block.tests.begin(), block.tests.end());
    return names;
  }
  /// "test-lab01-mutant-reshape-straight-to-heads"
  std::string mutant_target(const std::string& kind, const Mutant& mutant) const {
    return kind + "-lab" + number + "-mutant-" + mutant.name;
  }
  /// The target that builds the learner's test and verify programs: "lab00-learner".
  std::string learner_target() const { return "lab" + number + "-learner"; }
  /// How to run one of the lab's programs: `program` with `args` itself, or, for a lab with ranks,
  /// under `mpiexec -n <its largest number of ranks> --oversubscribe` (whose tests split the ranks
  /// into the smaller groups themselves). Returns {program, args}.
  std::pair<std::string, std::vector<std::string>> command(const std::string& program,
                                                           std::vector<std::string> args) const;
  /// The block a failing test belongs to: named by its TODO message, or by the registry.
  /// Empty if neither says.
  std::string block_for(const std::string& test, const std::string& message) const;
};

/// A learner file that is a test the learner writes (it goes into the lab's test program):
/// "src/minimodel/attention/head_permutation_test.cpp".
inline bool is_learner_test(const std::string& file) {
  const std::string suffix = "_test.cpp";
  return file.size() >= suffix.size() &&
         file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The registry's labs, in order. @throws std::runtime_error naming the file and the field if
/// labs/labs.json is missing or malformed (a number that is not two digits, a duplicate, …).
std::vector<Lab> load_registry(const std::filesystem::path& repo);

/// The labs of a registry's text (labs/labs.json's contents), as load_registry reads them.
/// @throws std::runtime_error naming the field if it is malformed or nests more than
/// workbench::kMaxJsonDepth levels deep.
std::vector<Lab> parse_registry(const std::string& text);

/// Lab `lab`'s mutants, in the catalogue's order; none if it has no catalogue yet. @throws
/// std::runtime_error naming the file and the mutant if the catalogue is malformed.
std::vector<Mutant> load_mutants(const std::filesystem::path& repo, const Lab& lab);

/// A "### Hint N (Block X)" section of a lab text.
struct Hint {
  std::string block;  ///< "X"; empty if the heading names no block
  std::string text;
};

/// The "### Hint N" sections under "## Hints" of a lab text, in order.
std::vector<Hint> hints_in(const std::string& lab_text);

/// "7" or "07" -> "07"; nullopt if `text` is not a number of at most two digits.
std::optional<std::string> normalise_lab_number(const std::string& text);

/// The lab numbered `number`, or nullptr.
const Lab* find_lab(const std::vector<Lab>& labs, const std::string& number);

/// "00–02" (or "00, 02, 05" when there are gaps).
std::string lab_range(const std::vector<Lab>& labs);

/// The first "TODO(lab NN, Block X)" in `text`: {"NN", "X"}; nullopt if there is none.
std::optional<std::pair<std::string, std::string>> todo_in(const std::string& text);

}  // namespace workbook
