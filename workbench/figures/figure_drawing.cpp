#include "figure_drawing.hpp"

#include "util/files.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace workbench::drawing {

namespace fs = std::filesystem;

void set_source(cairo_t* cr, Rgb rgb) { cairo_set_source_rgb(cr, rgb.r, rgb.g, rgb.b); }

// --- Text ---------------------------------------------------------------------------------------

void set_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& text, double size, bool bold) {
  set_font(cr, size, bold);
  cairo_text_extents_t te;
  cairo_text_extents(cr, text.c_str(), &te);
  return te.x_advance;
}

double max_width(cairo_t* cr, const std::vector<std::string>& texts, double size, bool bold) {
  double w = 0;
  for (const auto& t : texts) w = std::max(w, text_width(cr, t, size, bold));
  return w;
}

double line_height(cairo_t* cr, double size, bool bold) {
  set_font(cr, size, bold);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  return fe.ascent + fe.descent;
}

void draw_text(cairo_t* cr, const std::string& text, double x, double y, double size, HAlign h,
               VAlign v, double degrees, bool bold, Rgb colour) {
  set_font(cr, size, bold);
  cairo_text_extents_t te;
  cairo_text_extents(cr, text.c_str(), &te);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  const double dx = h == HAlign::left ? 0 : h == HAlign::center ? -te.x_advance / 2 : -te.x_advance;
  const double dy = v == VAlign::top ? fe.ascent : (fe.ascent - fe.descent) / 2;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -degrees * kPi / 180);
  cairo_move_to(cr, dx, dy);
  set_source(cr, colour);
  cairo_show_text(cr, text.c_str());
  cairo_restore(cr);
}

// --- Lines --------------------------------------------------------------------------------------

void draw_line(cairo_t* cr, double x0, double y0, double x1, double y1) {
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
}

double crisp(double v) { return std::floor(v) + 0.5; }

void draw_frame(cairo_t* cr, const Box& area, const std::vector<double>& x_ticks,
                const std::vector<double>& y_ticks) {
  set_source(cr, kFrame);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, area.left - 0.5, area.top - 0.5, area.width + 1, area.height + 1);
  for (const double x : x_ticks)
    draw_line(cr, crisp(x), area.bottom() + 1, crisp(x), area.bottom() + 1 + kTickLength);
  for (const double y : y_ticks)
    draw_line(cr, area.left - 1, crisp(y), area.left - 1 - kTickLength, crisp(y));
  cairo_stroke(cr);
}

// --- Numbers ------------------------------------------------------------------------------------

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string fixed(double v, int decimals) {
  const bool zero = std::abs(v) < 0.5 * std::pow(10.0, -decimals);  // no "-0.00"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, zero ? 0.0 : v);
  return buf;
}

std::vector<std::string> format_ticks(const std::vector<double>& ticks, double step) {
  const int most = std::max(0, 2 - static_cast<int>(std::floor(std::log10(step))));
  int decimals = 0;
  for (; decimals < most; ++decimals) {
    const double unit = std::pow(10.0, -decimals);
    const bool exact = std::all_of(ticks.begin(), ticks.end(), [&](double t) {
      return std::abs(std::round(t / unit) * unit - t) <= 1e-6 * step;
    });
    if (exact) break;
  }
  std::vector<std::string> out;
  for (double t : ticks) out.push_back(fixed(t, decimals));
  return out;
}

Ticks nice_ticks(double lo, double hi, bool integers) {
  constexpr double kMostTicks = 7;
  constexpr std::array<double, 4> kMantissas{1, 2, 2.5, 5};
  // Smallest round step first: 10^exponent <= span / 7 gives at least 7 ticks, so the first step
  // that gives at most 7 gives about 3 to 7 of them.
  int exponent = static_cast<int>(std::floor(std::log10((hi - lo) / kMostTicks)));
  for (;; ++exponent) {
    for (double mantissa : kMantissas) {
      const double step = mantissa * std::pow(10.0, exponent);
      if (integers && (step < 1 || std::floor(step) != step)) continue;
      // The tolerance keeps a tick that sits on lo or hi up to rounding.
      const double first = std::ceil(lo / step - 1e-9);
      const double last = std::floor(hi / step + 1e-9);
      if (last - first + 1 > kMostTicks) continue;
      Ticks ticks;
      ticks.step = step;
      for (double i = first; i <= last; ++i) ticks.values.push_back(i * step);
      return ticks;
    }
  }
}

// --- Series and legends -------------------------------------------------------------------------

