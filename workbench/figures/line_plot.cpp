// Line plots drawn with cairo's toy text API and written as PNG by cairo itself; the font, text
// and tick helpers are shared with the heatmaps (figure_drawing.hpp).
//
// Layout: one row of slots, one per plot, 800 px wide for a single plot and 560 px each side by
// side. Top to bottom: the figure title, the panel titles, the plot areas (all kPlotHeight
// high), x tick labels and the x-axis title. Left to right in a slot: the y-axis title, y tick
// labels, the plot area, and the legend when it would cover data in every corner inside.
//
// An axis works in units: the value itself, or its log10 on a log axis. A value is mapped to
// pixels through its fraction of the axis range, which is the data range plus kDataMargin on each
// side.
#include "figures/line_plot.hpp"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "figure_drawing.hpp"

namespace workbench {
namespace {

using namespace drawing;  // the shared look and helpers of figure_drawing.hpp

// --- Layout constants, in pixels (the shared ones are in figure_drawing.hpp) -------------------
constexpr double kSideBySideWidth = 560;  // each plot of several
constexpr double kDataMargin = 0.05;      // of the data range, on each side of each axis
constexpr double kLineWidth = 2;
constexpr double kMarkerRadius = 3.5;
constexpr double kMarkerSpacing = 8;  // markers only when points are this far apart on average
constexpr int kMostLogTicks = 8;

constexpr Rgb kMinorGrid{0.93, 0.93, 0.93};

// --- Validation ---------------------------------------------------------------------------------

/// `where` starts every message: "render_line_plot: " or "render_line_plots: plot 1 (...): ".
void validate(const LinePlot& plot, const std::string& where) {
  if (plot.series.empty()) throw std::invalid_argument(where + "no series to draw");
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const LineSeries& s = plot.series[i];
    const std::string name = series_name(s.label, i);
    if (s.x.empty() && s.y.empty())
      throw std::invalid_argument(where + name + " is empty; a series needs at least one point");
    if (s.x.size() != s.y.size())
      throw std::invalid_argument(where + name + " has " + std::to_string(s.x.size()) +
                                  " x values but " + std::to_string(s.y.size()) + " y values");
    for (std::size_t j = 0; j < s.x.size(); ++j) {
      for (const auto& [axis, v, log] :
           {std::tuple{"x", s.x[j], plot.log_x}, std::tuple{"y", s.y[j], plot.log_y}}) {
        if (!std::isfinite(v))
          throw std::invalid_argument(where + name + " has " + value_at(axis, j, v) +
                                      "; every value must be finite");
        if (log && v <= 0)
          throw std::invalid_argument(where + "log_" + axis + " needs every " + axis +
                                      " > 0, but " + name + " has " + value_at(axis, j, v));
      }
    }
  }
}

// --- Axes ---------------------------------------------------------------------------------------

/// One axis: its range and ticks in units (the value, or its log10 on a log axis).
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  std::vector<double> ticks;  // labelled, with a grid line
  std::vector<std::string> labels;
  std::vector<double> minor_ticks;  // decade ticks: 2..9 times a power of ten, a fainter grid line

  double unit(double v) const { return log ? std::log10(v) : v; }
  double fraction(double u) const { return (u - lo) / (hi - lo); }  // of the range, for a unit
};

/// [lo, hi] widened by kDataMargin on each side; a single value gets a range around it.
std::pair<double, double> padded(double lo, double hi, double least_pad) {
  if (hi - lo <= 1e-9 * std::max({1.0, std::abs(lo), std::abs(hi)})) {
    const double pad = std::max(0.1 * std::abs(lo), least_pad);
    lo -= pad;
    hi += pad;
  }
  const double margin = kDataMargin * (hi - lo);
  return {lo - margin, hi + margin};
}

