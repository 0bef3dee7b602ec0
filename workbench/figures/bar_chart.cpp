// Grouped bar charts drawn with cairo's toy text API and written as PNG by cairo itself; the look,
// the series colours and the legend are shared with the line plots (figure_drawing.hpp).
//
// Layout: top to bottom, the title, the plot area (kPlotHeight high), the category labels and the
// x-axis title. Left to right: the y-axis title, y tick labels, the plot area, and the legend when
// it would hide a bar or a value in every corner inside.
//
// The categories split the plot area into equal slots. A slot holds its group of bars, kGroupFill
// of its width, one bar per series side by side, each from the baseline (0, or the nearer end of
// the axis when 0 is outside it) to its value.
#include "figures/bar_chart.hpp"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
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
constexpr double kGroupFill = 0.8;           // of a category's slot, taken by its bars
constexpr double kValueLabelSize = 11;       // the value written above a bar
constexpr double kValuePad = 3;              // between a bar's end and its value
constexpr double kCategoryLabelPad = 4;      // least space between two flat category labels
constexpr double kLongestTurnedLabel = 160;  // longer turned category labels are abbreviated
constexpr double kLegendSwatchHeight = 10;

// --- Validation ---------------------------------------------------------------------------------

void validate(const BarChart& chart) {
  const std::string where = "render_bar_chart: ";
  if (chart.categories.empty()) throw std::invalid_argument(where + "no categories to draw");
  if (chart.series.empty()) throw std::invalid_argument(where + "no series to draw");
  const std::size_t n = chart.categories.size();
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const BarSeries& s = chart.series[i];
    const std::string name = series_name(s.label, i);
    if (s.values.size() != n)
      throw std::invalid_argument(where + name + " has " + std::to_string(s.values.size()) +
                                  " values but there are " + std::to_string(n) + " categories");
    for (std::size_t j = 0; j < n; ++j)
      if (!std::isfinite(s.values[j]))
        throw std::invalid_argument(where + name + " has " + value_at("values", j, s.values[j]) +
                                    " (category \"" + chart.categories[j] +
                                    "\"); every value must be finite");
  }
  if (!std::isfinite(chart.y_min))
    throw std::invalid_argument(where + "y_min = " + number(chart.y_min) + " is not finite");
  if (chart.y_max && !std::isfinite(*chart.y_max))
    throw std::invalid_argument(where + "y_max = " + number(*chart.y_max) + " is not finite");
  if (chart.y_max && *chart.y_max <= chart.y_min)
    throw std::invalid_argument(where + "y_max = " + number(*chart.y_max) +
                                " is not above y_min = " + number(chart.y_min));
}

// --- The y axis ---------------------------------------------------------------------------------

struct YAxis {
  double lo = 0, hi = 1;
  double baseline = 0;  // where the bars start
  std::vector<double> ticks;
  std::vector<std::string> labels;
  int value_decimals = 2;  // of the values written above the bars
};

/// From y_min (lowered to a round number below the smallest value if that is below it) to y_max
/// or a round number above the largest value. An end that is chosen here leaves `room` pixels
/// beyond the longest bar that points at it, for its value.
YAxis make_y_axis(const BarChart& chart, double room) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  bool whole = true;
  for (const BarSeries& s : chart.series)
    for (double v : s.values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      whole = whole && std::floor(v) == v;
    }

  const bool auto_bottom = lo < chart.y_min;
  const bool auto_top = !chart.y_max;
  const double bottom_end = std::min(lo, chart.y_min);
  const double top_end = auto_top ? std::max(hi, chart.y_min) : *chart.y_max;
  // Bars point down only from 0, and up from 0 or from the bottom of the axis above it.
  const bool room_bottom = auto_bottom && lo < 0;
  const bool room_top = auto_top && hi > std::max(0.0, bottom_end);
  // `room` as a fraction f of the final range S: S = span + f S at each end that needs it.
  const double f = room / kPlotHeight;
  const double ends = (room_bottom ? 1 : 0) + (room_top ? 1 : 0);
  const double span = (top_end - bottom_end) / (1 - ends * f);
  const double bottom_target = bottom_end - (room_bottom ? f * span : 0);
  double top_target = top_end + (room_top ? f * span : 0);
  if (top_target <= bottom_target) top_target = bottom_target + 1;  // every value on y_min

  YAxis axis;
  const double step = nice_ticks(bottom_target, top_target, false).step;
  // The tolerance keeps an end that is a round number up to rounding.
  axis.lo = auto_bottom ? std::floor(bottom_target / step + 1e-9) * step : chart.y_min;
  axis.hi = auto_top ? std::ceil(top_target / step - 1e-9) * step : *chart.y_max;
  axis.baseline = std::clamp(0.0, axis.lo, axis.hi);
  const Ticks ticks = nice_ticks(axis.lo, axis.hi, false);
  axis.ticks = ticks.values;
  axis.labels = format_ticks(ticks.values, ticks.step);
  // Three significant digits of the axis range: 0.93 on an axis of 1, 12.5 on one of 50.
  axis.value_decimals =
      whole ? 0 : std::max(0, 2 - static_cast<int>(std::floor(std::log10(axis.hi - axis.lo))));
  return axis;
}

