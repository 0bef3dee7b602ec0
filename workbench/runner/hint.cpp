// `workbook hint NN [--restart]`: the next "### Hint N" of a lab's text, one more per call. The
// counters are the only state the command keeps, in BUILD/workbook-state.json:
//   {"hints_shown": {"00": 2}}
// It lives in the build tree, never in the learner's sources; deleting it only resets the hints.
#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

fs::path state_path(const Context& ctx) { return ctx.ws.build / "workbook-state.json"; }

nlohmann::json load_state(const Context& ctx) {
  if (!fs::exists(state_path(ctx))) return nlohmann::json::object();
  // A damaged state only loses hint counters.
  const auto state = nlohmann::json::parse(workbench::read_file(state_path(ctx)), nullptr, false);
  return state.is_object() ? state : nlohmann::json::object();
}

}  // namespace

int show_hint(const Context& ctx, const std::string& number, bool restart) {
  const Lab& lab = ctx.require_lab(number);
  const std::vector<std::string> hints = hints_in(workbench::read_file(ctx.ws.repo / lab.text));
  if (hints.empty()) {
    std::cout << "lab " << lab.number << " has no hints; reread " << lab.text << '\n';
    return kSuccess;
  }
  nlohmann::json state = load_state(ctx);
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
  workbench::write_file_atomically(state_path(ctx), state.dump(2) + "\n");
  return kSuccess;
}

}  // namespace workbook
