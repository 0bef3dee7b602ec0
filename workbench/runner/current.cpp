// `workbook` with no verb: the current lab, its status and the one command to run next.
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {

int show_current(const Context& ctx) {
  LabResult result;
  const Lab* lab = current_lab(ctx, &result);
  if (!lab) {
    std::cout << ctx.green("every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size()
              << ")\n"
              << "next: workbook grade --json, or compare with solutions/ (workbook solution NN)\n";
    return kSuccess;
  }
  std::cout << "current lab: " << ctx.bold(heading(*lab)) << " (" << lab->text << ")\n"
            << "status: " << status_text(ctx, result.status);
  if (result.status != LabStatus::build_error)
    std::cout << ", " << result.passed << " of " << result.total << " tests pass";
  std::cout << '\n';
  if (result.status == LabStatus::build_error) print_build_error(ctx, result.build);
  std::cout << "next: " << next_step(*lab, result) << '\n';
  return kSuccess;
}

}  // namespace workbook
