// `workbook verify NN [--impl reference]`: build and run a lab's verify program.
#include <chrono>
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/process.hpp"

namespace workbook {

int verify_lab(const Context& ctx, const std::string& number, const std::string& impl) {
  const Lab& lab = ctx.require_lab(number);
  const std::string target = lab.target("verify", impl);
  const BuildResult build = build_targets(ctx.ws, {target});
  if (!build.ok) {
    print_build_error(ctx, build);
    return kNotDone;
  }
  // The verify program prints its checks and a "wrote <path>" line per artifact; its stderr (a
  // TODO stub's message) comes to stdout too, so that the next step can name the block.
  workbench::CaptureOptions echo;
  echo.on_line = [](const std::string& line) { std::cout << line << '\n' << std::flush; };
  echo.time_limit = time_limit(kVerifyTimeLimit);
  const auto [program, args] = lab.command(ctx.ws.bin(target).string(), {});
  const workbench::CapturedRun run = workbench::run_captured(program, args, echo);
  const workbench::ProcessStatus& status = run.status;
  if (crashed(status)) {
    std::cout << ctx.red(target + " " + how_it_ended(status, echo.time_limit)) << '\n';
    if (status.timed_out)
      std::cout << "is there an endless loop? (lab 10's training takes about a minute in "
                   "Release, longer in the debug build)\n";
    return impl == "learner" ? kCrashed : kEnvironment;
  }
  if (const auto todo = todo_in(run.output); todo && status.code == 1 && impl == "learner") {
    const Lab* at = find_lab(ctx.labs, todo->first);
    std::cout << "next: finish Block " << todo->second << " of " << (at ? at->text : lab.text)
              << ", then: workbook verify " << lab.number << '\n';
  }
  // The verify program's own 2 (bad input, an I/O failure) is the environment's, not usage.
  return status.code == 0 ? kSuccess : status.code == 1 ? kNotDone : kEnvironment;
}

}  // namespace workbook
