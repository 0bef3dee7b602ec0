// Tests of the line plots: PNGs that decode, sizes, series colours, legend placement, log axes,
// atomic writes and the validation messages. Pixels are found by colour, not by the layout code.
#include "figures/line_plot.hpp"
#include "support/decoded_png.hpp"
#include "support/temp_dir.hpp"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using minimodel::testing::DecodedPng;
using minimodel::testing::describe;
using minimodel::testing::near;
using minimodel::testing::Rgb8;
using minimodel::testing::TempDir;
using workbench::render_line_plot;
using workbench::render_line_plots;

namespace {

constexpr Rgb8 kWhite{255, 255, 255};
constexpr Rgb8 kBlue{0x1f, 0x77, 0xb4};    // tab10, series 0
constexpr Rgb8 kOrange{0xff, 0x7f, 0x0e};  // tab10, series 1
constexpr Rgb8 kFrameGrey{64, 64, 64};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Longest horizontal run of pixels near `colour`, over all rows.
int longest_row_run(const DecodedPng& img, Rgb8 colour) {
  int longest = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0, run = 0; x < img.width(); ++x) {
      run = near(img.at(x, y), colour) ? run + 1 : 0;
      longest = std::max(longest, run);
    }
  return longest;
}

/// The columns with a long vertical frame-grey run: the left and right edges of the plot frames.
std::vector<int> frame_columns(const DecodedPng& img) {
  std::vector<int> columns;
  for (int x = 0; x < img.width(); ++x)
    for (int y = 0, run = 0; y < img.height(); ++y) {
      run = near(img.at(x, y), kFrameGrey, 8) ? run + 1 : 0;
      if (run > 200) {
        columns.push_back(x);
        break;
      }
    }
  return columns;
}

/// The right edge of the plot frame: the right-most column with a long vertical frame-grey run.
int frame_right(const DecodedPng& img) {
  const std::vector<int> columns = frame_columns(img);
  return columns.empty() ? -1 : columns.back();
}

/// The bottom edge of the plot frame: the lowest row with a long horizontal frame-grey run.
int frame_bottom(const DecodedPng& img) {
  int bottom = -1;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0, run = 0; x < img.width(); ++x) {
      run = near(img.at(x, y), kFrameGrey, 8) ? run + 1 : 0;
      if (run > 200) bottom = y;
    }
  return bottom;
}

/// The columns of the x tick marks: frame grey, 2 px below the frame, between its edges.
std::vector<int> x_tick_columns(const DecodedPng& img, int left, int right) {
  std::vector<int> ticks;
  const int y = frame_bottom(img) + 2;
  for (int x = left + 1; x < right; ++x)
    if (near(img.at(x, y), kFrameGrey, 8)) ticks.push_back(x);
  return ticks;
}

/// The first and last columns holding a pixel near `colour`; {-1, -1} if there is none.
std::pair<int, int> column_span(const DecodedPng& img, Rgb8 colour) {
  std::pair<int, int> span{-1, -1};
  for (int x = 0; x < img.width(); ++x)
    for (int y = 0; y < img.height(); ++y)
      if (near(img.at(x, y), colour)) {
        if (span.first < 0) span.first = x;
        span.second = x;
        break;
      }
  return span;
}

int count_near(const DecodedPng& img, Rgb8 colour, int x_from) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = x_from; x < img.width(); ++x) n += near(img.at(x, y), colour) ? 1 : 0;
  return n;
}

std::vector<double> integers(int from, int to) {
  std::vector<double> out;
  for (int i = from; i <= to; ++i) out.push_back(i);
  return out;
}

/// The residual-stream figure of the brief: post-LN flat near 8, pre-LN growing from 8 to 30.
workbench::LinePlot norm_plot() {
  workbench::LinePlot plot;
  plot.title = "Residual stream norm through 8 blocks";
  plot.x_label = "layer";
  plot.y_label = "mean ||x||";
  const std::vector<double> layers = integers(0, 8);
  std::vector<double> post, pre;
  for (double l : layers) {
    post.push_back(8.0 + 0.05 * std::sin(l));
    pre.push_back(8.0 * std::pow(30.0 / 8.0, l / 8.0));
  }
  plot.series = {{layers, post, "post-LN"}, {layers, pre, "pre-LN"}};
  return plot;
}

