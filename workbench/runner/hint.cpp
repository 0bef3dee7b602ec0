// `workbook hint NN [--restart]`: the next "### Hint N (Block X)" of a lab's text, one more per
// call, of the block that fails first in the lab's last run of its tests (last_results.hpp), or in
// the text's order when that run is unknown or stale. The hints shown are kept in the verbs' state
// (load_state): {"hints_shown": {"00": [1, 2]}}.
#include <algorithm>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "runner/last_results.hpp"
#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"

namespace workbook {
namespace {

// The hints already shown, 1-based; a count from an older workbook means the first that many.
std::set<int> shown_hints(const nlohmann::json& saved) {
  std::set<int> shown;
  if (saved.is_number_integer())
    for (int i = 1; i <= saved.get<int>(); ++i) shown.insert(i);
  if (saved.is_array())
    for (const auto& n : saved)
      if (n.is_number_integer()) shown.insert(n.get<int>());
  return shown;
}

}  // namespace

int show_hint(const Context& ctx, const std::string& number, bool restart) {
  const Lab& lab = ctx.require_lab(number);
  const std::vector<Hint> hints = hints_in(workbench::read_file(ctx.ws.repo / lab.text));
  if (hints.empty()) {
    std::cout << "lab " << lab.number << " has no hints; reread " << lab.text << '\n';
    return kSuccess;
  }
  std::string failing;  // the first failing block of the last run, if the files are unchanged
  if (const auto recalled = recall_result(ctx.ws, ctx.labs, lab);
      recalled && !recalled->result.failures.empty()) {
    const TestFailure& first = recalled->result.failures.front();
    failing = lab.block_for(first.test, first.summary);
  }
  const bool focused = std::any_of(hints.begin(), hints.end(),
                                   [&](const Hint& hint) { return hint.block == failing; });

  nlohmann::json state = load_state(ctx.ws);
  if (!state["hints_shown"].is_object()) state["hints_shown"] = nlohmann::json::object();
  std::set<int> shown = restart ? std::set<int>{} : shown_hints(state["hints_shown"][lab.number]);
  const int n = static_cast<int>(hints.size());
  int next = 0, last_of_block = 0;  // 1-based
  for (int i = 1; i <= n; ++i) {
    if (focused && hints[i - 1].block != failing) continue;
    last_of_block = i;
    if (!next && !shown.count(i)) next = i;
  }
  const bool repeated = next == 0;
  if (repeated) next = last_of_block;
  shown.insert(next);

  std::cout << ctx.bold("Hint " + std::to_string(next) + " of " + std::to_string(n)) << " for "
            << heading(lab);
  if (focused)
    std::cout << ", on Block " << failing << ", the first to fail in the last run of your tests";
  std::cout << "\n\n" << hints[next - 1].text << "\n\n";
  const std::string about = focused ? "Block " + failing + "'s" : "the lab's";
  if (!repeated && std::any_of(hints.begin() + next, hints.end(),
                               [&](const Hint& hint) { return !focused || hint.block == failing; }))
    std::cout << "`workbook hint " << lab.number << "` again shows " << about << " next one.\n";
  else
    std::cout << "that is " << about << " last hint; `workbook hint " << lab.number
              << " --restart` starts over.\n";
  update_state(ctx.ws, [&](nlohmann::json& fresh) {  // as other verbs left it meanwhile
    if (!fresh["hints_shown"].is_object()) fresh["hints_shown"] = nlohmann::json::object();
    fresh["hints_shown"][lab.number] = std::vector<int>(shown.begin(), shown.end());
  });
  return kSuccess;
}

}  // namespace workbook
