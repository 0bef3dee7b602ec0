// `workbook grade [--json]`: each lab's passed/total tests and a score, for an autograder.
#include <iostream>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/verbs.hpp"

namespace workbook {

int grade(const Context& ctx, bool json) {
  // An autograder gets a document in every case: a broken environment (no configured build
  // folder, no cmake) is reported inside it, with every lab ungraded.
  std::vector<LabResult> results;
  std::string error;
  try {
    results = run_all(ctx.ws, ctx.labs);
  } catch (const EnvironmentError& e) {
    error = e.what();
    results.assign(ctx.labs.size(), LabResult{});
  }
  nlohmann::ordered_json report = {{"labs", nlohmann::ordered_json::array()}};
  int passed = 0, total = 0;
  for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
    const LabResult& r = results[i];
    report["labs"].push_back({{"lab", ctx.labs[i].number},
                              {"title", ctx.labs[i].title},
                              {"passed", r.passed},
                              {"total", r.total},
                              {"status", status_name(r.status)}});
    passed += r.passed;
    total += r.total;
  }
  report["passed"] = passed;
  report["total"] = total;
  report["score"] = total ? double(passed) / total : 0.0;
  if (!error.empty()) report["error"] = error;
  if (json) {
    std::cout << report.dump(2) << '\n';
    return kSuccess;
  }
  for (const auto& lab : report["labs"])
    std::cout << lab["lab"].get<std::string>() << "  "
              << pad(lab["title"].get<std::string>(), title_width(ctx.labs))
              << lab["passed"].get<int>() << "/" << lab["total"].get<int>() << "  "
              << lab["status"].get<std::string>() << '\n';
  if (!error.empty()) std::cout << ctx.red(error) << '\n';
  std::cout << "score " << passed << "/" << total << '\n';
  return kSuccess;
}

}  // namespace workbook
