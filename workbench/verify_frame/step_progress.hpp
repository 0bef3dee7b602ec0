#pragma once
// A long loop's progress (lab 10's training), shown on stderr while it runs, so that a learner sees
// it working through `workbook verify` and `workbook break` too, where stdout is a pipe.
#include <chrono>
#include <cstddef>
#include <string>

namespace workbench {

/// On a terminal, a bar redrawn in place. Otherwise one line at every 5 % of the steps, or after
/// 10 s without one, whichever comes first (`workbook break` shows these lines; keep the form):
///   "step 80/1500 (5%)  random 4.102  second copy 4.087  1.6 s, about 29 s left"
/// Nothing goes to stdout, so verify_output.txt does not change with the machine's speed.
class StepProgress {
 public:
  explicit StepProgress(std::size_t total_steps);
  /// After step `step` (1 … total); `detail` follows the step count ("loss 2.310").
  void update(std::size_t step, const std::string& detail);
  /// Ends the bar's line on a terminal.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::size_t total_;
  bool terminal_;
  Clock::time_point start_ = Clock::now(), last_line_ = start_;
  std::size_t next_line_step_;  // the next 5 % mark
};

}  // namespace workbench
