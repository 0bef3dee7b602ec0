// Tests of the bar charts: PNGs that decode, sizes, series colours, bar heights, values above the
// bars, legend placement, files and the validation messages. Pixels are found by colour and by the
// plot frame, not by the layout code.
#include "figures/bar_chart.hpp"
#include "figures/measured_legends.hpp"
#include "support/decoded_png.hpp"
#include "support/temp_dir.hpp"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using minimodel::testing::DecodedPng;
using minimodel::testing::near;
using minimodel::testing::Rgb8;
using minimodel::testing::TempDir;
using workbench::BarChart;
using workbench::render_bar_chart;

namespace {

constexpr Rgb8 kBlue{0x1f, 0x77, 0xb4};    // tab10, series 0
constexpr Rgb8 kOrange{0xff, 0x7f, 0x0e};  // tab10, series 1
constexpr Rgb8 kFrameGrey{64, 64, 64};
constexpr Rgb8 kTextGrey{26, 26, 26};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The plot frame, found as the long frame-grey lines; its inside is the plot area.
struct Frame {
  int left = -1, right = -1, top = -1, bottom = -1;  // the frame lines
  int inner_width() const { return right - left - 1; }
  int inner_height() const { return bottom - top - 1; }
  /// The centre column of category `i` of `n`, which share the inside equally.
  double category_centre(int i, int n) const { return left + 1 + inner_width() * (i + 0.5) / n; }
  double slot(int n) const { return static_cast<double>(inner_width()) / n; }
};

Frame find_frame(const DecodedPng& img) {
  Frame f;
  for (int x = 0; x < img.width(); ++x)
    for (int y = 0, run = 0; y < img.height(); ++y) {
      run = near(img.at(x, y), kFrameGrey, 8) ? run + 1 : 0;
      if (run > 200) {
        if (f.left < 0) f.left = x;
        f.right = x;
        break;
      }
    }
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0, run = 0; x < img.width(); ++x) {
      run = near(img.at(x, y), kFrameGrey, 8) ? run + 1 : 0;
      if (run > 200) {
        if (f.top < 0) f.top = y;
        f.bottom = y;
        break;
      }
    }
  return f;
}

/// Rows of `colour` in column x, counted from row `from` up (step -1) or down (step +1) until the
/// first other pixel.
int run_from(const DecodedPng& img, int x, int from, int step, Rgb8 colour) {
  int n = 0;
  for (int y = from; y >= 0 && y < img.height() && near(img.at(x, y), colour); y += step) ++n;
  return n;
}

int count_near(const DecodedPng& img, Rgb8 colour, int x0, int x1, int y0, int y1) {
  int n = 0;
  for (int y = std::max(0, y0); y < std::min(img.height(), y1); ++y)
    for (int x = std::max(0, x0); x < std::min(img.width(), x1); ++x)
      n += near(img.at(x, y), colour, 40) ? 1 : 0;
  return n;
}

/// The figure of the brief: two scores for each of 8 heads, between 0 and 1.
BarChart head_scores() {
  BarChart chart;
  chart.title = "Induction heads: scores per head";
  chart.x_label = "head";
  chart.y_label = "score";
  chart.categories = {"L0 H0", "L0 H1", "L0 H2", "L0 H3", "L1 H0", "L1 H1", "L1 H2", "L1 H3"};
  chart.series = {{{0.12, 0.93, 0.08, 0.21, 0.05, 0.11, 0.07, 0.04}, "previous-token score"},
                  {{0.03, 0.05, 0.02, 0.06, 0.88, 0.15, 0.71, 0.09}, "induction score"}};
  return chart;
}

/// Runs `render` and expects std::invalid_argument whose message contains every one of `words`.
void expect_invalid(const BarChart& chart, const fs::path& png,
                    std::initializer_list<const char*> words) {
  try {
    render_bar_chart(png, chart);
    ADD_FAILURE() << "an invalid chart was accepted";
  } catch (const std::invalid_argument& e) {
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "message \"" << e.what() << "\" does not mention \"" << w << "\"";
  }
  EXPECT_FALSE(fs::exists(png)) << "an invalid chart left a file behind";
}

}  // namespace