Rgb series_colour(std::size_t i) {
  static constexpr std::array<Rgb, 10> kTab10{{
      {0x1f / 255.0, 0x77 / 255.0, 0xb4 / 255.0},  // blue
      {0xff / 255.0, 0x7f / 255.0, 0x0e / 255.0},  // orange
      {0x2c / 255.0, 0xa0 / 255.0, 0x2c / 255.0},  // green
      {0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0},  // red
      {0x94 / 255.0, 0x67 / 255.0, 0xbd / 255.0},  // purple
      {0x8c / 255.0, 0x56 / 255.0, 0x4b / 255.0},  // brown
      {0xe3 / 255.0, 0x77 / 255.0, 0xc2 / 255.0},  // pink
      {0x7f / 255.0, 0x7f / 255.0, 0x7f / 255.0},  // grey
      {0xbc / 255.0, 0xbd / 255.0, 0x22 / 255.0},  // olive
      {0x17 / 255.0, 0xbe / 255.0, 0xcf / 255.0},  // cyan
  }};
  return kTab10[i % kTab10.size()];
}

std::string series_name(const std::string& label, std::size_t i) {
  std::string name = "series " + std::to_string(i);
  if (!label.empty()) name += " (\"" + label + "\")";
  return name;
}

std::string value_at(const std::string& name, std::size_t j, double v) {
  return name + "[" + std::to_string(j) + "] = " + number(v);
}

Legend make_legend(cairo_t* cr, std::vector<std::string> labels) {
  Legend legend;
  legend.labels = std::move(labels);
  if (legend.labels.empty()) return legend;
  const auto rows = static_cast<double>(legend.labels.size());
  legend.box.width = std::ceil(2 * kLegendPad + kLegendSample + kGap +
                               max_width(cr, legend.labels, kTickLabelSize));
  legend.box.height = std::ceil(2 * kLegendPad + rows * line_height(cr, kTickLabelSize) +
                                (rows - 1) * kLegendRowGap);
  return legend;
}

double place_legend(Legend& legend, const Box& area,
                    const std::function<bool(const Box&)>& hides_data) {
  if (legend.labels.empty()) return 0;
  Box& box = legend.box;
  const double right = area.right() - kLegendInset - box.width;
  const double bottom = area.bottom() - kLegendInset - box.height;
  const double left = area.left + kLegendInset;
  const double top = area.top + kLegendInset;
  for (const auto& [x, y] : {std::pair{right, top}, std::pair{left, top}, std::pair{right, bottom},
                             std::pair{left, bottom}}) {
    box.left = x;
    box.top = y;
    if (!hides_data(box)) return 0;
  }
  box.left = area.right() + 2 * kGap;
  box.top = area.top;
  return 2 * kGap + box.width;
}

void draw_legend(cairo_t* cr, const Legend& legend,
                 const std::function<void(std::size_t row, double x, double y)>& draw_sample) {
  if (legend.labels.empty()) return;
  const Box& box = legend.box;
  cairo_rectangle(cr, box.left + 0.5, box.top + 0.5, box.width - 1, box.height - 1);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  set_source(cr, kLegendEdge);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);

  const double row = line_height(cr, kTickLabelSize);
  for (std::size_t r = 0; r < legend.labels.size(); ++r) {
    const double y =
        box.top + kLegendPad + static_cast<double>(r) * (row + kLegendRowGap) + row / 2;
    const double x0 = box.left + kLegendPad;
    draw_sample(r, x0, y);
    draw_text(cr, legend.labels[r], x0 + kLegendSample + kGap, y, kTickLabelSize, HAlign::left,
              VAlign::middle);
  }
}

// --- Canvas -------------------------------------------------------------------------------------

Canvas::Canvas(int width, int height)
    : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)),
      context_(cairo_create(surface_.get())) {
  cairo_set_source_rgb(cr(), 1, 1, 1);
  cairo_paint(cr());
}

void Canvas::write_png(const fs::path& png, const std::string& who) const {
  const cairo_status_t drawn = cairo_status(cr());
  if (drawn != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(who + ": cannot draw " + png.string() + ": " +
                             cairo_status_to_string(drawn));
  std::string bytes;
  const auto append = [](void* closure, const unsigned char* data, unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
  };
  const cairo_status_t encoded = cairo_surface_write_to_png_stream(surface_.get(), append, &bytes);
  if (encoded != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(who + ": cannot encode " + png.string() + ": " +
                             cairo_status_to_string(encoded));
  try {
    write_file_atomically(png, bytes);
  } catch (const std::exception& e) {
    throw std::runtime_error(who + ": " + e.what());
  }
}

}  // namespace workbench::drawing