// --- Layout -------------------------------------------------------------------------------------

struct Bar {
  std::size_t series = 0;
  Box box;  // clipped to the plot area
  std::string value;
  Box value_box;  // where the value goes, when `labelled`
  bool labelled = false;
};

struct Layout {
  int width = 0, height = 0;
  bool title = false;
  YAxis y;
  Box area;
  double y_tick_w = 0;  // of the longest y tick label
  double slot = 0;      // width of a category's slot
  std::vector<Bar> bars;
  std::vector<std::string> categories;      // the labels as drawn, abbreviated if need be
  double category_angle = 0;                // 0, 45 or 90 degrees
  std::size_t category_step = 1;            // every category is labelled, or every 2nd, 4th, ...
  double category_offset = 0;               // area bottom to the anchor of the category labels
  double x_title_offset = 0;                // area bottom to the top of the x-axis title
  std::vector<std::size_t> legend_entries;  // series with a label, in order
  Legend legend;                            // of their labels

  double y_at(double v) const { return area.bottom() - (v - y.lo) / (y.hi - y.lo) * area.height; }
  double category_x(std::size_t i) const {
    return area.left + slot * (static_cast<double>(i) + 0.5);
  }
};

/// `text` at most `most` pixels wide: its middle replaced with an ellipsis if it is wider, so
/// that "config 10" and "config 11" stay apart. Cuts between UTF-8 characters.
std::string abbreviate(cairo_t* cr, const std::string& text, double most) {
  if (text_width(cr, text, kTickLabelSize) <= most) return text;
  std::vector<std::string> chars;
  for (const char c : text) {
    const bool continuation = (static_cast<unsigned char>(c) & 0xC0) == 0x80;
    if (continuation && !chars.empty())
      chars.back() += c;
    else
      chars.emplace_back(1, c);
  }
  std::size_t head = (chars.size() + 1) / 2, tail = chars.size() / 2;
  std::string out;
  do {
    if (head > tail)
      --head;
    else
      --tail;
    out.clear();
    for (std::size_t i = 0; i < head; ++i) out += chars[i];
    out += "\u2026";
    for (std::size_t i = chars.size() - tail; i < chars.size(); ++i) out += chars[i];
  } while (head + tail > 0 && text_width(cr, out, kTickLabelSize) > most);
  return out;
}

/// Flat if the widest label fits its slot, else at 45 degrees if the turned lines do not touch,
/// else upright, thinned out when even upright lines would touch. Returns how far the labels reach
/// below and left of their anchors.
std::pair<double, double> place_category_labels(cairo_t* cr, const BarChart& chart, Layout& lay) {
  const double tick_h = line_height(cr, kTickLabelSize);
  const double s45 = std::sqrt(0.5);
  lay.categories = chart.categories;
  lay.category_step = 1;
  lay.category_offset = 1 + kTickLength + kTickPad;
  double widest = max_width(cr, lay.categories, kTickLabelSize);
  if (widest + kCategoryLabelPad <= lay.slot) {
    lay.category_angle = 0;
    return {tick_h, widest / 2};
  }
  for (std::string& label : lay.categories) label = abbreviate(cr, label, kLongestTurnedLabel);
  widest = max_width(cr, lay.categories, kTickLabelSize);
  if (lay.slot * s45 >= tick_h) {
    lay.category_angle = 45;
    lay.category_offset += tick_h / 2 * s45;
    const double reach = (widest + tick_h / 2) * s45;
    return {reach, reach};
  }
  lay.category_angle = 90;
  while (lay.slot * static_cast<double>(lay.category_step) < tick_h) lay.category_step *= 2;
  return {widest, tick_h / 2};
}

