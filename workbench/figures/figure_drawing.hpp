#pragma once
// What the figures (heatmap.cpp, line_plot.cpp, bar_chart.cpp) share so that they look alike: one
// font and its sizes, text placement, round tick values and their labels, the series colours and
// legend of the plots, and a white canvas that is written as PNG atomically. Internal to the
// figures library.
#include <cairo.h>

#include <cstddef>
#include <filesystem>
#include <functional>
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
constexpr double kTickPad = 3;        // between a tick and its label
constexpr double kGap = 8;            // between a block of labels and the next thing
constexpr double kSingleWidth = 800;  // a figure of one plot: a line plot, a bar chart
constexpr double kPlotHeight = 360;   // the plot area of a plot, inside the frame
constexpr double kPi = 3.14159265358979323846;

struct Rgb {
  double r, g, b;
};
constexpr Rgb kText{0.10, 0.10, 0.10};
constexpr Rgb kFrame{0.25, 0.25, 0.25};
constexpr Rgb kGrid{0.88, 0.88, 0.88};

void set_source(cairo_t* cr, Rgb rgb);

/// A rectangle in pixels.
struct Box {
  double left = 0, top = 0, width = 0, height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
  /// Whether (x, y) lies inside the box grown by `clearance` on every side.
  bool contains(double x, double y, double clearance) const {
    return x >= left - clearance && x <= right() + clearance && y >= top - clearance &&
           y <= bottom() + clearance;
  }
  /// Whether `other` comes within `clearance` of the box.
  bool overlaps(const Box& other, double clearance) const {
    return other.left <= right() + clearance && other.right() >= left - clearance &&
           other.top <= bottom() + clearance && other.bottom() >= top - clearance;
  }
};

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

/// The frame around a plot area, with ticks pointing out of it at the pixel positions
/// `x_ticks` (below it) and `y_ticks` (left of it).
void draw_frame(cairo_t* cr, const Box& area, const std::vector<double>& x_ticks,
                const std::vector<double>& y_ticks);

// --- Numbers ------------------------------------------------------------------------------------

/// Shortest form of a number for a message: 1, 0.5, 1e-08.
std::string number(double v);

/// `v` with `decimals` decimals, never "-0.00".
std::string fixed(double v, int decimals);

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

// --- Series and legends -------------------------------------------------------------------------

/// matplotlib's tab10 (the default colour cycle), reused from the 11th series on.
Rgb series_colour(std::size_t i);

/// "series 1", or "series 1 (\"pre-LN\")" when it has a label, for messages.
std::string series_name(const std::string& label, std::size_t i);

/// "y[3] = 0", for messages.
std::string value_at(const std::string& name, std::size_t j, double v);

constexpr double kLegendPad = 8;        // inside the legend box
constexpr double kLegendInset = 10;     // between the legend box and the frame
constexpr double kLegendSample = 26;    // width of the sample drawn before a label
constexpr double kLegendRowGap = 4;     // between rows
constexpr double kLegendClearance = 4;  // data closer than this to the legend box counts as hidden
constexpr Rgb kLegendEdge{0.80, 0.80, 0.80};

/// One row per label: a sample of the series kLegendSample wide, then the label; in a white box
/// with a light edge.
struct Legend {
  std::vector<std::string> labels;  // none: no legend
  Box box;                          // sized by make_legend, placed by place_legend
};

Legend make_legend(cairo_t* cr, std::vector<std::string> labels);

/// Puts the legend inside the first corner of the plot `area` where `hides_data(box)` is false
/// (top right, top left, bottom right, bottom left), else to the right of the area. Returns the
/// width it needs right of the area: 0 inside or without labels.
double place_legend(Legend& legend, const Box& area,
                    const std::function<bool(const Box&)>& hides_data);

/// Draws the legend; `draw_sample(row, x, y)` draws the sample of a row from x, centred on y.
void draw_legend(cairo_t* cr, const Legend& legend,
                 const std::function<void(std::size_t row, double x, double y)>& draw_sample);

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
