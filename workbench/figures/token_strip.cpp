#include "figures/token_strip.hpp"

#include <algorithm>
#include <stdexcept>

#include "figures/figure_drawing.hpp"

namespace workbench {

using namespace drawing;

void render_token_strip(const std::filesystem::path& png, const TokenStrip& strip) {
  if (strip.tokens.empty()) throw std::invalid_argument("render_token_strip: no tokens");
  constexpr double kWidth = 1000, kTokenSize = 16, kLabelSize = 10, kPad = 4, kRowGap = 10;
  const Rgb fills[2] = {{0.80, 0.88, 0.97}, {0.99, 0.86, 0.70}};

  // Lay the boxes out on a scratch canvas, which measures the text, then draw on one that fits.
  const auto layout = [&](cairo_t* cr, bool draw) {
    double y = kMargin;
    if (draw)
      draw_text(cr, strip.title, kWidth / 2, y, kFigureTitleSize, HAlign::center, VAlign::top, 0,
                true);
    y += line_height(cr, kFigureTitleSize, true) + kGap / 2;
    if (draw)
      draw_text(cr, strip.caption, kWidth / 2, y, kTickLabelSize, HAlign::center, VAlign::top);
    y += line_height(cr, kTickLabelSize) + kGap * 2;
    const double token_h = line_height(cr, kTokenSize) + 2 * kPad;
    const double row_h = token_h + line_height(cr, kLabelSize) + kRowGap;
    double x = kMargin;
    for (std::size_t i = 0; i < strip.tokens.size(); ++i) {
      const StripToken& token = strip.tokens[i];
      const double w = std::max(text_width(cr, token.text, kTokenSize),
                                text_width(cr, token.label, kLabelSize)) +
                       2 * kPad;
      if (x + w > kWidth - kMargin && x > kMargin) {
        x = kMargin;
        y += row_h;
      }
      if (draw) {
        set_source(cr, fills[i % 2]);
        cairo_rectangle(cr, x, y, w - 2, token_h);
        cairo_fill(cr);
        draw_text(cr, token.text, x + (w - 2) / 2, y + kPad, kTokenSize, HAlign::center,
                  VAlign::top);
        draw_text(cr, token.label, x + (w - 2) / 2, y + token_h + 2, kLabelSize, HAlign::center,
                  VAlign::top, 0, false, kFrame);
      }
      x += w;
    }
    return y + row_h + kMargin;
  };
  const Canvas scratch{1, 1};
  const double height = layout(scratch.cr(), false);
  const Canvas canvas{static_cast<int>(kWidth), static_cast<int>(height)};
  layout(canvas.cr(), true);
  canvas.write_png(png, "render_token_strip");
}

}  // namespace workbench