workbench::LinePlot offset_plot(const std::string& title) {
  workbench::LinePlot plot;
  plot.title = title;
  plot.x_label = "offset";
  plot.y_label = "score";
  const std::vector<double> offsets = integers(-16, 16);
  std::vector<double> score;
  for (double o : offsets) score.push_back(std::cos(o / 5.0));
  plot.series = {{offsets, score, "cos(offset / 5)"}};
  return plot;
}

/// Runs `render` and expects std::invalid_argument whose message contains every one of `words`.
void expect_invalid(const std::function<void()>& render, const fs::path& png,
                    std::initializer_list<const char*> words) {
  try {
    render();
    ADD_FAILURE() << "an invalid plot was accepted";
  } catch (const std::invalid_argument& e) {
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "message \"" << e.what() << "\" does not mention \"" << w << "\"";
  }
  EXPECT_FALSE(fs::exists(png)) << "an invalid plot left a file behind";
}

void expect_invalid(const workbench::LinePlot& plot, const fs::path& png,
                    std::initializer_list<const char*> words) {
  expect_invalid([&] { render_line_plot(png, plot); }, png, words);
}

/// Draws a flat series at `xs` on a log x axis and checks its x ticks: `count` of them, evenly
/// spaced (powers of a base on a log axis), the end ones on the end markers, and as far from the
/// frame on the left as on the right (the axis is the data range plus a margin, not grown).
void expect_even_log_x_ticks_on_the_data(const fs::path& png, const std::vector<double>& xs,
                                         std::size_t count) {
  SCOPED_TRACE(png.filename().string());
  workbench::LinePlot plot;
  plot.series = {{xs, std::vector<double>(xs.size(), 1.0), ""}};
  plot.log_x = true;
  render_line_plot(png, plot);
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  const std::vector<int> frame = frame_columns(img);
  ASSERT_EQ(frame.size(), 2u) << "no plot frame found";
  const std::vector<int> ticks = x_tick_columns(img, frame.front(), frame.back());
  ASSERT_EQ(ticks.size(), count);
  for (std::size_t i = 2; i < ticks.size(); ++i)
    EXPECT_NEAR(ticks[i] - ticks[i - 1], ticks[1] - ticks[0], 1) << "gap before tick " << i;
  const auto [left, right] = column_span(img, kBlue);
  EXPECT_NEAR(ticks.front(), left + 3.5, 2.5) << "the first tick is not on the first marker";
  EXPECT_NEAR(ticks.back(), right - 3.5, 2.5) << "the last tick is not on the last marker";
  EXPECT_NEAR(left - frame.front(), frame.back() - right, 2) << "the axis is not the data range";
}

/// For each image column, the mean row of the pixels near `colour`; NaN where there are none.
std::vector<double> mean_rows(const DecodedPng& img, Rgb8 colour) {
  std::vector<double> out(static_cast<std::size_t>(img.width()),
                          std::numeric_limits<double>::quiet_NaN());
  for (int x = 0; x < img.width(); ++x) {
    double sum = 0;
    int n = 0;
    for (int y = 0; y < img.height(); ++y)
      if (near(img.at(x, y), colour, 6)) {
        sum += y;
        ++n;
      }
    if (n > 0) out[static_cast<std::size_t>(x)] = sum / n;
  }
  return out;
}

/// Largest distance, in pixels, of the per-column rows from their least-squares straight line.
double max_distance_from_straight_line(const std::vector<double>& rows) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t x = 0; x < rows.size(); ++x) {
    if (std::isnan(rows[x])) continue;
    const double xd = static_cast<double>(x);
    n += 1;
    sx += xd;
    sy += rows[x];
    sxx += xd * xd;
    sxy += xd * rows[x];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / n;
  double worst = 0;
  for (std::size_t x = 0; x < rows.size(); ++x)
    if (!std::isnan(rows[x]))
      worst = std::max(worst, std::abs(rows[x] - (intercept + slope * static_cast<double>(x))));
  return worst;
}

}  // namespace