/// Round ticks; with `integers` (every value a whole number, e.g. layers) also whole-number ticks.
Axis linear_axis(double lo, double hi, bool integers) {
  Axis axis;
  std::tie(axis.lo, axis.hi) = padded(lo, hi, 1);
  const drawing::Ticks ticks = drawing::nice_ticks(axis.lo, axis.hi, integers);
  axis.ticks = ticks.values;
  axis.labels = drawing::format_ticks(ticks.values, ticks.step);
  return axis;
}

/// The first and last k whose power base^k lies inside the range of a log axis, `step` =
/// log10(base) units apart; the tolerance keeps a power that sits on an end up to rounding.
std::pair<double, double> powers_inside(const Axis& axis, double step) {
  return {std::ceil(axis.lo / step - 1e-9), std::floor(axis.hi / step + 1e-9)};
}

/// Grows the range of a log axis to the nearer of the next powers of `base` until it holds two,
/// so that there are always two labelled ticks to read the scale from.
void grow_to_two_powers(Axis& axis, double base) {
  const double step = std::log10(base);
  for (;;) {
    const auto [first, last] = powers_inside(axis, step);
    if (last - first >= 1) return;
    if (axis.lo - (first - 1) * step <= (last + 1) * step - axis.hi)
      axis.lo = (first - 1) * step;
    else
      axis.hi = (last + 1) * step;
  }
}

/// Labelled ticks at the powers base^k, k >= least, inside the range of a log axis: every power,
/// or every 2nd, 5th, 10th, 20th, ... when there would be more than kMostLogTicks. Each label is
/// `format` applied to the power. Returns the powers between ticks.
double add_power_ticks(Axis& axis, double base, double least, const char* format) {
  const double step = std::log10(base);
  auto [first, last] = powers_inside(axis, step);
  first = std::max(first, least);
  double every = 1;
  for (int i = 0; (last - first) / every + 1 > kMostLogTicks; ++i) every *= i % 3 == 1 ? 2.5 : 2;
  char buf[32];
  for (double k = std::ceil(first / every) * every; k <= last; k += every) {
    axis.ticks.push_back(k * step);
    std::snprintf(buf, sizeof buf, format, std::pow(base, k));
    axis.labels.emplace_back(buf);
  }
  return every;
}

/// Decade ticks labelled 1e-02, 1e-01, ...: every decade, or every 2nd, 5th, 10th, ... when there
/// are many, and a range with fewer than two decades grows to the nearest ones. With `doublings`,
/// a range of data >= 1 with fewer than three decades gets powers of two instead: 128, ..., 16384.
Axis log_axis(double lo, double hi, bool doublings) {
  Axis axis;
  axis.log = true;
  std::tie(axis.lo, axis.hi) = padded(std::log10(lo), std::log10(hi), 0.5);
  // Powers of two rather than 2 and 5 times a decade: the main use, x = T from 128 to 16384, puts
  // its points on them, and each tick doubles x, so y = T^2 visibly climbs 4x a tick. They replace
  // the decade labels, as every decade lies within 0.15 decades of one (1e+03 at 1024).
  const auto [first_decade, last_decade] = powers_inside(axis, 1);
  if (doublings && lo >= 1 && last_decade - first_decade < 2) {
    grow_to_two_powers(axis, 2);
    add_power_ticks(axis, 2, 0, "%.0f");
    return axis;
  }
  grow_to_two_powers(axis, 10);
  if (add_power_ticks(axis, 10, -std::numeric_limits<double>::infinity(), "%.0e") == 1) {
    for (double k = std::floor(axis.lo); k < axis.hi; ++k)
      for (int m = 2; m <= 9; ++m) {
        const double u = k + std::log10(m);
        if (u > axis.lo && u < axis.hi) axis.minor_ticks.push_back(u);
      }
  }
  return axis;
}

/// The values of one axis over all series.
struct DataRange {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool whole = true;  // every value a whole number

  void add(const std::vector<double>& values) {
    for (double v : values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      whole = whole && std::floor(v) == v;
    }
  }
};

