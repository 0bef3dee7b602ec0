// `workbook` with no verb: the current lab, its status and the one command to run next, at once.
// The current lab is the first one started and not done; with none started, the first not done.
// Labs need not be taken in order (lab 12 needs no earlier lab), so a learner busy with a later lab
// is shown that lab, and told which earlier ones they have not started.
// It builds nothing it does not have to: a lab's remembered result stands while the files it ran
// on are unchanged (last_results.hpp), a lab whose files are the pristine stubs is not started,
// and only a lab with neither is built and tested.
#include <iostream>
#include <string>
#include <vector>

#include "runner/last_results.hpp"
#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {

namespace {

void report(const Context& ctx, const Lab& lab, const LabResult& result, const std::string& known) {
  std::cout << "current lab: " << ctx.bold(heading(lab)) << " (" << lab.text << ")\n"
            << "status: " << status_text(ctx, result.status);
  if (result.status != LabStatus::build_error)
    std::cout << ", " << result.passed << " of " << result.total << " tests pass";
  if (!known.empty()) std::cout << " (" << known << ")";
  std::cout << '\n';
  if (result.status == LabStatus::build_error) print_build_error(ctx, result.build);
  std::cout << "next: " << next_step(lab, result) << '\n';
}

}  // namespace

int show_current(const Context& ctx) {
  const Lab* first_unstarted = nullptr;
  std::vector<std::string> unstarted_before;  // the numbers of labs not started yet, in order
  for (const Lab& lab : ctx.labs) {
    LabResult result;
    std::string known;  // where the status comes from, when the tests did not run just now
    if (auto recalled = recall_result(ctx.ws, ctx.labs, lab)) {
      result = std::move(recalled->result);
      known = "from its last run, " + recalled->when + "; its files have not changed since";
    } else if (untouched(ctx.ws, lab)) {
      if (!first_unstarted) first_unstarted = &lab;
      unstarted_before.push_back(lab.number);
      continue;
    } else {
      result = run_learner_tests(ctx.ws, ctx.labs, lab);
    }
    if (result.status == LabStatus::done) continue;
    report(ctx, lab, result, known);
    if (!unstarted_before.empty()) {
      std::cout << "not started yet:";
      for (const std::string& number : unstarted_before) std::cout << ' ' << number;
      std::cout << '\n';
    }
    return kSuccess;
  }
  if (first_unstarted) {
    LabResult todo;
    todo.status = LabStatus::todo;
    todo.total = static_cast<int>(first_unstarted->test_names().size());
    report(ctx, *first_unstarted, todo, "its files are the stubs as handed out");
    return kSuccess;
  }
  std::cout << ctx.green("every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size()
            << ")\n"
            << "next: workbook grade --json, or compare with solutions/ (workbook solution NN)\n";
  return kSuccess;
}

}  // namespace workbook
