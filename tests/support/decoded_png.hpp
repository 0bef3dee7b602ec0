#pragma once
// Reading back the PNGs the workbench draws: decode with cairo and look at pixels.
#include <cairo.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace minimodel::testing {

struct Rgb8 {
  int r, g, b;
};

/// A PNG decoded by cairo, with pixel access.
class DecodedPng {
 public:
  explicit DecodedPng(const std::filesystem::path& path)
      : surface_(cairo_image_surface_create_from_png(path.c_str()), cairo_surface_destroy) {}
  cairo_status_t status() const { return cairo_surface_status(surface_.get()); }
  int width() const { return cairo_image_surface_get_width(surface_.get()); }
  int height() const { return cairo_image_surface_get_height(surface_.get()); }
  Rgb8 at(int x, int y) const {
    cairo_surface_flush(surface_.get());
    const unsigned char* row = cairo_image_surface_get_data(surface_.get()) +
                               y * cairo_image_surface_get_stride(surface_.get());
    // RGB24 and ARGB32 pixels are native-endian 32-bit words 0xAARRGGBB.
    const auto p = reinterpret_cast<const std::uint32_t*>(row)[x];
    return {static_cast<int>((p >> 16) & 0xff), static_cast<int>((p >> 8) & 0xff),
            static_cast<int>(p & 0xff)};
  }

 private:
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface_;
};

/// Whether every channel of `c` is within `tolerance` of `want`.
inline bool near(Rgb8 c, Rgb8 want, int tolerance = 12) {
  return std::abs(c.r - want.r) <= tolerance && std::abs(c.g - want.g) <= tolerance &&
         std::abs(c.b - want.b) <= tolerance;
}

/// "(r, g, b)", for failure messages.
inline std::string describe(Rgb8 c) {
  return "(" + std::to_string(c.r) + ", " + std::to_string(c.g) + ", " + std::to_string(c.b) + ")";
}

}  // namespace minimodel::testing