/// Whole-number and power-of-two ticks are for x (layers, T); y gets the plain ones.
std::pair<Axis, Axis> make_axes(const LinePlot& plot) {
  DataRange x, y;
  for (const LineSeries& s : plot.series) {
    x.add(s.x);
    y.add(s.y);
  }
  return {plot.log_x ? log_axis(x.lo, x.hi, true) : linear_axis(x.lo, x.hi, x.whole),
          plot.log_y ? log_axis(y.lo, y.hi, false) : linear_axis(y.lo, y.hi, false)};
}

// --- Layout -------------------------------------------------------------------------------------

/// Where one plot goes: its plot area (inside the frame) and its legend.
struct Panel {
  Axis x, y;
  Box area;
  std::vector<std::size_t> legend_entries;  // series with a label, in order
  Legend legend;                            // of their labels
  double y_tick_w = 0;                      // of the longest y tick label

  // Pixel coordinates of a unit on each axis, and of a value.
  double x_at(double u) const { return area.left + x.fraction(u) * area.width; }
  double y_at(double u) const { return area.bottom() - y.fraction(u) * area.height; }
  double px(double v) const { return x_at(x.unit(v)); }
  double py(double v) const { return y_at(y.unit(v)); }
};

struct Layout {
  std::vector<Panel> panels;
  bool figure_title = false;
  int width = 0, height = 0;
};

/// True if a point, a marker or a line of `plot` comes within kLegendClearance of `box`. Each
/// segment is walked in steps of at most 1 px.
bool covers_data(const Panel& panel, const LinePlot& plot, const Box& box) {
  const double clearance = kLegendClearance + kMarkerRadius;
  for (const LineSeries& s : plot.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      const double x1 = panel.px(s.x[i]), y1 = panel.py(s.y[i]);
      if (box.contains(x1, y1, clearance)) return true;
      if (i == 0) continue;
      const double x0 = panel.px(s.x[i - 1]), y0 = panel.py(s.y[i - 1]);
      const int steps = static_cast<int>(std::ceil(std::hypot(x1 - x0, y1 - y0)));
      for (int k = 1; k < steps; ++k) {
        const double t = static_cast<double>(k) / steps;
        if (box.contains(x0 + t * (x1 - x0), y0 + t * (y1 - y0), kLegendClearance + kLineWidth))
          return true;
      }
    }
  }
  return false;
}

/// The plot areas of all panels have the same size; a legend outside widens its panel's slot.
Layout make_layout(cairo_t* cr, const std::string& figure_title, const std::vector<LinePlot>& plots,
                   bool panel_titles) {
  Layout lay;
  lay.figure_title = !figure_title.empty();
  const double tick_h = line_height(cr, kTickLabelSize);
  const double axis_h = line_height(cr, kAxisTitleSize);

  // Widest of the slot width and the panel titles, so that no title runs into its neighbour.
  double slot_w = plots.size() == 1 ? kSingleWidth : kSideBySideWidth;
  bool any_panel_title = false, any_x_label = false;
  for (const LinePlot& p : plots) {
    if (panel_titles && !p.title.empty()) {
      any_panel_title = true;
      slot_w =
          std::max(slot_w, std::ceil(text_width(cr, p.title, kPanelTitleSize, true)) + 2 * kMargin);
    }
    any_x_label = any_x_label || !p.x_label.empty();
  }

  double top = kMargin;
  if (lay.figure_title) top += std::ceil(line_height(cr, kFigureTitleSize, true) + kGap);
  if (any_panel_title) top += std::ceil(line_height(cr, kPanelTitleSize, true) + kGap);
  const double below = kTickLength + kTickPad + tick_h + (any_x_label ? kGap + axis_h : 0);
  lay.height = static_cast<int>(std::ceil(top + kPlotHeight + below + kMargin));

  // Each panel in its own slot, from x = 0; moved into place below.
  std::vector<double> slot_widths;
  for (const LinePlot& plot : plots) {
    Panel panel;
    std::tie(panel.x, panel.y) = make_axes(plot);
    panel.y_tick_w = max_width(cr, panel.y.labels, kTickLabelSize);
    const double y_title = plot.y_label.empty() ? 0 : axis_h + kGap;
    const double left = std::ceil(kMargin + y_title + panel.y_tick_w + kTickPad + kTickLength);
    panel.area = {left, top, std::floor(slot_w - kMargin) - left, kPlotHeight};

    std::vector<std::string> labels;
    for (std::size_t s = 0; s < plot.series.size(); ++s) {
      if (plot.series[s].label.empty()) continue;
      panel.legend_entries.push_back(s);
      labels.push_back(plot.series[s].label);
    }
    panel.legend = make_legend(cr, std::move(labels));
    slot_widths.push_back(slot_w + place_legend(panel.legend, panel.area, [&](const Box& box) {
                            return covers_data(panel, plot, box);
                          }));
    lay.panels.push_back(panel);
  }

  double content_w = 0;
  for (double w : slot_widths) content_w += w;
  const double title_w =
      lay.figure_title ? std::ceil(text_width(cr, figure_title, kFigureTitleSize, true)) : 0;
  lay.width = static_cast<int>(std::ceil(std::max(content_w, title_w + 2 * kMargin)));
  double slot_x = std::round((lay.width - content_w) / 2);
  for (std::size_t i = 0; i < plots.size(); ++i) {
    lay.panels[i].area.left += slot_x;
    lay.panels[i].legend.box.left += slot_x;
    slot_x += slot_widths[i];
  }
  return lay;
}

