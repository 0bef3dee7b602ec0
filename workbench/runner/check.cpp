// `workbook check [NN] [--block X | --test NAME]`: rebuild the learner's code and run a lab's tests
// (default: the first lab that is not done), the root cause first.
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {
namespace {

// A gtest filter for the tests of `lab` that `only` names: its --block's tests, or the tests whose
// name contains --test. The lab's own test program holds only its tests, so no filter leaves the
// lab.
std::string gtest_filter(const Lab& lab, const CheckOnly& only) {
  if (!only.test.empty()) return "*" + only.test + "*";
  if (only.block.empty()) return "";
  std::string ids;
  for (const Block& block : lab.blocks) {
    if (block.id != only.block) {
      ids += (ids.empty() ? "" : ", ") + block.id;
      continue;
    }
    std::string filter;
    for (const std::string& test : block.tests) filter += (filter.empty() ? "" : ":") + test;
    return filter;
  }
  throw UsageError("lab " + lab.number + " has no Block " + only.block + "; its blocks are " + ids);
}

// print_check's status, or kCrashed where the tests crashed or ran past their time limit.
int exit_status(const LabResult& result, int printed) {
  return printed != kSuccess && result.status != LabStatus::build_error && !result.problem.empty()
             ? kCrashed
             : printed;
}

}  // namespace

int check_lab(const Context& ctx, const std::optional<std::string>& number, const CheckOnly& only) {
  if (number) {
    const Lab& lab = ctx.require_lab(*number);
    const std::string filter = gtest_filter(lab, only);
    const LabResult result = run_learner_tests(ctx.ws, ctx.labs, lab, filter);
    // No test ran because the program crashed, stopped or ran out of time: say that, not that no
    // test matches.
    if (!filter.empty() && result.status != LabStatus::build_error && result.total == 0 &&
        result.problem.empty())
      throw UsageError("no test of lab " + lab.number + " matches " +
                       (only.test.empty() ? "Block " + only.block : only.test));
    const std::string part =
        only.test.empty() ? "Block " + only.block : "the tests matching " + only.test;
    if (!filter.empty()) std::cout << "(only " << part << ")\n";
    if (!filter.empty() && result.status == LabStatus::done) {  // the lab itself may not be
      std::cout << ctx.green("all " + std::to_string(result.total) + " tests of " + part + " pass")
                << '\n';
      print_learner_warnings(ctx, lab, result.build);
      std::cout << "next: workbook check " << lab.number << "   (every block)\n";
      return kSuccess;
    }
    return exit_status(result, print_check(ctx, lab, result));
  }
  if (!only.block.empty() || !only.test.empty())
    throw UsageError("--block and --test need a lab number: workbook check NN --block X");
  LabResult result;
  const Lab* lab = current_lab(ctx, &result);
  if (!lab) {
    std::cout << ctx.green("every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size()
              << ")\n";
    return kSuccess;
  }
  return exit_status(result, print_check(ctx, *lab, result));
}

}  // namespace workbook