/// The bars and their values, for the plot area and y axis of `lay`. Values are written only if
/// every one fits above its bar's width, and each only where it stays inside the plot area.
void place_bars(cairo_t* cr, const BarChart& chart, Layout& lay) {
  const double value_h = line_height(cr, kValueLabelSize);
  const auto n_series = static_cast<double>(chart.series.size());
  const double group_w = kGroupFill * lay.slot;
  const double bar_w = group_w / n_series;
  double widest_value = 0;
  lay.bars.clear();
  for (std::size_t c = 0; c < chart.categories.size(); ++c) {
    const double group_left = lay.category_x(c) - group_w / 2;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const double v = chart.series[s].values[c];
      Bar bar;
      bar.series = s;
      // Whole pixels, so that neighbouring bars meet without a seam.
      const double left = std::round(group_left + bar_w * static_cast<double>(s));
      const double right = std::round(group_left + bar_w * static_cast<double>(s + 1));
      const double clipped = std::clamp(v, lay.y.lo, lay.y.hi);
      const double y_value = std::round(lay.y_at(clipped));
      const double y_base = std::round(lay.y_at(lay.y.baseline));
      bar.box = {left, std::min(y_value, y_base), right - left, std::abs(y_value - y_base)};
      bar.value = fixed(v, lay.y.value_decimals);
      const double w = text_width(cr, bar.value, kValueLabelSize);
      widest_value = std::max(widest_value, w);
      const bool down = v < lay.y.baseline;
      const double top = down ? bar.box.bottom() + kValuePad : bar.box.top - kValuePad - value_h;
      bar.value_box = {(left + right - w) / 2, top, w, value_h};
      bar.labelled = v == clipped && bar.value_box.top >= lay.area.top &&
                     bar.value_box.bottom() <= lay.area.bottom();
      lay.bars.push_back(bar);
    }
  }
  if (widest_value + 2 > std::round(bar_w))
    for (Bar& bar : lay.bars) bar.labelled = false;
}

bool hides_bars(const Layout& lay, const Box& legend) {
  return std::any_of(lay.bars.begin(), lay.bars.end(), [&](const Bar& bar) {
    return legend.overlaps(bar.box, kLegendClearance) ||
           (bar.labelled && legend.overlaps(bar.value_box, kLegendClearance));
  });
}

Layout make_layout(cairo_t* cr, const BarChart& chart) {
  Layout lay;
  lay.title = !chart.title.empty();
  const double axis_h = line_height(cr, kAxisTitleSize);
  lay.y = make_y_axis(chart, line_height(cr, kValueLabelSize) + 2 * kValuePad);
  lay.y_tick_w = max_width(cr, lay.y.labels, kTickLabelSize);

  double top = kMargin;
  if (lay.title) top += std::ceil(line_height(cr, kFigureTitleSize, true) + kGap);
  const double y_title = chart.y_label.empty() ? 0 : axis_h + kGap;
  double left = std::ceil(kMargin + y_title + lay.y_tick_w + kTickPad + kTickLength);
  const auto n = static_cast<double>(chart.categories.size());
  double below = 0;
  // Labels turned 45 degrees reach left of the first slot; make room, which narrows the slots.
  for (int pass = 0; pass < 3; ++pass) {
    lay.area = {left, top, std::floor(kSingleWidth - kMargin) - left, kPlotHeight};
    lay.slot = lay.area.width / n;
    double reach = 0;
    std::tie(below, reach) = place_category_labels(cr, chart, lay);
    const double needed = std::ceil(kMargin + reach - lay.slot / 2);
    if (needed <= left) break;
    left = needed;
  }
  lay.x_title_offset = lay.category_offset + below + kGap;
  const double x_title = chart.x_label.empty() ? 0 : kGap + axis_h;
  lay.height = static_cast<int>(
      std::ceil(top + kPlotHeight + lay.category_offset + below + x_title + kMargin));

  place_bars(cr, chart, lay);
  std::vector<std::string> labels;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    if (chart.series[s].label.empty()) continue;
    lay.legend_entries.push_back(s);
    labels.push_back(chart.series[s].label);
  }
  lay.legend = make_legend(cr, std::move(labels));
  const double legend_w =
      place_legend(lay.legend, lay.area, [&](const Box& box) { return hides_bars(lay, box); });
  const double content_w = kSingleWidth + legend_w;
  const double title_w =
      lay.title ? std::ceil(text_width(cr, chart.title, kFigureTitleSize, true)) : 0;
  lay.width = static_cast<int>(std::ceil(std::max(content_w, title_w + 2 * kMargin)));
  // Centre the content under a wider title.
  const double shift = std::round((lay.width - content_w) / 2);
  lay.area.left += shift;
  lay.legend.box.left += shift;
  for (Bar& bar : lay.bars) {
    bar.box.left += shift;
    bar.value_box.left += shift;
  }
  return lay;
}

