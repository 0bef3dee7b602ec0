#include "verify_frame/step_progress.hpp"

#include <unistd.h>  // isatty

#include <algorithm>
#include <cstdio>

namespace workbench {
namespace {

constexpr std::size_t kLinesPerRun = 20;  // a line per 5 %
constexpr double kMaxSecondsBetweenLines = 10.0;

}  // namespace

StepProgress::StepProgress(std::size_t total_steps)
    : total_(std::max<std::size_t>(total_steps, 1)),
      terminal_(isatty(STDERR_FILENO) != 0),
      next_line_step_(std::max<std::size_t>(total_ / kLinesPerRun, 1)) {}

void StepProgress::update(std::size_t step, const std::string& detail) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  if (terminal_) {
    const std::size_t filled = 30 * std::min(step, total_) / total_;
    std::fprintf(stderr, "\r[%s%s] step %zu/%zu  %s  %.0f s ", std::string(filled, '#').c_str(),
                 std::string(30 - filled, '.').c_str(), step, total_, detail.c_str(), seconds);
    return;
  }
  if (step < next_line_step_ &&
      std::chrono::duration<double>(now - last_line_).count() < kMaxSecondsBetweenLines)
    return;
  const double left =
      step > 0 ? seconds * double(total_ - std::min(step, total_)) / double(step) : 0;
  std::fprintf(stderr, "step %zu/%zu (%zu%%)  %s  %.1f s, about %.0f s left\n", step, total_,
               100 * step / total_, detail.c_str(), seconds, left);
  last_line_ = now;
  while (next_line_step_ <= step)
    next_line_step_ += std::max<std::size_t>(total_ / kLinesPerRun, 1);
}

void StepProgress::finish() {
  if (terminal_) std::fprintf(stderr, "\n");
}

}  // namespace workbench