// --- Size and look ------------------------------------------------------------------------------

TEST(LinePlot, OnePlotIsAPngThatCairoDecodesOfAboutEightHundredByFiveHundred) {
  const TempDir dir("line_plot_test");
  const fs::path png = dir / "norm.png";
  render_line_plot(png, norm_plot());
  ASSERT_TRUE(fs::exists(png));
  EXPECT_EQ(read_file(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS) << cairo_status_to_string(img.status());
  EXPECT_NEAR(img.width(), 800, 40);
  EXPECT_NEAR(img.height(), 500, 60);
}

TEST(LinePlot, SideBySidePlotsAreWiderThanOnePlotAndAboutAsTall) {
  const TempDir dir("line_plot_test");
  render_line_plot(dir / "one.png", offset_plot("score vs offset"));
  render_line_plots(dir / "two.png", "Scores by relative offset",
                    {offset_plot("head 0"), offset_plot("head 1")});
  const DecodedPng one(dir / "one.png");
  const DecodedPng two(dir / "two.png");
  ASSERT_EQ(two.status(), CAIRO_STATUS_SUCCESS) << cairo_status_to_string(two.status());
  EXPECT_GT(two.width(), one.width());
  EXPECT_NEAR(two.width(), 2 * 560, 80) << "about 560 px per plot";
  EXPECT_NEAR(two.height(), one.height(), 60);
}

TEST(LinePlot, BackgroundIsWhite) {
  const TempDir dir("line_plot_test");
  const fs::path png = dir / "norm.png";
  render_line_plot(png, norm_plot());
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  for (const auto& [x, y] : {std::pair{1, 1}, std::pair{img.width() - 2, img.height() - 2}})
    EXPECT_TRUE(near(img.at(x, y), kWhite, 0)) << describe(img.at(x, y));
}

TEST(LinePlot, EachSeriesIsDrawnInItsOwnTab10Colour) {
  // Flat series make long horizontal runs of their colour; unlabelled, so there is no legend.
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  const std::vector<double> x = integers(0, 8);
  plot.series = {{x, std::vector<double>(9, 1.0), ""}, {x, std::vector<double>(9, 2.0), ""}};
  const fs::path png = dir / "flat.png";
  render_line_plot(png, plot);
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_GT(longest_row_run(img, kBlue), 400) << "series 0 is not a long tab10-blue line";
  EXPECT_GT(longest_row_run(img, kOrange), 400) << "series 1 is not a long tab10-orange line";
}

TEST(LinePlot, LegendListsTheLabelsInsideTheTopRightWhenDataLeavesRoom) {
  // Falling lines leave the top right free. Only the legend differs between the two images.
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  const std::vector<double> layers = integers(0, 8);
  std::vector<double> high, low;
  for (double v : layers) {
    high.push_back(10 - v);
    low.push_back(8 - v);
  }
  plot.series = {{layers, high, ""}, {layers, low, ""}};
  render_line_plot(dir / "plain.png", plot);
  plot.series[0].label = "upper";
  plot.series[1].label = "lower";
  render_line_plot(dir / "legend.png", plot);
  const DecodedPng plain(dir / "plain.png");
  const DecodedPng legend(dir / "legend.png");
  ASSERT_EQ(plain.width(), legend.width());
  ASSERT_EQ(plain.height(), legend.height());

  int changed = 0, outside_top_right = 0, blue = 0, orange = 0, dark = 0;
  for (int y = 0; y < legend.height(); ++y)
    for (int x = 0; x < legend.width(); ++x) {
      const Rgb8 c = legend.at(x, y);
      if (near(c, plain.at(x, y), 0)) continue;
      ++changed;
      if (x < legend.width() / 2 || y > legend.height() / 2) ++outside_top_right;
      blue += near(c, kBlue) ? 1 : 0;
      orange += near(c, kOrange) ? 1 : 0;
      dark += near(c, {26, 26, 26}, 40) ? 1 : 0;
    }
  EXPECT_GT(changed, 200) << "no legend drawn";
  EXPECT_EQ(outside_top_right, 0) << "the legend reaches outside the top-right quarter";
  EXPECT_GT(blue, 20) << "no blue sample line for series 0";
  EXPECT_GT(orange, 20) << "no orange sample line for series 1";
  EXPECT_GT(dark, 20) << "no label text";
}

TEST(LinePlot, LegendMovesOutsideTheRightWhenItWouldCoverDataInEveryCorner) {
  // Two opposite zig-zags between the bottom and the top of the plot reach all four corners.
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  const std::vector<double> x = integers(0, 8);
  std::vector<double> zig, zag;
  for (double v : x) {
    zig.push_back(std::fmod(v, 2.0) == 0 ? 0 : 10);
    zag.push_back(10 - zig.back());
  }
  plot.series = {{x, zig, ""}, {x, zag, ""}};
  render_line_plot(dir / "plain.png", plot);
  plot.series[0].label = "zig";
  plot.series[1].label = "zag";
  render_line_plot(dir / "legend.png", plot);

  const DecodedPng plain(dir / "plain.png");
  const int plain_right = frame_right(plain);
  ASSERT_GT(plain_right, 0) << "no plot frame found";
  EXPECT_EQ(count_near(plain, kBlue, plain_right + 1), 0) << "data outside the frame";

  const DecodedPng legend(dir / "legend.png");
  EXPECT_GT(legend.width(), plain.width()) << "the figure did not grow to hold the legend";
  EXPECT_EQ(legend.height(), plain.height());
  const int legend_right = frame_right(legend);
  EXPECT_EQ(legend_right, plain_right) << "the plot area changed";
  EXPECT_GT(count_near(legend, kBlue, legend_right + 1), 20) << "no blue sample right of the frame";
  EXPECT_GT(count_near(legend, kOrange, legend_right + 1), 20)
      << "no orange sample right of the frame";
}

// --- Log axis -----------------------------------------------------------------------------------

TEST(LinePlot, LogYDrawsAGeometricSeriesAsAStraightLine) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  const std::vector<double> x = integers(0, 6);
  std::vector<double> y;
  for (double v : x) y.push_back(std::pow(10.0, -v));
  plot.series = {{x, y, ""}};
  plot.log_y = true;
  render_line_plot(dir / "log.png", plot);
  plot.log_y = false;
  render_line_plot(dir / "linear.png", plot);

  const DecodedPng log(dir / "log.png");
  ASSERT_EQ(log.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_LT(max_distance_from_straight_line(mean_rows(log, kBlue)), 2.0);
  const DecodedPng linear(dir / "linear.png");
  EXPECT_GT(max_distance_from_straight_line(mean_rows(linear, kBlue)), 20.0)
      << "the check cannot tell a curve from a line";
}

TEST(LinePlot, LogYRendersDataWithinOneDecadeAndConstantData) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot = norm_plot();  // 8 to 30: a single decade tick inside the data
  plot.log_y = true;
  render_line_plot(dir / "one_decade.png", plot);
  EXPECT_EQ(DecodedPng(dir / "one_decade.png").status(), CAIRO_STATUS_SUCCESS);
  plot.series = {{{0, 1, 2}, {0.5, 0.5, 0.5}, "constant"}};
  render_line_plot(dir / "constant.png", plot);
  EXPECT_EQ(DecodedPng(dir / "constant.png").status(), CAIRO_STATUS_SUCCESS);
}

