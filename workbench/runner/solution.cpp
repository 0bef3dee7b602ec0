// `workbook solution NN [--force]`: the reference write-up and code, once the lab's tests pass.
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"

namespace workbook {

int show_solution(const Context& ctx, const std::string& number, bool force) {
  const Lab& lab = ctx.require_lab(number);
  if (!force) {
    const LabResult result = run_learner_tests(ctx.ws, ctx.labs, lab);
    if (result.status != LabStatus::done) {
      std::cout << "lab " << lab.number << " is not done yet (" << status_name(result.status);
      if (result.status != LabStatus::build_error)
        std::cout << ", " << result.passed << " of " << result.total << " tests pass";
      std::cout << "): the solution opens once `workbook check " << lab.number << "` passes.\n"
                << "`workbook solution " << lab.number << " --force` shows it anyway.\n";
      return kNotDone;
    }
  }
  std::cout << "==> " << lab.write_up << " <==\n"
            << workbench::read_file(ctx.ws.repo / lab.write_up) << '\n';
  for (const std::string& file : lab.reference_files)
    std::cout << "==> " << file << " <==\n" << workbench::read_file(ctx.ws.repo / file) << '\n';
  return kSuccess;
}

}  // namespace workbook
