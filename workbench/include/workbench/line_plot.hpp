#pragma once
// Line plots for the verify programs (e.g. a norm per layer, a score per offset), drawn with
// cairo and written as PNG.
#include <filesystem>
#include <string>
#include <vector>

namespace workbench {

/// One line of a plot: y[i] drawn at x[i], with a marker at every point.
struct LineSeries {
  std::vector<double> x;
  std::vector<double> y;
  std::string label;  ///< shown in the legend
};

/// A plot of one or more series on shared axes, with a legend.
struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<LineSeries> series;
  bool log_y = false;  ///< logarithmic y axis; every y must then be > 0
};

/// Renders a single plot (1 panel) to `png`, atomically (temporary file, then rename).
/// Axis ranges cover all points with a small margin; ticks are round numbers.
/// @throws std::invalid_argument if there is no series, a series is empty, its x and y differ in
///         length, a value is not finite, or log_y meets y <= 0; std::runtime_error if the file
///         cannot be written.
void render_line_plot(const std::filesystem::path& png, const LinePlot& plot);

/// Renders several plots side by side (1 row, plots.size() panels) into one PNG.
void render_line_plots(const std::filesystem::path& png, const std::string& title,
                       const std::vector<LinePlot>& plots);

}  // namespace workbench
