#pragma once
// Heatmap figures for the verify programs, drawn with cairo and written as PNG.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

namespace workbench {

/// One matrix of a figure, e.g. the attention weights of one head.
struct HeatmapPanel {
  xt::xtensor<float, 2> values;  ///< (rows, cols); row i is drawn at the top-most i-th line
  std::string title;             ///< e.g. "head 0"
  /// Cells left out of the colour scale (a masked score, a padded key), drawn hatched grey and
  /// keyed as HeatmapFigure::excluded_label, so that they never pass for a tiny value. Empty: none;
  /// else (rows, cols).
  xt::xtensor<bool, 2> excluded = xt::xtensor<bool, 2>::from_shape({0, 0});
};

/// A grid of panels that share axes labels and one colour scale, with a colour bar.
struct HeatmapFigure {
  std::string title;                 ///< above the grid
  std::vector<HeatmapPanel> panels;  ///< drawn row by row into the grid
  std::size_t grid_rows = 1;         ///< grid_rows * grid_cols >= panels.size()
  std::size_t grid_cols = 1;
  std::vector<std::string> row_labels;  ///< one per matrix row (queries); empty: 0, 1, 2, ...
  std::vector<std::string> col_labels;  ///< one per matrix column (keys); empty: 0, 1, 2, ...
  std::string row_axis = "query";       ///< axis titles
  std::string col_axis = "key";
  float vmin = 0.0f;  ///< colour scale: vmin is dark purple, vmax is yellow
  float vmax = 1.0f;
  std::string colorbar_label = "attention weight";
  std::string excluded_label = "masked";  ///< the key of the panels' excluded cells
  bool annotate = false;  ///< write each cell's value in it (when the cells are big enough)
};

/// Renders the figure with the viridis colour map and writes it to `png` (via a temporary file,
/// then rename, so a failed write never leaves half a PNG). A one-character punctuation label
/// ("," or ".") is drawn in quotes, so that it stays visible.
/// @throws std::invalid_argument if the figure is inconsistent (labels or excluded cells vs matrix
///         shape, too many panels for the grid, vmin >= vmax); std::runtime_error if the file
///         cannot be written.
void render_heatmaps(const std::filesystem::path& png, const HeatmapFigure& figure);

}  // namespace workbench