// --- Size, colours and heights ------------------------------------------------------------------

TEST(BarChart, IsAPngThatCairoDecodesOfAboutEightHundredByFiveHundred) {
  const TempDir dir("bar_chart_test");
  const fs::path png = dir / "heads.png";
  render_bar_chart(png, head_scores());
  EXPECT_EQ(read_file(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS) << cairo_status_to_string(img.status());
  EXPECT_NEAR(img.width(), 800, 40);
  EXPECT_NEAR(img.height(), 500, 60);
}

TEST(BarChart, EachBarHasItsSeriesColourAndAHeightProportionalToItsValue) {
  // Series 0 in the left half of each category's slot, series 1 in the right half; unlabelled,
  // so there is no legend. With y_max = 1 a bar fills `value` of the plot area's height.
  const TempDir dir("bar_chart_test");
  BarChart chart;
  chart.categories = {"a", "b", "c", "d"};
  chart.series = {{{0.9, 0.2, 0.5, 0.1}, ""}, {{0.3, 0.6, 0.05, 0.8}, ""}};
  chart.y_max = 1.0;
  const fs::path png = dir / "bars.png";
  render_bar_chart(png, chart);
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  const Frame frame = find_frame(img);
  ASSERT_GE(frame.left, 0) << "no plot frame found";
  EXPECT_NEAR(frame.inner_height(), 360, 40);

  for (int s = 0; s < 2; ++s) {
    const Rgb8 colour = s == 0 ? kBlue : kOrange;
    for (int c = 0; c < 4; ++c) {
      SCOPED_TRACE("series " + std::to_string(s) + ", category " + std::to_string(c));
      const double value =
          chart.series[static_cast<std::size_t>(s)].values[static_cast<std::size_t>(c)];
      const int x =
          static_cast<int>(frame.category_centre(c, 4) + (s == 0 ? -1 : 1) * frame.slot(4) / 8);
      const int height = run_from(img, x, frame.bottom - 1, -1, colour);
      EXPECT_NEAR(height, value * frame.inner_height(), 1.5) << "bar height for value " << value;
      const Rgb8 middle = img.at(x, frame.bottom - 1 - height / 2);
      EXPECT_TRUE(near(middle, colour, 2))
          << "middle of the bar is " << minimodel::testing::describe(middle);
    }
  }
  // The tallest and the shortest bar of series 0, against each other.
  const int tall = run_from(img, static_cast<int>(frame.category_centre(0, 4) - frame.slot(4) / 8),
                            frame.bottom - 1, -1, kBlue);
  const int short_ =
      run_from(img, static_cast<int>(frame.category_centre(3, 4) - frame.slot(4) / 8),
               frame.bottom - 1, -1, kBlue);
  EXPECT_NEAR(static_cast<double>(tall) / short_, 0.9 / 0.1, 0.2);
  // Between two groups there is no bar.
  const int gap_x = static_cast<int>(frame.left + 1 + frame.slot(4));
  EXPECT_EQ(count_near(img, kBlue, gap_x - 1, gap_x + 2, frame.top, frame.bottom), 0);
  EXPECT_EQ(count_near(img, kOrange, gap_x - 1, gap_x + 2, frame.top, frame.bottom), 0);
}

TEST(BarChart, DefaultTopOfTheAxisIsTheRoundNumberAboveTheLargestValue) {
  // Scores up to 0.93: the axis ends at 1, so the tallest bar fills 93 % of the plot area.
  const TempDir dir("bar_chart_test");
  const fs::path png = dir / "heads.png";
  render_bar_chart(png, head_scores());
  const DecodedPng img(png);
  const Frame frame = find_frame(img);
  ASSERT_GE(frame.left, 0) << "no plot frame found";
  const int x = static_cast<int>(frame.category_centre(1, 8) - frame.slot(8) / 8);  // L0 H1: 0.93
  EXPECT_NEAR(run_from(img, x, frame.bottom - 1, -1, kBlue), 0.93 * frame.inner_height(), 1.5);
}

TEST(BarChart, NegativeValuesDrawDownwardFromZero) {
  const TempDir dir("bar_chart_test");
  BarChart chart;
  chart.categories = {"up", "down"};
  chart.series = {{{1.0, -0.5}, ""}};
  chart.y_min = -1;
  chart.y_max = 1;
  const fs::path png = dir / "signed.png";
  render_bar_chart(png, chart);
  const DecodedPng img(png);
  const Frame frame = find_frame(img);
  ASSERT_GE(frame.left, 0) << "no plot frame found";
  const int zero = (frame.top + frame.bottom) / 2;  // 0 is half way up an axis from -1 to 1
  const int half = frame.inner_height() / 2;
  const int up = static_cast<int>(frame.category_centre(0, 2));
  const int down = static_cast<int>(frame.category_centre(1, 2));
  EXPECT_NEAR(run_from(img, up, zero - 1, -1, kBlue), half, 2) << "the bar of 1 goes up from 0";
  EXPECT_EQ(count_near(img, kBlue, up, up + 1, zero + 2, frame.bottom), 0) << "below 0";
  EXPECT_NEAR(run_from(img, down, zero + 2, 1, kBlue), 0.5 * half - 1, 2)
      << "the bar of -0.5 goes down from 0";
  EXPECT_EQ(count_near(img, kBlue, down, down + 1, frame.top, zero - 1), 0) << "above 0";
}

TEST(BarChart, ValuesBelowTheAxisMinimumLowerTheAxis) {
  // y_min is 0 by default; a negative value still gets its bar, below a baseline at 0.
  const TempDir dir("bar_chart_test");
  BarChart chart;
  chart.categories = {"a", "b"};
  chart.series = {{{0.5, -0.5}, ""}};
  const fs::path png = dir / "lowered.png";
  render_bar_chart(png, chart);
  const DecodedPng img(png);
  const Frame frame = find_frame(img);
  ASSERT_GE(frame.left, 0) << "no plot frame found";
  const int down = static_cast<int>(frame.category_centre(1, 2));
  EXPECT_GT(count_near(img, kBlue, down, down + 1, frame.top, frame.bottom), 60);
  EXPECT_FALSE(near(img.at(down, frame.bottom - 2), kBlue)) << "the axis does not end at the bar";
}

// --- Text and legend ----------------------------------------------------------------------------

TEST(BarChart, WritesEachValueAboveItsBar) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  for (auto& s : chart.series) s.label.clear();  // no legend over the values
  const fs::path png = dir / "heads.png";
  render_bar_chart(png, chart);
  const DecodedPng img(png);
  const Frame frame = find_frame(img);
  ASSERT_GE(frame.left, 0) << "no plot frame found";
  for (int c = 0; c < 8; ++c) {
    SCOPED_TRACE("category " + std::to_string(c));
    const int centre = static_cast<int>(frame.category_centre(c, 8));
    const int quarter = static_cast<int>(frame.slot(8) * 0.4);
    const int x = centre - quarter / 2;
    const int top = frame.bottom - 1 - run_from(img, x, frame.bottom - 1, -1, kBlue);
    EXPECT_GT(count_near(img, kTextGrey, centre - quarter, centre, top - 18, top), 10)
        << "no value above the bar of series 0";
  }
}

