#pragma once
// Grouped bar charts for the verify programs (e.g. a score per attention head), drawn with cairo
// and written as PNG.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace workbench {

/// One group of bars: values[i] is drawn in category i, in this series' colour.
struct BarSeries {
  std::vector<double> values;
  std::string label;  ///< shown in the legend
};

/// Bars grouped by category (e.g. one group per attention head, one bar per score).
struct BarChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;  ///< one label under each group
  std::vector<BarSeries> series;        ///< each has categories.size() values
  double y_min = 0.0;  ///< bottom of the axis; bars start at 0 (or y_min if above 0)
  std::optional<double>
      y_max;  ///< top of the axis; default: a round number above the largest value
};

/// Renders the chart to `png` atomically (temporary file, then rename), about 800 x 500 px like
/// render_line_plot, wider when the legend has to go outside. Each category gets an equal slot
/// with one bar per series side by side, in the series' colour (matplotlib's tab10, in series
/// order, as in the line plots). Labelled series get a legend inside the first corner of the plot
/// area where it hides no bar or value, else to the right of it. Each bar's value is written above
/// it (below a negative bar) when there is room, e.g. "0.93"; the category labels go under their
/// groups, turned 45 or 90 degrees and, if very long, abbreviated when they would overlap.
/// Negative values draw downward from 0. A value below y_min lowers the axis to a round number
/// below it; a value above an explicit y_max is cut off at the top of the axis.
/// @throws std::invalid_argument if there are no categories or series, a series has another
///         number of values than categories, a value (or y_min, y_max) is not finite, or
///         y_max <= y_min; std::runtime_error if the file cannot be written.
void render_bar_chart(const std::filesystem::path& png, const BarChart& chart);

}  // namespace workbench
