// Heatmap figures drawn with cairo's toy text API and written as PNG by cairo itself.
//
// Layout, left to right: one slot per grid column (y-axis title, row labels, the matrix, a gap),
// then the colour bar with its ticks and label. Top to bottom: the figure title, then one slot per
// grid row (panel title, the matrix, column labels, x-axis title, a gap).
//
// Values outside [vmin, vmax] are clamped, so +-inf take the end colours. NaN cells are drawn light
// grey instead of throwing: a learner whose softmax produced NaN learns more from seeing which
// cells went wrong than from an exception. Excluded cells (masked, padded) are hatched darker grey,
// with a key of their own.
#include "figures/heatmap.hpp"

#include <cairo.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "figure_drawing.hpp"
#include "minimodel/shapes.hpp"

namespace workbench {
namespace {

using namespace drawing;  // the shared look and helpers of figure_drawing.hpp

// --- Layout constants, in pixels (the shared ones are in figure_drawing.hpp) -------------------
constexpr double kPanelGap = 36;  // between neighbouring panels, and before the colour bar
constexpr double kColorbarWidth = 20;
constexpr double kMinColorbarHeight = 160;  // room for 5 tick labels when matrices are flat
constexpr double kNanKeySide = 12;
constexpr int kPanelSide = 320;  // a small matrix is drawn about this wide
constexpr int kMaxCell = 48;     // so that a 2 x 2 matrix does not fill the screen
constexpr double kMaxImageSide = 1900;
constexpr int kColorbarTicks = 5;

constexpr Rgb kNanGrey{0.85, 0.85, 0.85};
constexpr Rgb kExcludedGrey{0.62, 0.62, 0.62};  // hatched with white
constexpr int kMinAnnotatedCell = 36;           // room for "0.123" in a cell

// --- Colour map --------------------------------------------------------------------------------

/// Viridis: every 15th entry of matplotlib's 256-entry table (_cm_listed.py), so 18 anchors at
/// equal spacing. Linear interpolation between them stays within 2 % of the full table.
Rgb viridis(double t) {
  static constexpr std::array<Rgb, 18> kAnchors{{
      {0.267004, 0.004874, 0.329415},  // #440154
      {0.281924, 0.089666, 0.412415},
      {0.280255, 0.165693, 0.476498},
      {0.263663, 0.237631, 0.518762},
      {0.237441, 0.305202, 0.541921},
      {0.208623, 0.367752, 0.552675},
      {0.182256, 0.426184, 0.557120},
      {0.159194, 0.482237, 0.558073},
      {0.137770, 0.537492, 0.554906},
      {0.121148, 0.592739, 0.544641},
      {0.128087, 0.647749, 0.523491},
      {0.180653, 0.701402, 0.488189},
      {0.274149, 0.751988, 0.436601},
      {0.395174, 0.797475, 0.367757},
      {0.535621, 0.835785, 0.281908},
      {0.688944, 0.865448, 0.182725},
      {0.845561, 0.887322, 0.099702},
      {0.993248, 0.906157, 0.143936},  // #fde725
  }};
  const double pos = std::clamp(t, 0.0, 1.0) * static_cast<double>(kAnchors.size() - 1);
  const std::size_t i = std::min(static_cast<std::size_t>(pos), kAnchors.size() - 2);
  const double f = pos - static_cast<double>(i);
  const Rgb& a = kAnchors[i];
  const Rgb& b = kAnchors[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

Rgb value_colour(float value, const HeatmapFigure& figure) {
  if (std::isnan(value)) return kNanGrey;
  const double vmin = figure.vmin;
  const double vmax = figure.vmax;
  return viridis((static_cast<double>(value) - vmin) / (vmax - vmin));
}

// --- Labels -------------------------------------------------------------------------------------

std::vector<std::string> labels_or_indices(const std::vector<std::string>& labels, std::size_t n) {
  if (!labels.empty()) {
    std::vector<std::string> quoted = labels;
    for (std::string& label : quoted)
      if (label.size() == 1 && std::ispunct(static_cast<unsigned char>(label[0])))
        label = "'" + label + "'";
    return quoted;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

// --- Validation ---------------------------------------------------------------------------------

void validate(const HeatmapFigure& figure) {
  const std::string where = "render_heatmaps: ";
  if (figure.panels.empty()) throw std::invalid_argument(where + "the figure has no panels");
  const std::size_t n = figure.panels.size();
  if (figure.grid_rows * figure.grid_cols < n)
    throw std::invalid_argument(where + std::to_string(n) + " panels do not fit a " +
                                std::to_string(figure.grid_rows) + " x " +
                                std::to_string(figure.grid_cols) + " grid");
  const auto& first = figure.panels.front().values;
  if (first.shape(0) == 0 || first.shape(1) == 0)
    throw std::invalid_argument(where + "panel 0 is " + minimodel::shape_of(first) +
                                "; a heatmap needs at least one row and one column");
  for (std::size_t p = 0; p < n; ++p) {
    const auto& excluded = figure.panels[p].excluded;
    if (excluded.size() != 0 && excluded.shape() != first.shape())
      throw std::invalid_argument(where + "panel " + std::to_string(p) + "'s excluded cells are " +
                                  minimodel::shape_of(excluded) + " but its values are " +
                                  minimodel::shape_of(first));
  }
  for (std::size_t p = 1; p < n; ++p) {
    const auto& values = figure.panels[p].values;
    if (values.shape() != first.shape())
      throw std::invalid_argument(where + "panel " + std::to_string(p) + " is " +
                                  minimodel::shape_of(values) + " but panel 0 is " +
                                  minimodel::shape_of(first) + "; all panels share one shape");
  }
  const std::size_t rows = first.shape(0);
  const std::size_t cols = first.shape(1);
  if (!figure.row_labels.empty() && figure.row_labels.size() != rows)
    throw std::invalid_argument(where + std::to_string(figure.row_labels.size()) +
                                " row_labels for " + std::to_string(rows) + " rows");
  if (!figure.col_labels.empty() && figure.col_labels.size() != cols)
    throw std::invalid_argument(where + std::to_string(figure.col_labels.size()) +
                                " col_labels for " + std::to_string(cols) + " columns");
  if (!(std::isfinite(figure.vmin) && std::isfinite(figure.vmax) && figure.vmin < figure.vmax))
    throw std::invalid_argument(where + "the colour scale needs finite vmin < vmax, got vmin = " +
                                number(figure.vmin) + " and vmax = " + number(figure.vmax));
}

// --- Layout -------------------------------------------------------------------------------------

/// Every position the drawing needs, computed once from text measurements.
struct Layout {
  std::size_t rows = 0, cols = 0;
  std::vector<std::string> row_labels, col_labels, tick_labels;
  std::vector<double> tick_values;
  int cell = 0;              // side of one matrix cell
  std::size_t row_step = 1;  // label every row_step-th row, so labels do not overlap
  std::size_t col_step = 1;
  double col_angle = 0;         // 0, 45 or 90 degrees
  double col_label_offset = 0;  // matrix bottom to the anchor of the column labels
  double x_title_offset = 0;    // matrix bottom to the top of the x-axis title
  double matrix_left = 0;       // slot origin to the matrix
  double matrix_top = 0;
  double slot_w = 0, slot_h = 0;  // one grid cell of the figure, gaps included
  double grid_x = 0, grid_y = 0;
  double colorbar_x = 0, colorbar_top = 0, colorbar_bottom = 0;
  bool any_nan = false;       // draw a key for the grey NaN cells
  bool any_excluded = false;  // and one for the hatched excluded cells
  double row_label_w = 0;
  double tick_label_w = 0;
  int width = 0, height = 0;
};

std::size_t label_step(double pitch, double needed) {
  std::size_t step = 1;
  while (pitch * static_cast<double>(step) < needed) step *= 2;
  return step;
}

/// Lays the figure out for a given cell size.
Layout layout_for_cell(cairo_t* cr, const HeatmapFigure& figure, Layout lay, int cell) {
  lay.cell = cell;
  const double c = cell;
  const double matrix_w = c * static_cast<double>(lay.cols);
  const double matrix_h = c * static_cast<double>(lay.rows);
  const double tick_h = line_height(cr, kTickLabelSize);
  const double axis_h = line_height(cr, kAxisTitleSize);
  lay.row_label_w = max_width(cr, lay.row_labels, kTickLabelSize, false);
  const double col_w = max_width(cr, lay.col_labels, kTickLabelSize, false);

  // Column labels: flat if they fit their cell, else at 45 degrees if their lines do not touch,
  // else upright, thinned out when even upright lines would touch.
  lay.row_step = label_step(c, tick_h);
  double below = 0;  // how far the column labels reach below their anchor
  double reach = 0;  // how far left of the first column's centre they reach
  const double s45 = std::sqrt(0.5);
  if (col_w + 4 <= c) {
    lay.col_angle = 0;
    lay.col_step = 1;
    lay.col_label_offset = kTickLength + kTickPad;
    below = tick_h;
    reach = col_w / 2;
  } else if (c * s45 >= tick_h) {
    lay.col_angle = 45;
    lay.col_step = 1;
    lay.col_label_offset = kTickLength + kTickPad + tick_h / 2 * s45;
    below = (col_w + tick_h / 2) * s45;
    reach = below;
  } else {
    lay.col_angle = 90;
    lay.col_step = label_step(c, tick_h);
    lay.col_label_offset = kTickLength + kTickPad;
    below = col_w;
    reach = tick_h / 2;
  }
  lay.x_title_offset = lay.col_label_offset + below + kGap;

  // A slot: titles may be wider than a small matrix, so they may widen it.
  const double title_w = max_width(cr, {figure.col_axis}, kAxisTitleSize, false);
  double panel_title_w = 0;
  for (const auto& p : figure.panels)
    panel_title_w = std::max(panel_title_w, text_width(cr, p.title, kPanelTitleSize, true));
  const double overhang = std::max(0.0, (std::max(title_w, panel_title_w) - matrix_w) / 2);
  const double y_labels = kTickLength + kTickPad + lay.row_label_w + kGap + axis_h;
  lay.matrix_left = std::ceil(std::max({y_labels, reach - c / 2, overhang}));
  lay.matrix_top = std::ceil(line_height(cr, kPanelTitleSize, true) + kGap);
  lay.slot_w = lay.matrix_left + matrix_w + std::ceil(std::max(kPanelGap, overhang + kGap));
  lay.slot_h = lay.matrix_top + matrix_h + std::ceil(lay.x_title_offset + axis_h) + kPanelGap;

  // The colour bar spans the matrices of all grid rows.
  const double grid_w = lay.slot_w * static_cast<double>(figure.grid_cols);
  const double grid_h = lay.slot_h * static_cast<double>(figure.grid_rows) - kPanelGap;
  lay.tick_label_w = max_width(cr, lay.tick_labels, kTickLabelSize, false);
  const double colorbar_area =
      kColorbarWidth + kTickLength + kTickPad + lay.tick_label_w + kGap + axis_h;
  const double content_w = grid_w + colorbar_area;
  const double figure_title_w =
      figure.title.empty() ? 0 : text_width(cr, figure.title, kFigureTitleSize, true);
  const double width = std::max(content_w, figure_title_w) + 2 * kMargin;

  lay.grid_x = std::round(kMargin + (width - 2 * kMargin - content_w) / 2);
  lay.grid_y =
      kMargin +
      (figure.title.empty() ? 0 : std::ceil(line_height(cr, kFigureTitleSize, true) + kGap));
  lay.colorbar_x = lay.grid_x + grid_w;
  lay.colorbar_top = lay.grid_y + lay.matrix_top;
  const double span = lay.slot_h * static_cast<double>(figure.grid_rows - 1) + matrix_h;
  const double label_w = text_width(cr, figure.colorbar_label, kAxisTitleSize);
  lay.colorbar_bottom = lay.colorbar_top + std::max({span, kMinColorbarHeight, std::ceil(label_w)});
  const double keys = (lay.any_nan ? 1 : 0) + (lay.any_excluded ? 1 : 0);
  const double keys_h = keys * (kGap + kTickLabelSize + kNanKeySide);
  const double key_w =
      kNanKeySide + kTickPad + 2 +
      (lay.any_excluded ? text_width(cr, figure.excluded_label, kTickLabelSize) : 0);
  lay.width = static_cast<int>(std::ceil(std::max(width, lay.colorbar_x + key_w + kMargin)));
  lay.height = static_cast<int>(
      std::ceil(std::max(lay.grid_y + grid_h, lay.colorbar_bottom + keys_h) + kMargin));
  return lay;
}

/// Chooses the cell size: about kPanelSide per matrix, smaller when the image would get too big.
Layout make_layout(cairo_t* cr, const HeatmapFigure& figure) {
  Layout lay;
  lay.rows = figure.panels.front().values.shape(0);
  lay.cols = figure.panels.front().values.shape(1);
  lay.row_labels = labels_or_indices(figure.row_labels, lay.rows);
  lay.col_labels = labels_or_indices(figure.col_labels, lay.cols);
  const double step = (static_cast<double>(figure.vmax) - figure.vmin) / (kColorbarTicks - 1);
  for (int i = 0; i < kColorbarTicks; ++i) lay.tick_values.push_back(figure.vmin + i * step);
  lay.tick_labels = format_ticks(lay.tick_values, step);
  for (const auto& p : figure.panels) {
    lay.any_nan = lay.any_nan || std::any_of(p.values.begin(), p.values.end(),
                                             [](float v) { return std::isnan(v); });
    lay.any_excluded = lay.any_excluded ||
                       std::any_of(p.excluded.begin(), p.excluded.end(), [](bool e) { return e; });
  }

  const int longest = static_cast<int>(std::max(lay.rows, lay.cols));
  int cell = std::clamp(kPanelSide / longest, 1, kMaxCell);
  Layout out = layout_for_cell(cr, figure, lay, cell);
  // Labels depend on the cell size, so shrink and lay out again until the image fits.
  while (cell > 1 && std::max(out.width, out.height) > kMaxImageSide) {
    const double over_w =
        (out.width - kMaxImageSide) / static_cast<double>(figure.grid_cols * lay.cols);
    const double over_h =
        (out.height - kMaxImageSide) / static_cast<double>(figure.grid_rows * lay.rows);
    const int shrink = std::max(1, static_cast<int>(std::ceil(std::max(over_w, over_h))));
    cell = std::max(1, cell - shrink);
    out = layout_for_cell(cr, figure, lay, cell);
  }
  return out;
}

// --- Drawing ------------------------------------------------------------------------------------

// An excluded cell (or its key): grey with white diagonal hatching.
void draw_hatched(cairo_t* cr, double x, double y, double side) {
  cairo_set_source_rgb(cr, kExcludedGrey.r, kExcludedGrey.g, kExcludedGrey.b);
  cairo_rectangle(cr, x, y, side, side);
  cairo_fill(cr);
  cairo_save(cr);
  cairo_rectangle(cr, x, y, side, side);
  cairo_clip(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_set_line_width(cr, std::max(1.0, side / 12));
  const double pitch = std::max(4.0, side / 4);
  for (double d = -side; d < side; d += pitch) draw_line(cr, x + d, y + side, x + d + side, y);
  cairo_stroke(cr);
  cairo_restore(cr);
}

void draw_panel(cairo_t* cr, const HeatmapFigure& figure, const HeatmapPanel& panel,
                const Layout& lay, double slot_x, double slot_y) {
  const double c = lay.cell;
  const double x0 = slot_x + lay.matrix_left;
  const double y0 = slot_y + lay.matrix_top;
  const double w = c * static_cast<double>(lay.cols);
  const double h = c * static_cast<double>(lay.rows);

  const bool has_excluded = panel.excluded.size() != 0;
  const bool annotate = figure.annotate && lay.cell >= kMinAnnotatedCell;
  for (std::size_t i = 0; i < lay.rows; ++i) {
    for (std::size_t j = 0; j < lay.cols; ++j) {
      const double x = x0 + c * static_cast<double>(j), y = y0 + c * static_cast<double>(i);
      if (has_excluded && panel.excluded(i, j)) {
        draw_hatched(cr, x, y, c);
        continue;
      }
      const float value = panel.values(i, j);
      const Rgb rgb = value_colour(value, figure);
      cairo_set_source_rgb(cr, rgb.r, rgb.g, rgb.b);
      cairo_rectangle(cr, x, y, c, c);
      cairo_fill(cr);
      if (annotate && !std::isnan(value)) {
        // Dark text on the light end of viridis, white on the dark end.
        const double t = (static_cast<double>(value) - figure.vmin) / (figure.vmax - figure.vmin);
        const double shade = t > 0.6 ? 0.0 : 1.0;
        char text[16];
        std::snprintf(text, sizeof text, "%.3f", static_cast<double>(value));
        draw_text(cr, text, x + c / 2, y + c / 2, kTickLabelSize, HAlign::center, VAlign::middle, 0,
                  false, {shade, shade, shade});
      }
    }
  }

  // Frame and ticks, just outside the matrix so they never cover a cell.
  cairo_set_source_rgb(cr, kFrame.r, kFrame.g, kFrame.b);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0 - 0.5, y0 - 0.5, w + 1, h + 1);
  for (std::size_t i = 0; i < lay.rows; i += lay.row_step) {
    const double y = crisp(y0 + c * (static_cast<double>(i) + 0.5));
    draw_line(cr, x0 - 1, y, x0 - 1 - kTickLength, y);
  }
  for (std::size_t j = 0; j < lay.cols; j += lay.col_step) {
    const double x = crisp(x0 + c * (static_cast<double>(j) + 0.5));
    draw_line(cr, x, y0 + h + 1, x, y0 + h + 1 + kTickLength);
  }
  cairo_stroke(cr);

  for (std::size_t i = 0; i < lay.rows; i += lay.row_step) {
    const double y = y0 + c * (static_cast<double>(i) + 0.5);
    draw_text(cr, lay.row_labels[i], x0 - kTickLength - kTickPad, y, kTickLabelSize, HAlign::right,
              VAlign::middle);
  }
  const double label_y = y0 + h + lay.col_label_offset;
  for (std::size_t j = 0; j < lay.cols; j += lay.col_step) {
    const double x = x0 + c * (static_cast<double>(j) + 0.5);
    if (lay.col_angle == 0)
      draw_text(cr, lay.col_labels[j], x, label_y, kTickLabelSize, HAlign::center, VAlign::top);
    else
      draw_text(cr, lay.col_labels[j], x, label_y, kTickLabelSize, HAlign::right, VAlign::middle,
                lay.col_angle);
  }

  draw_text(cr, panel.title, x0 + w / 2, slot_y, kPanelTitleSize, HAlign::center, VAlign::top, 0,
            true);
  draw_text(cr, figure.col_axis, x0 + w / 2, y0 + h + lay.x_title_offset, kAxisTitleSize,
            HAlign::center, VAlign::top);
  const double y_title_x =
      x0 - kTickLength - kTickPad - lay.row_label_w - kGap - line_height(cr, kAxisTitleSize) / 2;
  draw_text(cr, figure.row_axis, y_title_x, y0 + h / 2, kAxisTitleSize, HAlign::center,
            VAlign::middle, 90);
}

void draw_colorbar(cairo_t* cr, const HeatmapFigure& figure, const Layout& lay) {
  const double x = lay.colorbar_x;
  const double top = lay.colorbar_top;
  const double bottom = lay.colorbar_bottom;
  const double h = bottom - top;

  // One 1-pixel strip per image row, coloured by the value at its centre: vmax at the top.
  for (int row = 0; row < static_cast<int>(h); ++row) {
    const Rgb rgb = viridis(1.0 - (row + 0.5) / h);
    cairo_set_source_rgb(cr, rgb.r, rgb.g, rgb.b);
    cairo_rectangle(cr, x, top + row, kColorbarWidth, 1);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, kFrame.r, kFrame.g, kFrame.b);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x - 0.5, top - 0.5, kColorbarWidth + 1, h + 1);
  const double right = x + kColorbarWidth + 1;
  for (int i = 0; i < kColorbarTicks; ++i) {
    // Inside the bar's first and last pixel rows, where vmax and vmin are drawn.
    const double y =
        std::clamp(crisp(bottom - h * i / (kColorbarTicks - 1)), top + 0.5, bottom - 0.5);
    draw_line(cr, right, y, right + kTickLength, y);
  }
  cairo_stroke(cr);
  for (int i = 0; i < kColorbarTicks; ++i) {
    const double y = bottom - h * i / (kColorbarTicks - 1);
    draw_text(cr, lay.tick_labels[static_cast<std::size_t>(i)], right + kTickLength + kTickPad, y,
              kTickLabelSize, HAlign::left, VAlign::middle);
  }
  const double label_x = right + kTickLength + kTickPad + lay.tick_label_w + kGap +
                         line_height(cr, kAxisTitleSize) / 2;
  draw_text(cr, figure.colorbar_label, label_x, (top + bottom) / 2, kAxisTitleSize, HAlign::center,
            VAlign::middle, 90);

  // A key for grey NaN cells and one for hatched excluded cells, only when there are some.
  const double side = kNanKeySide;
  double y = bottom + kGap + kTickLabelSize;
  if (lay.any_nan) {
    cairo_set_source_rgb(cr, kNanGrey.r, kNanGrey.g, kNanGrey.b);
    cairo_rectangle(cr, x, y, side, side);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, kFrame.r, kFrame.g, kFrame.b);
    cairo_stroke(cr);
    draw_text(cr, "NaN", x + side + kTickPad + 2, y + side / 2, kTickLabelSize, HAlign::left,
              VAlign::middle);
    y += kGap + kTickLabelSize + side;
  }
  if (lay.any_excluded) {
    draw_hatched(cr, x, y, side);
    cairo_set_source_rgb(cr, kFrame.r, kFrame.g, kFrame.b);
    cairo_rectangle(cr, x - 0.5, y - 0.5, side + 1, side + 1);
    cairo_stroke(cr);
    draw_text(cr, figure.excluded_label, x + side + kTickPad + 2, y + side / 2, kTickLabelSize,
              HAlign::left, VAlign::middle);
  }
}

}  // namespace

void render_heatmaps(const std::filesystem::path& png, const HeatmapFigure& figure) {
  validate(figure);

  // Text must be measured before the image size is known, so measure on a 1 x 1 scratch canvas.
  Layout lay;
  {
    const Canvas scratch(1, 1);
    lay = make_layout(scratch.cr(), figure);
  }

  const Canvas canvas(lay.width, lay.height);
  cairo_t* cr = canvas.cr();
  for (std::size_t p = 0; p < figure.panels.size(); ++p) {
    const double slot_x = lay.grid_x + lay.slot_w * static_cast<double>(p % figure.grid_cols);
    const double slot_y = lay.grid_y + lay.slot_h * static_cast<double>(p / figure.grid_cols);
    draw_panel(cr, figure, figure.panels[p], lay, slot_x, slot_y);
  }
  draw_colorbar(cr, figure, lay);
  if (!figure.title.empty())
    draw_text(cr, figure.title, lay.width / 2.0, kMargin, kFigureTitleSize, HAlign::center,
              VAlign::top, 0, true);
  canvas.write_png(png, "render_heatmaps");
}

}  // namespace workbench