// --- Drawing ------------------------------------------------------------------------------------

/// Adds grid lines across the plot area at units `xs` of the x axis and `ys` of the y axis.
void add_grid_lines(cairo_t* cr, const Panel& p, const std::vector<double>& xs,
                    const std::vector<double>& ys) {
  const Box& a = p.area;
  for (double u : xs) draw_line(cr, crisp(p.x_at(u)), a.top, crisp(p.x_at(u)), a.bottom());
  for (double u : ys) draw_line(cr, a.left, crisp(p.y_at(u)), a.right(), crisp(p.y_at(u)));
}

void draw_grid(cairo_t* cr, const Panel& p) {
  cairo_set_line_width(cr, 1);
  set_source(cr, kMinorGrid);
  add_grid_lines(cr, p, p.x.minor_ticks, p.y.minor_ticks);
  cairo_stroke(cr);
  set_source(cr, kGrid);
  add_grid_lines(cr, p, p.x.ticks, p.y.ticks);
  cairo_stroke(cr);
}

/// Markers tell the points apart; on a dense series they would merge into a thick line.
bool has_markers(const Panel& p, const LineSeries& s) {
  return static_cast<double>(s.x.size()) * kMarkerSpacing <= p.area.width;
}

void draw_series(cairo_t* cr, const Panel& p, const LineSeries& s, Rgb colour) {
  set_source(cr, colour);
  cairo_set_line_width(cr, kLineWidth);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    if (i == 0)
      cairo_move_to(cr, p.px(s.x[i]), p.py(s.y[i]));
    else
      cairo_line_to(cr, p.px(s.x[i]), p.py(s.y[i]));
  }
  cairo_stroke(cr);
  if (!has_markers(p, s) && s.x.size() > 1) return;
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, p.px(s.x[i]), p.py(s.y[i]), kMarkerRadius, 0, 2 * drawing::kPi);
  }
  cairo_fill(cr);
}

