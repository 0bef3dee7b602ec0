// `workbook list`: every lab with its status and a progress bar.
#include <algorithm>
#include <iostream>

#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {
namespace {

// "[#####-----] 1/3 labs done" on a terminal, "1/3 labs done" otherwise.
std::string progress(const Context& ctx, std::size_t done, std::size_t total) {
  std::string text = std::to_string(done) + "/" + std::to_string(total) + " labs done";
  if (!ctx.terminal || total == 0) return text;
  constexpr std::size_t kWidth = 20;
  const std::size_t filled = done * kWidth / total;
  return "[" + ctx.green(std::string(filled, '#')) + std::string(kWidth - filled, '-') + "] " +
         text;
}

}  // namespace

int list_labs(const Context& ctx) {
  const std::vector<LabResult> results = run_all(ctx.ws, ctx.labs);
  std::size_t done = 0;
  bool blocked = false;  // an earlier lab is not done
  for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
    const Lab& lab = ctx.labs[i];
    const LabResult& r = results[i];
    std::string status = status_text(ctx, r.status);
    std::string plain = status_name(r.status);
    if (r.status != LabStatus::done && blocked) status = plain = "locked";
    std::cout << lab.number << "  " << pad(lab.title, title_width(ctx.labs)) << status
              << std::string(13 - std::min<std::size_t>(12, plain.size()), ' ');
    if (r.status == LabStatus::build_error)
      std::cout << "(see workbook check " << lab.number << ")";
    else
      std::cout << r.passed << "/" << r.total << " tests";
    std::cout << '\n';
    done += r.status == LabStatus::done;
    blocked = blocked || r.status != LabStatus::done;
  }
  std::cout << progress(ctx, done, ctx.labs.size()) << '\n';
  if (done < ctx.labs.size()) std::cout << "locked is advice only: every verb works on every lab\n";
  return done == ctx.labs.size() ? kSuccess : kNotDone;
}

}  // namespace workbook