TEST(LinePlot, LogXAndLogYDrawAPowerLawAsAStraightLine) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  std::vector<double> x, y;
  for (double v = 1; v <= 1024; v *= 2) {
    x.push_back(v);
    y.push_back(v * v);
  }
  plot.series = {{x, y, ""}};
  plot.log_x = true;
  plot.log_y = true;
  render_line_plot(dir / "log_log.png", plot);
  plot.log_x = false;
  render_line_plot(dir / "log_y.png", plot);
  plot.log_x = true;
  plot.log_y = false;
  render_line_plot(dir / "log_x.png", plot);

  const DecodedPng log_log(dir / "log_log.png");
  ASSERT_EQ(log_log.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_LT(max_distance_from_straight_line(mean_rows(log_log, kBlue)), 2.0);
  for (const char* one_log : {"log_y.png", "log_x.png"})
    EXPECT_GT(max_distance_from_straight_line(mean_rows(DecodedPng(dir / one_log), kBlue)), 20.0)
        << one_log << ": the check cannot tell a curve from a line";
}

TEST(LinePlot, LogXTicksArePowersOfTwoOnTheDataWhenItSpansFewerThanThreeDecades) {
  // T = 128 ... 16384: 1024 and 1e+03 would be 3 px apart, so powers of two replace the decades.
  const TempDir dir("line_plot_test");
  expect_even_log_x_ticks_on_the_data(dir / "two_decades.png",
                                      {128, 256, 512, 1024, 2048, 4096, 8192, 16384}, 8);
  expect_even_log_x_ticks_on_the_data(dir / "under_a_decade.png", {8, 16, 32, 64}, 4);
}