TEST(BarChart, LegendGoesInsideWhereItHidesNoBar) {
  // The last heads score low on both series, so the top right is free.
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  render_bar_chart(dir / "legend.png", chart);
  for (auto& s : chart.series) s.label.clear();
  render_bar_chart(dir / "plain.png", chart);
  const DecodedPng legend(dir / "legend.png");
  const DecodedPng plain(dir / "plain.png");
  ASSERT_EQ(legend.width(), plain.width()) << "the legend went outside";
  ASSERT_EQ(legend.height(), plain.height());
  const Frame frame = find_frame(plain);

  int changed = 0, outside_top_right = 0, bar_hidden = 0;
  for (int y = 0; y < plain.height(); ++y)
    for (int x = 0; x < plain.width(); ++x) {
      if (near(legend.at(x, y), plain.at(x, y), 0)) continue;
      ++changed;
      if (x < (frame.left + frame.right) / 2 || y > (frame.top + frame.bottom) / 2)
        ++outside_top_right;
      if (near(plain.at(x, y), kBlue) || near(plain.at(x, y), kOrange)) ++bar_hidden;
    }
  EXPECT_GT(changed, 200) << "no legend drawn";
  EXPECT_EQ(outside_top_right, 0) << "the legend reaches outside the top-right quarter";
  EXPECT_EQ(bar_hidden, 0) << "the legend covers a bar";
  EXPECT_GT(count_near(legend, kBlue, frame.right - 250, frame.right, frame.top, frame.top + 80),
            count_near(plain, kBlue, frame.right - 250, frame.right, frame.top, frame.top + 80))
      << "no blue swatch for series 0";
}

