#pragma once
// What the figures (heatmap.cpp, line_plot.cpp) share so that they look alike: one font and its
// sizes, text placement, round tick values and their labels, and a white canvas that is written
// as PNG atomically. Internal to the figures library.
#include <cairo.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace workbench::drawing {

// --- Look, in pixels ----------------------------------------------------------------------------
constexpr const char* kFont = "DejaVu Sans";  // through cairo's toy font API
constexpr double kFigureTitleSize = 20;       // bold
constexpr double kPanelTitleSize = 15;        // bold
constexpr double kAxisTitleSize = 14;
constexpr double kTickLabelSize = 13;
constexpr double kMargin = 24;  // around the whole figure
constexpr double kTickLength = 4;
constexpr double kTickPad = 3;  // between a tick and its label
constexpr double kGap = 8;      // between a block of labels and the next thing
constexpr double kPi = 3.14159265358979323846;

struct Rgb {
  double r, g, b;
};
constexpr Rgb kText{0.10, 0.10, 0.10};
constexpr Rgb kFrame{0.25, 0.25, 0.25};

void set_source(cairo_t* cr, Rgb rgb);

// --- Text ---------------------------------------------------------------------------------------

enum class HAlign { left, center, right };
enum class VAlign { top, middle };

void set_font(cairo_t* cr, double size, bool bold = false);

/// Advance width of `text`: how far the next text would start.
double text_width(cairo_t* cr, const std::string& text, double size, bool bold = false);

/// Widest of `texts`; 0 for none.
double max_width(cairo_t* cr, const std::vector<std::string>& texts, double size,
                 bool bold = false);

/// Ascent + descent of the font: one line of text, whatever the characters.
double line_height(cairo_t* cr, double size, bool bold = false);

/// Draws `text` anchored at (x, y), turned counter-clockwise by `degrees` around the anchor.
/// Alignment uses the font's line box, not the ink, so labels share one baseline.
void draw_text(cairo_t* cr, const std::string& text, double x, double y, double size, HAlign h,
               VAlign v, double degrees = 0, bool bold = false, Rgb colour = kText);

// --- Lines --------------------------------------------------------------------------------------

/// Adds a segment to the current path (stroke it afterwards).
void draw_line(cairo_t* cr, double x0, double y0, double x1, double y1);

/// Snaps a coordinate to a pixel centre, so 1-pixel lines are crisp.
double crisp(double v);

// --- Numbers ------------------------------------------------------------------------------------

/// Shortest form of a number for a message: 1, 0.5, 1e-08.
std::string number(double v);

/// Tick values, all with the same number of decimals: the fewest that show every tick exactly
/// (0.00 0.25 0.50 0.75 1.00), but no more than show the step to 3 significant digits.
std::vector<std::string> format_ticks(const std::vector<double>& ticks, double step);

/// Evenly spaced round values: multiples of step.
struct Ticks {
  std::vector<double> values;
  double step = 1;
};

/// About 5 round ticks (at most 7) inside [lo, hi], lo < hi: multiples of 1, 2, 2.5 or 5 times a
/// power of ten. With `integers`, the step is a whole number, so integer data gets integer labels.
Ticks nice_ticks(double lo, double hi, bool integers);

// --- Canvas -------------------------------------------------------------------------------------

/// An RGB24 image painted white, and a cairo context that draws on it.
class Canvas {
 public:
  Canvas(int width, int height);
  cairo_t* cr() const { return context_.get(); }

  /// Writes the image to `png` atomically (workbench::write_file_atomically), so a reader never
  /// sees half a PNG; creates missing folders. `who` starts every message, e.g. "render_heatmaps".
  /// @throws std::runtime_error if drawing failed or the file cannot be written.
  void write_png(const std::filesystem::path& png, const std::string& who) const;

 private:
  struct SurfaceDeleter {
    void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
  };
  struct ContextDeleter {
    void operator()(cairo_t* cr) const { cairo_destroy(cr); }
  };
  std::unique_ptr<cairo_surface_t, SurfaceDeleter> surface_;
  std::unique_ptr<cairo_t, ContextDeleter> context_;
};

}  // namespace workbench::drawing