// --- Drawing ------------------------------------------------------------------------------------

void draw_grid(cairo_t* cr, const Layout& lay) {
  const Box& a = lay.area;
  set_source(cr, kGrid);
  cairo_set_line_width(cr, 1);
  for (double v : lay.y.ticks)
    draw_line(cr, a.left, crisp(lay.y_at(v)), a.right(), crisp(lay.y_at(v)));
  cairo_stroke(cr);
}

void draw_bars(cairo_t* cr, const Layout& lay) {
  for (const Bar& bar : lay.bars) {
    set_source(cr, series_colour(bar.series));
    cairo_rectangle(cr, bar.box.left, bar.box.top, bar.box.width, bar.box.height);
    cairo_fill(cr);
  }
  // The baseline, where bars point both ways from it.
  const Box& a = lay.area;
  if (lay.y.baseline > lay.y.lo && lay.y.baseline < lay.y.hi) {
    set_source(cr, kFrame);
    cairo_set_line_width(cr, 1);
    const double y = crisp(lay.y_at(lay.y.baseline));
    draw_line(cr, a.left, y, a.right(), y);
    cairo_stroke(cr);
  }
  for (const Bar& bar : lay.bars)
    if (bar.labelled)
      draw_text(cr, bar.value, bar.value_box.left + bar.value_box.width / 2, bar.value_box.top,
                kValueLabelSize, HAlign::center, VAlign::top);
}

void draw_axes(cairo_t* cr, const Layout& lay, const BarChart& chart) {
  const Box& a = lay.area;
  std::vector<double> x_ticks, y_ticks;
  for (std::size_t i = 0; i < lay.categories.size(); i += lay.category_step)
    x_ticks.push_back(lay.category_x(i));
  for (const double v : lay.y.ticks) y_ticks.push_back(lay.y_at(v));
  draw_frame(cr, a, x_ticks, y_ticks);

  const double label_y = a.bottom() + lay.category_offset;
  for (std::size_t i = 0; i < lay.categories.size(); i += lay.category_step) {
    if (lay.category_angle == 0)
      draw_text(cr, lay.categories[i], lay.category_x(i), label_y, kTickLabelSize, HAlign::center,
                VAlign::top);
    else
      draw_text(cr, lay.categories[i], lay.category_x(i), label_y, kTickLabelSize, HAlign::right,
                VAlign::middle, lay.category_angle);
  }
  for (std::size_t i = 0; i < lay.y.ticks.size(); ++i)
    draw_text(cr, lay.y.labels[i], a.left - 1 - kTickLength - kTickPad, lay.y_at(lay.y.ticks[i]),
              kTickLabelSize, HAlign::right, VAlign::middle);

  draw_text(cr, chart.x_label, a.left + a.width / 2, a.bottom() + lay.x_title_offset,
            kAxisTitleSize, HAlign::center, VAlign::top);
  const double y_title_x = a.left - 1 - kTickLength - kTickPad - lay.y_tick_w - kGap -
                           line_height(cr, kAxisTitleSize) / 2;
  draw_text(cr, chart.y_label, y_title_x, a.top + a.height / 2, kAxisTitleSize, HAlign::center,
            VAlign::middle, 90);
}

}  // namespace

void render_bar_chart(const std::filesystem::path& png, const BarChart& chart) {
  validate(chart);
  Layout lay;
  {
    const Canvas scratch(1, 1);  // text must be measured before the image size is known
    lay = make_layout(scratch.cr(), chart);
  }
  const Canvas canvas(lay.width, lay.height);
  cairo_t* cr = canvas.cr();
  draw_grid(cr, lay);
  cairo_save(cr);
  cairo_rectangle(cr, lay.area.left, lay.area.top, lay.area.width, lay.area.height);
  cairo_clip(cr);
  draw_bars(cr, lay);
  cairo_restore(cr);
  draw_axes(cr, lay, chart);
  draw_legend(cr, lay.legend, [&](std::size_t row, double x, double y) {
    set_source(cr, series_colour(lay.legend_entries[row]));
    cairo_rectangle(cr, x, std::round(y - kLegendSwatchHeight / 2), kLegendSample,
                    kLegendSwatchHeight);
    cairo_fill(cr);
  });
  if (lay.title)
    draw_text(cr, chart.title, lay.width / 2.0, kMargin, kFigureTitleSize, HAlign::center,
              VAlign::top, 0, true);
  canvas.write_png(png, "render_bar_chart");
}

}  // namespace workbench
