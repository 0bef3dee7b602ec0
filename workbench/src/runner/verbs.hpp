#pragma once
// The verbs of the `workbook` command. Each returns the exit status: 0 success, 1 a check failed or
// the lab is not done, 2 a usage or environment error (thrown as UsageError / EnvironmentError and
// reported by workbook_main.cpp).
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab_registry.hpp"
#include "learner_tests.hpp"

namespace workbook {

/// A bad command line: an unknown lab number, a missing confirmation (exit status 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Context {
  Workspace ws;
  std::vector<Lab> labs;
  bool terminal = false;  ///< stdout is a terminal: colour and progress bars
};

/// Green, red, yellow or bold text on a terminal; the text alone otherwise.
std::string green(const Context& ctx, const std::string& text);
std::string red(const Context& ctx, const std::string& text);
std::string yellow(const Context& ctx, const std::string& text);
std::string bold(const Context& ctx, const std::string& text);

/// The lab `number` names ("0", "00"). @throws UsageError "no lab 07: labs are 00–02".
const Lab& require_lab(const Context& ctx, const std::string& number);

int show_current(const Context& ctx);                                   // workbook
int list_labs(const Context& ctx);                                      // workbook list
int check_lab(const Context& ctx, const std::optional<std::string>& number);  // workbook check [NN]
int verify_lab(const Context& ctx, const std::string& number, const std::string& impl);
int diff_lab(const Context& ctx, const std::string& number);
int show_hint(const Context& ctx, const std::string& number, bool restart);
int show_solution(const Context& ctx, const std::string& number, bool force);
int reset_lab(const Context& ctx, const std::string& number, bool yes);
int grade(const Context& ctx, bool json);
int watch(const Context& ctx, bool poll);                         // watch.cpp
int dev_check(const Context& ctx, const std::vector<std::string>& only_labs);  // dev_check.cpp

/// Prints lab `lab`'s result the way `check` does; returns 0 if done, 1 otherwise.
int print_check(const Context& ctx, const Lab& lab, const LabResult& result);

/// The first lab that is not done, or nullptr if every lab is; runs the tests in order.
const Lab* current_lab(const Context& ctx, LabResult* result = nullptr);

}  // namespace workbook
