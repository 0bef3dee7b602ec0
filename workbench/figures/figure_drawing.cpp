#include "figure_drawing.hpp"

#include "util/files.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <system_error>

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

// --- Numbers ------------------------------------------------------------------------------------

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
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
  char buf[64];
  for (double t : ticks) {
    const bool zero = std::abs(t) < 0.5 * std::pow(10.0, -decimals);  // no "-0.00"
    std::snprintf(buf, sizeof buf, "%.*f", decimals, zero ? 0.0 : t);
    out.emplace_back(buf);
  }
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