TEST(BarChart, LegendMovesOutsideTheRightWhenEveryCornerHasABar) {
  const TempDir dir("bar_chart_test");
  BarChart chart;
  chart.categories = {"a", "b", "c", "d"};
  chart.series = {{{1.0, 1.0, 1.0, 1.0}, "first"}, {{0.98, 0.98, 0.98, 0.98}, "second"}};
  render_bar_chart(dir / "legend.png", chart);
  for (auto& s : chart.series) s.label.clear();
  render_bar_chart(dir / "plain.png", chart);
  const DecodedPng legend(dir / "legend.png");
  const DecodedPng plain(dir / "plain.png");
  EXPECT_GT(legend.width(), plain.width()) << "the figure did not grow to hold the legend";
  const Frame frame = find_frame(legend);
  EXPECT_EQ(frame.right, find_frame(plain).right) << "the plot area changed";
  EXPECT_GT(count_near(legend, kBlue, frame.right + 1, legend.width(), 0, legend.height()), 20);
  EXPECT_GT(count_near(legend, kOrange, frame.right + 1, legend.width(), 0, legend.height()), 20);
}

TEST(BarChart, LongCategoryLabelsAreTurnedBelowAPlotAreaOfTheSameSize) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  render_bar_chart(dir / "short.png", chart);
  for (auto& c : chart.categories) c = "layer " + c.substr(1, 1) + ", head " + c.substr(4);
  render_bar_chart(dir / "long.png", chart);
  const DecodedPng short_labels(dir / "short.png");
  const DecodedPng long_labels(dir / "long.png");
  ASSERT_EQ(long_labels.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_GT(long_labels.height(), short_labels.height() + 20) << "labels not turned";
  EXPECT_NEAR(find_frame(long_labels).inner_height(), find_frame(short_labels).inner_height(), 1);
}

// --- Files --------------------------------------------------------------------------------------

TEST(BarChart, LeavesNoTemporaryFileBehindAndCreatesMissingFolders) {
  const TempDir dir("bar_chart_test");
  const fs::path folder = dir / "experiments" / "a";
  render_bar_chart(folder / "heads.png", head_scores());
  EXPECT_TRUE(fs::exists(folder / "heads.png"));
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1);
}

TEST(BarChart, UnwritablePathThrowsRuntimeErrorNamingIt) {
  const TempDir dir("bar_chart_test");
  const fs::path not_a_folder = dir / "file.txt";
  std::ofstream(not_a_folder) << "a regular file";
  const fs::path png = not_a_folder / "chart.png";
  try {
    render_bar_chart(png, head_scores());
    FAIL() << "render_bar_chart wrote below a regular file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(png.string()), std::string::npos) << e.what();
  }
}

// --- Validation ---------------------------------------------------------------------------------

TEST(BarChart, RejectsAChartWithoutCategoriesOrSeries) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  chart.categories.clear();
  expect_invalid(chart, dir / "chart.png", {"render_bar_chart", "no categories"});
  chart = head_scores();
  chart.series.clear();
  expect_invalid(chart, dir / "chart.png", {"render_bar_chart", "no series"});
}

