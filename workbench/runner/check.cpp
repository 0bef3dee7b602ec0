// `workbook check [NN]`: rebuild the learner's code and run a lab's tests (default: the first lab
// that is not done), printing each failing check and the block to revisit.
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {

int check_lab(const Context& ctx, const std::optional<std::string>& number) {
  if (number) {
    const Lab& lab = ctx.require_lab(*number);
    return print_check(ctx, lab, run_learner_tests(ctx.ws, lab));
  }
  LabResult result;
  const Lab* lab = current_lab(ctx, &result);
  if (!lab) {
    std::cout << ctx.green("every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size()
              << ")\n";
    return kSuccess;
  }
  return print_check(ctx, *lab, result);
}

}  // namespace workbook