TEST(LinePlot, LogXTicksAreDecadesWithAMinorGridWhenTheDataSpansFiveDecades) {
  const TempDir dir("line_plot_test");
  const fs::path png = dir / "five_decades.png";
  expect_even_log_x_ticks_on_the_data(png, {1, 10, 100, 1e3, 1e4, 1e5}, 6);
  // 2..9 times each decade: a fainter vertical line, in a row of the plot area clear of the data.
  const DecodedPng img(png);
  const int y = frame_bottom(img) - 10;
  int minor = 0;
  for (int x = 0; x < img.width(); ++x) minor += near(img.at(x, y), {237, 237, 237}, 2) ? 1 : 0;
  EXPECT_GE(minor, 5 * 8) << "fewer minor grid lines than 8 a decade";
}

TEST(LinePlot, ASinglePointIsDrawnAsAMarker) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot;
  plot.series = {{{3}, {7}, "one point"}};
  render_line_plot(dir / "point.png", plot);
  const DecodedPng img(dir / "point.png");
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_GE(longest_row_run(img, kBlue), 5) << "no marker";
}

// --- Files --------------------------------------------------------------------------------------

TEST(LinePlot, LeavesNoTemporaryFileBehindAndCreatesMissingFolders) {
  const TempDir dir("line_plot_test");
  const fs::path folder = dir / "experiments";
  render_line_plot(folder / "a" / "one.png", norm_plot());
  render_line_plots(folder / "a" / "two.png", "two", {offset_plot("a"), offset_plot("b")});
  EXPECT_TRUE(fs::exists(folder / "a" / "one.png"));
  EXPECT_TRUE(fs::exists(folder / "a" / "two.png"));
  EXPECT_FALSE(fs::exists(folder / "a" / "one.png.tmp"));
  EXPECT_FALSE(fs::exists(folder / "a" / "two.png.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(folder / "a"), fs::directory_iterator()), 2);
}

TEST(LinePlot, UnwritablePathThrowsRuntimeErrorNamingIt) {
  const TempDir dir("line_plot_test");
  const fs::path not_a_folder = dir / "file.txt";
  std::ofstream(not_a_folder) << "a regular file";
  const fs::path png = not_a_folder / "plot.png";
  try {
    render_line_plot(png, norm_plot());
    FAIL() << "render_line_plot wrote below a regular file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(png.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(not_a_folder), "a regular file");
}

// --- Validation ---------------------------------------------------------------------------------

TEST(LinePlot, RejectsAPlotWithoutSeries) {
  const TempDir dir("line_plot_test");
  expect_invalid(workbench::LinePlot{}, dir / "plot.png", {"render_line_plot", "no series"});
}

TEST(LinePlot, RejectsAnEmptySeriesNamingIt) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot = norm_plot();
  plot.series[1].x.clear();
  plot.series[1].y.clear();
  expect_invalid(plot, dir / "plot.png", {"series 1", "\"pre-LN\"", "empty"});
}

TEST(LinePlot, RejectsXAndYOfDifferentLengths) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot = norm_plot();
  plot.series[1].y.pop_back();
  expect_invalid(plot, dir / "plot.png", {"series 1", "\"pre-LN\"", "9 x values", "8 y values"});
  plot.series[1].x.clear();
  expect_invalid(plot, dir / "plot.png", {"0 x values", "8 y values"});
}

TEST(LinePlot, RejectsValuesThatAreNotFinite) {
  const TempDir dir("line_plot_test");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  workbench::LinePlot plot = norm_plot();
  plot.series[0].y[3] = nan;
  expect_invalid(plot, dir / "plot.png", {"\"post-LN\"", "y[3] = nan", "finite"});
  plot = norm_plot();
  plot.series[1].x[0] = inf;
  expect_invalid(plot, dir / "plot.png", {"\"pre-LN\"", "x[0] = inf"});
  plot = norm_plot();
  plot.series[1].y[8] = -inf;
  expect_invalid(plot, dir / "plot.png", {"y[8] = -inf"});
}

TEST(LinePlot, RejectsLogYWithAYAtOrBelowZero) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot = norm_plot();
  plot.log_y = true;
  plot.series[1].y[2] = 0;
  expect_invalid(plot, dir / "plot.png", {"log_y", "\"pre-LN\"", "y[2] = 0"});
  plot.series[1].y[2] = -1e-3;
  expect_invalid(plot, dir / "plot.png", {"log_y", "y[2] = -0.001"});
  plot.log_y = false;
  const fs::path png = dir / "linear.png";
  EXPECT_NO_THROW(render_line_plot(png, plot)) << "y <= 0 is fine on a linear axis";
}

