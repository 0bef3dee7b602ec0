#include "figures/measured_legends.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace workbench {
namespace {

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

bool valid_bytes(double bytes) { return std::isfinite(bytes) && bytes >= 0.0; }

}  // namespace

std::string heap_bytes_legend(const std::string& layer, std::size_t T, const CallHeapBytes& bytes) {
  if (!valid_bytes(bytes.first_call) || !valid_bytes(bytes.second_call) ||
      !valid_bytes(bytes.output) || bytes.output == 0.0)
    throw std::invalid_argument("heap_bytes_legend: bytes must be finite and >= 0, output > 0: " +
                                std::to_string(bytes.first_call) + ", " +
                                std::to_string(bytes.second_call) + ", " +
                                std::to_string(bytes.output));
  // "Close to nothing beyond its output": under an eighth of the output more.
  const double slack = bytes.output / 8.0;
  const bool second_output_only = bytes.second_call <= bytes.output + slack;
  const bool first_output_only = bytes.first_call <= bytes.output + slack;
  if (second_output_only)
    return layer +
           (first_output_only ? ": its output alone" : ": its output; buffers reused across calls");
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1f×", bytes.second_call / bytes.output);
  return layer + ": " + mib(bytes.second_call) + " per call at T = " + std::to_string(T) + ", " +
         ratio + " its output";
}

std::string causal_skip_legend(const std::string& layer, std::size_t skipped,
                               std::size_t above_diagonal) {
  const std::string head = layer + ", causal: ";
  if (skipped == above_diagonal) return head + "skips the tiles above the diagonal";
  if (skipped == 0)
    return head + "computes every tile (check 4: skips none of " + std::to_string(above_diagonal) +
           ")";
  return head + "skips " + std::to_string(skipped) + " of the " + std::to_string(above_diagonal) +
         " tiles above the diagonal (check 4)";
}

BarChart rates_per_shape_chart(const std::string& title, const std::string& layer,
                               const std::vector<ShapeRates>& ours,
                               const std::vector<ShapeRates>& torch,
                               const std::string& torch_note) {
  if (ours.empty()) throw std::invalid_argument("rates_per_shape_chart: no shape to draw");
  if (!torch.empty()) {
    bool same = torch.size() == ours.size();
    for (std::size_t i = 0; same && i < ours.size(); ++i) same = torch[i].shape == ours[i].shape;
    if (!same)
      throw std::invalid_argument("rates_per_shape_chart: torch's shapes are not " + layer +
                                  "'s (" + std::to_string(torch.size()) + " against " +
                                  std::to_string(ours.size()) + ")");
  }
  BarChart chart;
  chart.title = title;
  chart.x_label = "shape (T, d_model, H)";
  if (torch.empty() && !torch_note.empty()) chart.x_label += "; " + torch_note;
  chart.y_label = "GFLOP/s (causal counted at the full FLOPs)";
  BarSeries plain{{}, layer}, causal{{}, layer + ", causal"};
  BarSeries torch_plain{{}, "torch MHA, same run"}, torch_causal{{}, "torch MHA, causal, same run"};
  for (std::size_t i = 0; i < ours.size(); ++i) {
    chart.categories.push_back(ours[i].shape);
    plain.values.push_back(ours[i].plain);
    causal.values.push_back(ours[i].causal);
    if (!torch.empty()) {
      torch_plain.values.push_back(torch[i].plain);
      torch_causal.values.push_back(torch[i].causal);
    }
  }
  chart.series = {plain, causal};
  if (!torch.empty()) chart.series.insert(chart.series.end(), {torch_plain, torch_causal});
  return chart;
}

}  // namespace workbench