TEST(BarChart, RejectsASeriesWithAnotherNumberOfValuesNamingIt) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  chart.series[1].values.pop_back();
  expect_invalid(chart, dir / "chart.png",
                 {"series 1", "\"induction score\"", "7 values", "8 categories"});
}

TEST(BarChart, RejectsValuesThatAreNotFinite) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  chart.series[0].values[3] = std::numeric_limits<double>::quiet_NaN();
  expect_invalid(
      chart, dir / "chart.png",
      {"series 0", "\"previous-token score\"", "values[3] = nan", "\"L0 H3\"", "finite"});
  chart = head_scores();
  chart.series[1].values[0] = -std::numeric_limits<double>::infinity();
  expect_invalid(chart, dir / "chart.png", {"series 1", "values[0] = -inf"});
  chart = head_scores();
  chart.y_max = std::numeric_limits<double>::infinity();
  expect_invalid(chart, dir / "chart.png", {"y_max = inf", "finite"});
}

TEST(BarChart, RejectsAYMaxAtOrBelowYMin) {
  const TempDir dir("bar_chart_test");
  BarChart chart = head_scores();
  chart.y_max = 0.0;
  expect_invalid(chart, dir / "chart.png", {"y_max = 0", "y_min = 0"});
  chart.y_min = 0.5;
  chart.y_max = 0.25;
  expect_invalid(chart, dir / "chart.png", {"y_max = 0.25", "y_min = 0.5"});
}

// Lab 07's GF/s per shape: shapes are categories (no line joins two of them, every one has its
// bars), and torch's bars appear only when torch was measured beside them.
TEST(RatesPerShapeChart, ShapesAreCategoriesAndTorchIsLeftOutWithItsReasonWhenNotMeasured) {
  const std::vector<workbench::ShapeRates> ours = {{"(128, 512, 8)", 40.0, 41.0},
                                                   {"(1024, 768, 12)", 38.0, 52.0}};
  const BarChart alone = workbench::rates_per_shape_chart(
      "GF/s", "efficient_forward", ours, {}, "torch not measured: no PyTorch at /usr/bin/python3");
  EXPECT_EQ(alone.categories, (std::vector<std::string>{"(128, 512, 8)", "(1024, 768, 12)"}));
  ASSERT_EQ(alone.series.size(), 2u);
  EXPECT_EQ(alone.series[0].label, "efficient_forward");
  EXPECT_EQ(alone.series[0].values, (std::vector<double>{40.0, 38.0}));
  EXPECT_EQ(alone.series[1].label, "efficient_forward, causal");
  EXPECT_EQ(alone.series[1].values, (std::vector<double>{41.0, 52.0}));
  EXPECT_NE(alone.x_label.find("torch not measured: no PyTorch at /usr/bin/python3"),
            std::string::npos)
      << alone.x_label;

  const std::vector<workbench::ShapeRates> torch = {{"(128, 512, 8)", 70.0, 80.0},
                                                    {"(1024, 768, 12)", 30.0, 14.0}};
  const BarChart beside =
      workbench::rates_per_shape_chart("GF/s", "efficient_forward", ours, torch, "unused");
  ASSERT_EQ(beside.series.size(), 4u);
  EXPECT_EQ(beside.series[2].values, (std::vector<double>{70.0, 30.0}));
  EXPECT_EQ(beside.series[3].values, (std::vector<double>{80.0, 14.0}));
  EXPECT_NE(beside.series[2].label.find("same run"), std::string::npos) << beside.series[2].label;
  EXPECT_EQ(beside.x_label.find("unused"), std::string::npos) << beside.x_label;

  const TempDir dir("bar_chart_test");
  render_bar_chart(dir.path() / "rates.png", beside);
  EXPECT_TRUE(fs::exists(dir.path() / "rates.png"));

  EXPECT_THROW(
      workbench::rates_per_shape_chart("GF/s", "efficient_forward", ours, {torch.front()}, ""),
      std::invalid_argument);
  EXPECT_THROW(workbench::rates_per_shape_chart("GF/s", "efficient_forward", {}, {}, ""),
               std::invalid_argument);
}
