#pragma once
// Line plots for the verify programs (e.g. a norm per layer, a score per offset), drawn with
// cairo and written as PNG.
#include <filesystem>
#include <string>
#include <vector>

namespace workbench {

/// One line of a plot: y[i] drawn at x[i], in the given order, with a marker at every point
/// (unless the points are too dense for markers to tell them apart, e.g. a long loss curve).
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
  bool log_x = false;  ///< logarithmic x axis; every x must then be > 0
};

/// Renders a single plot (1 panel) to `png`, atomically (temporary file, then rename); the plot's
/// title is the figure title. About 800 x 500 px, wider when the legend has to go outside.
/// Axis ranges cover all points with a small margin; ticks are round numbers (whole numbers when
/// every x is one), or decades labelled 1e-02 on a log axis. A log_x axis that would label fewer
/// than three decades labels the powers of two instead (128, 256, ..., 16384) when every x >= 1.
/// Each series has its own colour (matplotlib's tab10); labelled series get a legend inside the
/// first corner of the plot area where it hides no data, else to the right of it.
/// @throws std::invalid_argument if there is no series, a series is empty, its x and y differ in
///         length, a value is not finite, or log_x or log_y meets a value <= 0; std::runtime_error
///         if the file cannot be written.
void render_line_plot(const std::filesystem::path& png, const LinePlot& plot);

/// Renders several plots side by side (1 row, plots.size() panels, about 560 px wide each) into
/// one PNG, under the figure `title`; each plot's title is its panel's title.
/// @throws std::invalid_argument if `plots` is empty or a plot is invalid as above (the message
///         names the plot); std::runtime_error if the file cannot be written.
void render_line_plots(const std::filesystem::path& png, const std::string& title,
                       const std::vector<LinePlot>& plots);

}  // namespace workbench
