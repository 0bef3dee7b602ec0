// `workbook` with no verb: the current lab, its status and the one command to run next, at once.
// It builds nothing it does not have to: a lab's remembered result stands while the files it ran
// on are unchanged (last_results.hpp), a lab whose files are the pristine stubs is not started,
// and only a lab with neither is built and tested.
#include <iostream>

#include "runner/last_results.hpp"
#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {

int show_current(const Context& ctx) {
  for (const Lab& lab : ctx.labs) {
    LabResult result;
    std::string known;  // where the status comes from, when the tests did not run just now
    if (auto recalled = recall_result(ctx.ws, ctx.labs, lab)) {
      result = std::move(recalled->result);
      known = "from its last run, " + recalled->when + "; its files have not changed since";
    } else if (untouched(ctx.ws, lab)) {
      result.status = LabStatus::todo;
      result.total = static_cast<int>(lab.test_names().size());
      known = "its files are the stubs as handed out";
    } else {
      result = run_learner_tests(ctx.ws, ctx.labs, lab);
    }
    if (result.status == LabStatus::done) continue;
    std::cout << "current lab: " << ctx.bold(heading(lab)) << " (" << lab.text << ")\n"
              << "status: " << status_text(ctx, result.status);
    if (result.status != LabStatus::build_error)
      std::cout << ", " << result.passed << " of " << result.total << " tests pass";
    if (!known.empty()) std::cout << " (" << known << ")";
    std::cout << '\n';
    if (result.status == LabStatus::build_error) print_build_error(ctx, result.build);
    std::cout << "next: " << next_step(lab, result) << '\n';
    return kSuccess;
  }
  std::cout << ctx.green("every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size()
            << ")\n"
            << "next: workbook grade --json, or compare with solutions/ (workbook solution NN)\n";
  return kSuccess;
}

}  // namespace workbook