void draw_axes(cairo_t* cr, const Panel& p, const LinePlot& plot) {
  const Box& a = p.area;
  std::vector<double> x_ticks, y_ticks;
  for (const double u : p.x.ticks) x_ticks.push_back(p.x_at(u));
  for (const double u : p.y.ticks) y_ticks.push_back(p.y_at(u));
  draw_frame(cr, a, x_ticks, y_ticks);

  const double x_labels_y = a.bottom() + 1 + kTickLength + kTickPad;
  for (std::size_t i = 0; i < p.x.ticks.size(); ++i)
    draw_text(cr, p.x.labels[i], p.x_at(p.x.ticks[i]), x_labels_y, kTickLabelSize, HAlign::center,
              VAlign::top);
  for (std::size_t i = 0; i < p.y.ticks.size(); ++i)
    draw_text(cr, p.y.labels[i], a.left - 1 - kTickLength - kTickPad, p.y_at(p.y.ticks[i]),
              kTickLabelSize, HAlign::right, VAlign::middle);

  const double centre_x = a.left + a.width / 2;
  draw_text(cr, plot.x_label, centre_x, x_labels_y + line_height(cr, kTickLabelSize) + kGap,
            kAxisTitleSize, HAlign::center, VAlign::top);
  const double y_title_x =
      a.left - 1 - kTickLength - kTickPad - p.y_tick_w - kGap - line_height(cr, kAxisTitleSize) / 2;
  draw_text(cr, plot.y_label, y_title_x, a.top + a.height / 2, kAxisTitleSize, HAlign::center,
            VAlign::middle, 90);
}

void draw_legend(cairo_t* cr, const Panel& p, const LinePlot& plot) {
  drawing::draw_legend(cr, p.legend, [&](std::size_t row, double x, double y) {
    const LineSeries& s = plot.series[p.legend_entries[row]];
    set_source(cr, series_colour(p.legend_entries[row]));
    cairo_set_line_width(cr, kLineWidth);
    draw_line(cr, x, y, x + kLegendSample, y);
    cairo_stroke(cr);
    if (has_markers(p, s)) {
      cairo_arc(cr, x + kLegendSample / 2, y, kMarkerRadius, 0, 2 * drawing::kPi);
      cairo_fill(cr);
    }
  });
}

void draw_panel(cairo_t* cr, const Panel& p, const LinePlot& plot, bool panel_title) {
  draw_grid(cr, p);
  cairo_save(cr);
  cairo_rectangle(cr, p.area.left, p.area.top, p.area.width, p.area.height);
  cairo_clip(cr);
  for (std::size_t s = 0; s < plot.series.size(); ++s)
    draw_series(cr, p, plot.series[s], series_colour(s));
  cairo_restore(cr);
  draw_axes(cr, p, plot);
  draw_legend(cr, p, plot);
  if (panel_title)
    draw_text(cr, plot.title, p.area.left + p.area.width / 2,
              p.area.top - kGap - line_height(cr, kPanelTitleSize, true), kPanelTitleSize,
              HAlign::center, VAlign::top, 0, true);
}

/// A single plot's title is the figure title; side by side, each plot's title is its panel's.
void render(const std::filesystem::path& png, const std::string& figure_title,
            const std::vector<LinePlot>& plots, bool panel_titles, const std::string& who) {
  Layout lay;
  {
    const Canvas scratch(1, 1);  // text must be measured before the image size is known
    lay = make_layout(scratch.cr(), figure_title, plots, panel_titles);
  }
  const Canvas canvas(lay.width, lay.height);
  cairo_t* cr = canvas.cr();
  for (std::size_t i = 0; i < plots.size(); ++i)
    draw_panel(cr, lay.panels[i], plots[i], panel_titles && !plots[i].title.empty());
  if (lay.figure_title)
    draw_text(cr, figure_title, lay.width / 2.0, kMargin, kFigureTitleSize, HAlign::center,
              VAlign::top, 0, true);
  canvas.write_png(png, who);
}

}  // namespace

void render_line_plot(const std::filesystem::path& png, const LinePlot& plot) {
  validate(plot, "render_line_plot: ");
  render(png, plot.title, {plot}, false, "render_line_plot");
}

void render_line_plots(const std::filesystem::path& png, const std::string& title,
                       const std::vector<LinePlot>& plots) {
  if (plots.empty()) throw std::invalid_argument("render_line_plots: no plots to draw");
  for (std::size_t i = 0; i < plots.size(); ++i) {
    std::string where = "render_line_plots: plot " + std::to_string(i);
    if (!plots[i].title.empty()) where += " (\"" + plots[i].title + "\")";
    validate(plots[i], where + ": ");
  }
  render(png, title, plots, true, "render_line_plots");
}

}  // namespace workbench