TEST(LinePlot, RejectsLogXWithAnXAtOrBelowZeroNamingIt) {
  const TempDir dir("line_plot_test");
  workbench::LinePlot plot = norm_plot();  // layers from 0
  plot.log_x = true;
  expect_invalid(plot, dir / "plot.png", {"log_x", "series 0", "\"post-LN\"", "x[0] = 0"});
  plot.series[0].x[0] = 0.5;
  plot.series[1].x[0] = -2;
  expect_invalid(plot, dir / "plot.png", {"log_x", "series 1", "\"pre-LN\"", "x[0] = -2"});
  plot.log_x = false;
  const fs::path png = dir / "linear.png";
  EXPECT_NO_THROW(render_line_plot(png, plot)) << "x <= 0 is fine on a linear axis";

  std::vector<workbench::LinePlot> plots = {offset_plot("head 0"), offset_plot("head 1")};
  plots[1].log_x = true;  // offsets from -16
  const fs::path side_by_side = dir / "plots.png";
  expect_invalid([&] { render_line_plots(side_by_side, "two", plots); }, side_by_side,
                 {"render_line_plots", "plot 1", "\"head 1\"", "log_x", "x[0] = -16"});
}

TEST(LinePlot, SideBySideRejectsNoPlotsAndNamesTheInvalidPlot) {
  const TempDir dir("line_plot_test");
  const fs::path png = dir / "plots.png";
  expect_invalid([&] { render_line_plots(png, "none", {}); }, png,
                 {"render_line_plots", "no plots"});
  std::vector<workbench::LinePlot> plots = {offset_plot("head 0"), offset_plot("head 1")};
  plots[1].series[0].y[4] = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { render_line_plots(png, "two", plots); }, png,
                 {"render_line_plots", "plot 1", "\"head 1\"", "series 0", "y[4] = nan"});
}
