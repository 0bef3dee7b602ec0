// `workbook hint NN [--restart]`: the next "### Hint N" of a lab's text, one more per call. The
// counters are kept in the verbs' state (load_state): {"hints_shown": {"00": 2}}.
#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"

namespace workbook {

int show_hint(const Context& ctx, const std::string& number, bool restart) {
  const Lab& lab = ctx.require_lab(number);
  const std::vector<std::string> hints = hints_in(workbench::read_file(ctx.ws.repo / lab.text));
  if (hints.empty()) {
    std::cout << "lab " << lab.number << " has no hints; reread " << lab.text << '\n';
    return kSuccess;
  }
  nlohmann::json state = load_state(ctx.ws);
  if (!state["hints_shown"].is_object()) state["hints_shown"] = nlohmann::json::object();
  const nlohmann::json& counter = state["hints_shown"][lab.number];
  const int shown = restart || !counter.is_number_integer() ? 0 : counter.get<int>();
  const int n = static_cast<int>(hints.size());
  const int next = std::max(1, std::min(shown + 1, n));
  std::cout << ctx.bold("Hint " + std::to_string(next) + " of " + std::to_string(n)) << " for "
            << heading(lab) << "\n\n"
            << hints[next - 1] << "\n\n";
  if (next < n)
    std::cout << "`workbook hint " << lab.number << "` again shows the next one.\n";
  else
    std::cout << "that is the last hint; `workbook hint " << lab.number
              << " --restart` starts over.\n";
  state["hints_shown"][lab.number] = next;
  save_state(ctx.ws, state);
  return kSuccess;
}

}  // namespace workbook
