#pragma once
// The verbs of the `workbook` command, one file each (list.cpp, check.cpp, …). Each returns its
// exit status (ExitStatus in workspace.hpp); usage and environment problems are thrown as
// UsageError and EnvironmentError and reported by workbook_main.cpp.
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/workspace.hpp"

namespace workbook {

int show_current(const Context& ctx);  // current.cpp
int list_labs(const Context& ctx);     // list.cpp
/// What `check NN` runs: everything, one block's tests (--block) or the tests whose name contains
/// --test.
struct CheckOnly {
  std::string block;
  std::string test;
};
int check_lab(const Context& ctx, const std::optional<std::string>& number,
              const CheckOnly& only = {});  // check.cpp
int verify_lab(const Context& ctx, const std::string& number, const std::string& impl);
int diff_lab(const Context& ctx, const std::string& number);
int show_hint(const Context& ctx, const std::string& number, bool restart);
/// `break NN [NAME]`: list lab NN's mutants, or predict, build and run one (break.cpp).
int break_lab(const Context& ctx, const std::string& number, const std::string& name, bool predict);
/// The tests a prediction names: "all", "none", "Block B", or names and parts of names that start
/// with a capital letter as test and suite names do ("SplitHeads", "MatchesTorch*",
/// "SplitHeads.MergeHeadsUndoesIt"). Other words ("and", "the", a block's letter) are ignored.
std::set<std::string> predicted_tests(const Lab& lab, const std::string& prediction);
int show_solution(const Context& ctx, const std::string& number, bool force);
int reset_lab(const Context& ctx, const std::string& number, bool yes);
int grade(const Context& ctx, bool json);
/// `corpus [--out DIR]`: lab 12's King James Bible corpus; DIR defaults to BUILD/corpus.
int write_corpus(const Context& ctx, const std::string& out);  // corpus.cpp
int watch(const Context& ctx, bool poll);

// explore.cpp: the attention explorer's page.
/// `explore NN`: writes lab NN's explore.html from the explore.json of its last verify run with
/// `impl` ("learner" or "reference"), and sets `page` to its path.
int explore_lab(const Context& ctx, const std::string& number, const std::string& impl,
                std::filesystem::path& page);
/// Where `explore --checkpoint` writes its page without --out: explore-checkpoint.html beside the
/// checkpoint folder, in the experiment folder of the run that saved it (whichever code reads it).
std::filesystem::path default_explore_page(const std::filesystem::path& checkpoint);
/// Serves `page` at http://127.0.0.1:port/ (port 0: any free one, printed) until SIGINT, SIGTERM
/// or SIGHUP; a port it cannot listen on gets one line and kEnvironment.
int serve_page(const std::filesystem::path& page, int port);

struct BenchOptions {
  std::string impl = "both";  ///< "reference", "learner" or "both"
  int threads = 0;            ///< OpenBLAS threads; 0: one per core
  int repetitions = 5;        ///< the median of this many runs is reported
  bool quick = false;         ///< two tiny shapes, for tests
  bool json = false;          ///< one JSON document instead of the table
};
int bench(const Context& ctx, const BenchOptions& options);  // bench.cpp

struct DevCheckOptions {
  std::vector<std::string> only_labs;  ///< lab numbers; empty: all
  bool files_only = false;             ///< check the registry against the files; no build
  bool tests_just_ran = false;  ///< build and check quoted commands, but run no ctest label again
  bool write_lab_map = false;   ///< first write README.md's lab map from the registry
  bool skip_mutants = false;    ///< do not build and run the mutants (3.5 minutes on 2 cores)
};
int dev_check(const Context& ctx, const DevCheckOptions& options);  // dev_check.cpp

}  // namespace workbook
