// Tests of the workbench infrastructure: heatmap PNGs, atomic writes, environment facts and
// .npy input.
#include <cairo.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xtensor_config.hpp>

#include "figures/heatmap.hpp"
#include "figures/measured_legends.hpp"
#include "support/checks.hpp"
#include "support/decoded_png.hpp"
#include "support/non_regular_files.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"
#include "util/process.hpp"
#include "util/text.hpp"
#include "verify_frame/manifest.hpp"
#include "verify_frame/verify_run.hpp"

namespace fs = std::filesystem;
using minimodel::testing::DecodedPng;
using minimodel::testing::describe;
using minimodel::testing::near;
using minimodel::testing::Rgb8;
using workbench::HeatmapFigure;
using workbench::HeatmapPanel;
using workbench::render_heatmaps;

namespace {

/// A fresh folder per test (tests may run in parallel processes), removed afterwards.
class WorkbenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("workbench_test_" + std::string(info->test_suite_name()) +
                                        "_" + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  fs::path dir_;
};

class Heatmap : public WorkbenchTest {};
class AtomicWrite : public WorkbenchTest {};
class NpyIo : public WorkbenchTest {};

using workbench::read_file;

constexpr Rgb8 kYellow{0xfd, 0xe7, 0x25};  // viridis at vmax
constexpr Rgb8 kPurple{0x44, 0x01, 0x54};  // viridis at vmin

xt::xtensor<float, 2> filled(std::size_t rows, std::size_t cols, float value) {
  xt::xtensor<float, 2> t = xt::xtensor<float, 2>::from_shape({rows, cols});
  t.fill(value);
  return t;
}

/// Softmax-like rows: positive and summing to 1.
xt::xtensor<float, 2> softmax_like(std::size_t n, std::size_t seed) {
  xt::xtensor<float, 2> w = xt::xtensor<float, 2>::from_shape({n, n});
  for (std::size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      w(i, j) = std::exp(static_cast<float>(((i * 7 + j * 13 + seed * 5) % 11)) / 3.0f);
      sum += w(i, j);
    }
    for (std::size_t j = 0; j < n; ++j) w(i, j) /= sum;
  }
  return w;
}

HeatmapFigure figure_of(std::size_t panels, std::size_t grid_rows, std::size_t grid_cols,
                        std::size_t n) {
  HeatmapFigure f;
  f.title = "test figure";
  f.grid_rows = grid_rows;
  f.grid_cols = grid_cols;
  for (std::size_t p = 0; p < panels; ++p)
    f.panels.push_back({softmax_like(n, p), "head " + std::to_string(p)});
  return f;
}

/// Where the matrix of a one-panel figure is: found from its colours, not from the layout code.
/// The matrix must have an all-yellow first row and first column.
struct MatrixBox {
  int left = 0, top = 0, width = 0, height = 0;
};
MatrixBox find_matrix(const DecodedPng& img) {
  // The longest horizontal yellow run is the first matrix row (the colour bar is only 20 px wide).
  MatrixBox box;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = 0, run = 0; x < img.width(); ++x) {
      run = near(img.at(x, y), kYellow) ? run + 1 : 0;
      if (run > box.width) box = {x - run + 1, y, run, 0};
    }
  }
  // Down the middle of the first column, the longest yellow run is the matrix height.
  const int x = box.left + 2;
  for (int y = 0, run = 0; y < img.height(); ++y) {
    run = near(img.at(x, y), kYellow) ? run + 1 : 0;
    if (run > box.height) {
      box.height = run;
      box.top = y - run + 1;
    }
  }
  return box;
}

/// Renders `figure` and expects std::invalid_argument whose message contains every one of `words`.
void expect_invalid(const fs::path& png, const HeatmapFigure& figure,
                    std::initializer_list<const char*> words) {
  try {
    render_heatmaps(png, figure);
    ADD_FAILURE() << "render_heatmaps accepted an invalid figure";
  } catch (const std::invalid_argument& e) {
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "message \"" << e.what() << "\" does not mention \"" << w << "\"";
  }
  EXPECT_FALSE(fs::exists(png)) << "an invalid figure left a file behind";
}

}  // namespace

// --- render_heatmaps ----------------------------------------------------------------------------

TEST_F(Heatmap, WritesAPngThatCairoDecodesWiderThanTallForOneByTwo) {
  const fs::path png = dir_ / "fig.png";
  render_heatmaps(png, figure_of(2, 1, 2, 6));
  ASSERT_TRUE(fs::exists(png));
  EXPECT_EQ(read_file(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS) << cairo_status_to_string(img.status());
  EXPECT_GT(img.width(), img.height());
  EXPECT_GT(img.height(), 300);
}

TEST_F(Heatmap, TwoByTwoGridOfSmallMatricesIsReadableAndModerate) {
  const fs::path png = dir_ / "grid.png";
  render_heatmaps(png, figure_of(4, 2, 2, 8));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_GE(img.width(), 800);
  EXPECT_LE(img.width(), 1300);
  EXPECT_GE(img.height(), 700);
  EXPECT_LE(img.height(), 1300);
}

TEST_F(Heatmap, LargeMatricesStayUnderTwoThousandPixels) {
  const fs::path png = dir_ / "big.png";
  render_heatmaps(png, figure_of(16, 4, 4, 64));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_LE(img.width(), 2000);
  EXPECT_LE(img.height(), 2000);
}

TEST_F(Heatmap, BackgroundIsWhite) {
  const fs::path png = dir_ / "fig.png";
  render_heatmaps(png, figure_of(1, 1, 1, 4));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  EXPECT_TRUE(near(img.at(1, 1), {255, 255, 255}, 0)) << describe(img.at(1, 1));
  EXPECT_TRUE(near(img.at(img.width() - 2, img.height() - 2), {255, 255, 255}, 0));
}

TEST_F(Heatmap, VmaxCellIsYellowAndVminCellIsDarkPurple) {
  // 3 x 3 at vmax except the centre, at vmin; vmax/vmin away from 0 and 1 to test the scaling.
  HeatmapFigure f;
  f.vmin = -2.0f;
  f.vmax = 6.0f;
  auto values = filled(3, 3, f.vmax);
  values(1, 1) = f.vmin;
  f.panels.push_back({values, "one head"});
  const fs::path png = dir_ / "colours.png";
  render_heatmaps(png, f);
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);

  const MatrixBox box = find_matrix(img);
  ASSERT_GT(box.width, 30) << "no yellow matrix row found";
  EXPECT_NEAR(box.width, box.height, 3) << "square cells expected";
  const int cell = box.width / 3;
  const Rgb8 top_left = img.at(box.left + cell / 2, box.top + cell / 2);
  const Rgb8 centre = img.at(box.left + cell * 3 / 2, box.top + cell * 3 / 2);
  EXPECT_TRUE(near(top_left, kYellow)) << "vmax cell is " << describe(top_left);
  EXPECT_TRUE(near(centre, kPurple)) << "vmin cell is " << describe(centre);
}

TEST_F(Heatmap, ValuesOutsideTheScaleAreClamped) {
  HeatmapFigure f;
  auto values = filled(3, 3, 7.5f);  // above vmax = 1
  values(1, 1) = -std::numeric_limits<float>::infinity();
  f.panels.push_back({values, ""});
  const fs::path png = dir_ / "clamped.png";
  render_heatmaps(png, f);
  const DecodedPng img(png);
  const MatrixBox box = find_matrix(img);
  ASSERT_GT(box.width, 30);
  const int cell = box.width / 3;
  const Rgb8 centre = img.at(box.left + cell * 3 / 2, box.top + cell * 3 / 2);
  EXPECT_TRUE(near(centre, kPurple)) << "-inf cell is " << describe(centre);
}

TEST_F(Heatmap, NanCellIsDrawnLightGreyInsteadOfThrowing) {
  HeatmapFigure f;
  auto values = filled(3, 3, f.vmax);
  values(1, 1) = std::numeric_limits<float>::quiet_NaN();
  f.panels.push_back({values, "broken softmax"});
  const fs::path png = dir_ / "nan.png";
  ASSERT_NO_THROW(render_heatmaps(png, f));
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  const MatrixBox box = find_matrix(img);
  ASSERT_GT(box.width, 30);
  const int cell = box.width / 3;
  const Rgb8 centre = img.at(box.left + cell * 3 / 2, box.top + cell * 3 / 2);
  EXPECT_TRUE(near(centre, {217, 217, 217}, 10)) << "NaN cell is " << describe(centre);
}

TEST_F(Heatmap, ExcludedCellsAreHatchedGreyNotAColourOfTheScale) {
  HeatmapFigure f;
  auto values = filled(3, 3, f.vmax);
  values(1, 1) = 0.0f;  // a masked weight: exactly vmin, yet it must not look like one
  xt::xtensor<bool, 2> excluded = xt::zeros<bool>({3, 3});
  excluded(1, 1) = true;
  f.panels.push_back({values, "masked centre", excluded});
  f.excluded_label = "masked";
  const fs::path png = dir_ / "excluded.png";
  render_heatmaps(png, f);
  const DecodedPng img(png);
  ASSERT_EQ(img.status(), CAIRO_STATUS_SUCCESS);
  const MatrixBox box = find_matrix(img);
  ASSERT_GT(box.width, 30);
  const int cell = box.width / 3;
  int grey = 0, white = 0, purple = 0;
  for (int dy = 2; dy < cell - 2; ++dy)
    for (int dx = 2; dx < cell - 2; ++dx) {
      const Rgb8 px = img.at(box.left + cell + dx, box.top + cell + dy);
      grey += near(px, {158, 158, 158}, 12);
      white += near(px, {255, 255, 255}, 12);
      purple += near(px, kPurple, 30);
    }
  EXPECT_GT(grey, 0) << "no grey in the excluded cell";
  EXPECT_GT(white, 0) << "no hatching in the excluded cell";
  EXPECT_EQ(purple, 0) << "the excluded cell took the colour of its value";
}

TEST_F(Heatmap, RejectsExcludedCellsOfAnotherShape) {
  HeatmapFigure f = figure_of(1, 1, 1, 4);
  f.panels[0].excluded = xt::zeros<bool>({3, 4});
  expect_invalid(dir_ / "fig.png", f, {"panel 0", "excluded", "(3, 4)", "(4, 4)"});
}

TEST_F(Heatmap, LeavesNoTemporaryFileBehind) {
  const fs::path png = dir_ / "fig.png";
  render_heatmaps(png, figure_of(2, 1, 2, 4));
  EXPECT_TRUE(fs::exists(png));
  EXPECT_FALSE(fs::exists(dir_ / "fig.png.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(Heatmap, OverwritesAnExistingFileAndCreatesMissingFolders) {
  const fs::path png = dir_ / "a" / "b" / "fig.png";
  render_heatmaps(png, figure_of(1, 1, 1, 4));
  const auto small = fs::file_size(png);
  render_heatmaps(png, figure_of(4, 2, 2, 8));
  EXPECT_GT(fs::file_size(png), small);
  EXPECT_EQ(DecodedPng(png).status(), CAIRO_STATUS_SUCCESS);
}

TEST_F(Heatmap, UnwritablePathThrowsRuntimeErrorNamingIt) {
  const fs::path not_a_folder = dir_ / "file.txt";
  std::ofstream(not_a_folder) << "a regular file";
  const fs::path png = not_a_folder / "fig.png";
  try {
    render_heatmaps(png, figure_of(1, 1, 1, 4));
    FAIL() << "render_heatmaps wrote below a regular file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(png.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(not_a_folder), "a regular file");
}

TEST_F(Heatmap, RejectsAFigureWithoutPanels) {
  HeatmapFigure f;
  expect_invalid(dir_ / "fig.png", f, {"no panels"});
}

TEST_F(Heatmap, RejectsMorePanelsThanGridSlots) {
  expect_invalid(dir_ / "fig.png", figure_of(3, 1, 2, 4), {"3 panels", "1 x 2"});
}

TEST_F(Heatmap, RejectsPanelsOfDifferentShapes) {
  HeatmapFigure f = figure_of(2, 1, 2, 4);
  f.panels[1].values = filled(4, 5, 0.5f);
  expect_invalid(dir_ / "fig.png", f, {"panel 1", "(4, 5)", "(4, 4)"});
}

TEST_F(Heatmap, RejectsAnEmptyMatrix) {
  HeatmapFigure f;
  f.panels.push_back({xt::xtensor<float, 2>::from_shape({0, 4}), "empty"});
  expect_invalid(dir_ / "fig.png", f, {"(0, 4)"});
}

TEST_F(Heatmap, RejectsRowLabelsThatDoNotMatchTheRows) {
  HeatmapFigure f = figure_of(1, 1, 1, 4);
  f.row_labels = {"a", "b", "c"};
  expect_invalid(dir_ / "fig.png", f, {"3 row_labels", "4 rows"});
}

TEST_F(Heatmap, RejectsColLabelsThatDoNotMatchTheColumns) {
  HeatmapFigure f = figure_of(1, 1, 1, 4);
  f.col_labels = {"a", "b", "c", "d", "e"};
  expect_invalid(dir_ / "fig.png", f, {"5 col_labels", "4 columns"});
}

TEST_F(Heatmap, RejectsAColourScaleWithoutVminBelowVmax) {
  HeatmapFigure f = figure_of(1, 1, 1, 4);
  f.vmin = 1.0f;
  f.vmax = 1.0f;
  expect_invalid(dir_ / "equal.png", f, {"vmin = 1", "vmax = 1"});
  f.vmin = 2.0f;
  expect_invalid(dir_ / "reversed.png", f, {"vmin = 2", "vmax = 1"});
  f.vmin = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(dir_ / "nan.png", f, {"vmin = nan"});
  f.vmin = -std::numeric_limits<float>::infinity();
  expect_invalid(dir_ / "inf.png", f, {"vmin = -inf"});
}

TEST_F(Heatmap, AcceptsLabelsAndAnEmptyGridSlot) {
  HeatmapFigure f = figure_of(3, 2, 2, 8);
  f.row_labels = f.col_labels = {"<bos>", "I", "work", ",", "you", "work", ",", "he"};
  const fs::path png = dir_ / "labelled.png";
  render_heatmaps(png, f);
  EXPECT_EQ(DecodedPng(png).status(), CAIRO_STATUS_SUCCESS);
}

// --- write_json_atomically / write_file_atomically ---------------------------------------------

TEST_F(AtomicWrite, JsonRoundTripsThroughParse) {
  const nlohmann::json doc = {{"lab", "01"},
                              {"max_abs_diff", 2.5e-8},
                              {"passed", true},
                              {"shape", {2, 8, 64}},
                              {"note", nullptr}};
  const fs::path path = dir_ / "manifest.json";
  workbench::write_json_atomically(path, doc);
  const std::string text = read_file(path);
  EXPECT_EQ(nlohmann::json::parse(text), doc);
  EXPECT_EQ(text.back(), '\n');
}

TEST_F(AtomicWrite, OverwritesAnExistingFile) {
  const fs::path path = dir_ / "manifest.json";
  workbench::write_json_atomically(path, {{"run", 1}, {"long", std::string(1000, 'x')}});
  workbench::write_json_atomically(path, {{"run", 2}});
  EXPECT_EQ(nlohmann::json::parse(read_file(path)), nlohmann::json({{"run", 2}}));
}

TEST_F(AtomicWrite, TextIsWrittenVerbatim) {
  const fs::path path = dir_ / "verify_output.txt";
  const std::string text = "[PASS] rows sum to 1\n[FAIL] causality: 0.25\nno newline at end";
  workbench::write_file_atomically(path, text);
  EXPECT_EQ(read_file(path), text);
}

TEST_F(AtomicWrite, CreatesMissingFoldersAndLeavesNoTemporaryFile) {
  const fs::path path = dir_ / "experiments" / "01" / "out.txt";
  workbench::write_file_atomically(path, "hello\n");
  EXPECT_EQ(read_file(path), "hello\n");
  EXPECT_FALSE(fs::exists(dir_ / "experiments" / "01" / "out.txt.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()), 1);
}

TEST_F(AtomicWrite, UnwritablePathThrowsAndKeepsTheOldFile) {
  const fs::path old_file = dir_ / "manifest.json";
  workbench::write_json_atomically(old_file, {{"run", 1}});
  const std::string before = read_file(old_file);

  // The parent of this path is a regular file, so no folder can be created there.
  const fs::path below_file = old_file / "manifest.json";
  try {
    workbench::write_json_atomically(below_file, {{"run", 2}});
    FAIL() << "wrote below a regular file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(below_file.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(workbench::write_file_atomically(below_file, "x"), std::runtime_error);
  EXPECT_EQ(read_file(old_file), before);
}

TEST_F(AtomicWrite, TargetThatIsAFolderThrowsAndLeavesNoTemporaryFile) {
  const fs::path folder = dir_ / "taken";
  fs::create_directories(folder / "inside");
  EXPECT_THROW(workbench::write_file_atomically(folder, "x"), std::runtime_error);
  EXPECT_TRUE(fs::is_directory(folder / "inside"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1)
      << "the temporary file is gone";
}

TEST_F(AtomicWrite, LeavesAFileThatLooksLikeATemporaryAlone) {
  // An earlier writer used <name>.tmp; a learner's file of that name must survive.
  std::ofstream(dir_ / "out.txt.tmp") << "mine\n";
  workbench::write_file_atomically(dir_ / "out.txt", "new\n");
  EXPECT_EQ(read_file(dir_ / "out.txt.tmp"), "mine\n");
  EXPECT_EQ(read_file(dir_ / "out.txt"), "new\n");
}

TEST_F(AtomicWrite, NewFilesGetTheUsualPermissions) {
  const mode_t old_mask = umask(022);
  workbench::write_file_atomically(dir_ / "out.txt", "x");
  umask(old_mask);
  EXPECT_EQ(fs::status(dir_ / "out.txt").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(AtomicWrite, RefusesAnythingButARegularFileAndFollowsNoLink) {
  // Each a path that exists and is not a regular file, with the words its refusal uses. Renaming
  // a temporary over any of them would replace it (as root, /dev/null itself).
  const fs::path target = dir_ / "target.txt";
  workbench::write_file_atomically(target, "mine\n");
  const auto refused = minimodel::testing::make_non_regular_files(dir_, target, true);
  for (const auto& [path, words] : refused) {
    SCOPED_TRACE(path.string());
    const fs::file_type before = fs::symlink_status(path).type();
    try {
      workbench::write_file_atomically(path, "x");
      FAIL() << "wrote over it";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string() + ": " + words), std::string::npos)
          << e.what();
    }
    // All or nothing: a regular file written beside it is not written either.
    EXPECT_THROW(workbench::write_files_atomically(std::vector<std::pair<fs::path, std::string>>{
                     {dir_ / "new.txt", "y"}, {path, "x"}}),
                 std::runtime_error);
    EXPECT_THROW(workbench::save_npy_f32(path, xt::xarray<float>{1.0f}), workbench::NpyError);
    EXPECT_EQ(fs::symlink_status(path).type(), before);
  }
  EXPECT_EQ(read_file(target), "mine\n") << "a link's target is never written";
  EXPECT_FALSE(fs::exists(dir_ / "nowhere")) << "a dangling link's target is never created";
  EXPECT_FALSE(fs::exists(dir_ / "new.txt"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()),
            static_cast<std::ptrdiff_t>(refused.size() + 1))
      << "no temporary file is left behind";
}

// --- run_captured / run_process ----------------------------------------------------------------

TEST(ChildProcess, CapturesOutputAndStreamsItLineByLine) {
  std::vector<std::string> lines;
  workbench::CaptureOptions options;
  options.on_line = [&](const std::string& line) { lines.push_back(line); };
  const auto run =
      workbench::run_captured("sh", {"-c", "echo one; echo two >&2; printf three"}, options);
  EXPECT_TRUE(run.status.ok()) << run.status.describe();
  EXPECT_EQ(run.output, "one\ntwo\nthree");
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
}

TEST(ChildProcess, CapturesStdoutAloneWhenAsked) {
  workbench::CaptureOptions options;
  options.capture_stderr = false;  // the child's stderr is ours: the warning shows in the log
  const workbench::CapturedRun run = workbench::run_captured(
      "sh", {"-c", "echo content; echo a warning >&2; echo more content"}, options);
  EXPECT_TRUE(run.status.ok());
  EXPECT_EQ(run.output, "content\nmore content\n");
}

TEST(ChildProcess, ReportsTheExitStatusAndTheSignal) {
  const auto failed = workbench::run_captured("sh", {"-c", "exit 3"});
  EXPECT_TRUE(failed.status.exited);
  EXPECT_EQ(failed.status.code, 3);
  EXPECT_EQ(failed.status.describe(), "exit status 3");
  const auto killed = workbench::run_captured("sh", {"-c", "kill -SEGV $$"});
  EXPECT_FALSE(killed.status.exited);
  EXPECT_EQ(killed.status.describe().rfind("signal 11", 0), 0u) << killed.status.describe();
}

TEST(ChildProcess, StopsAChildThatRunsPastItsTimeLimit) {
  workbench::CaptureOptions options;
  options.time_limit = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  // The shell's own child holds the output pipe too: the whole process group must go.
  const auto run =
      workbench::run_captured("sh", {"-c", "echo started; sleep 60; echo never"}, options);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(run.status.timed_out);
  EXPECT_FALSE(run.status.ok());
  EXPECT_EQ(run.output, "started\n");
  EXPECT_LT(took, std::chrono::seconds(20));
}

TEST(ChildProcess, TheTimeLimitHoldsAfterTheChildClosesItsOutput) {
  workbench::CaptureOptions options;
  options.time_limit = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  const auto run = workbench::run_captured("sh", {"-c", "exec 1>&- 2>&-; sleep 30"}, options);
  EXPECT_TRUE(run.status.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(ChildProcess, WhatAChildLeavesRunningIsKilledWhenItEnds) {
  // The background sleep holds the output open: waiting for end-of-file would take 30 s.
  const auto start = std::chrono::steady_clock::now();
  const auto run = workbench::run_captured("sh", {"-c", "sleep 30 & echo done"});
  EXPECT_TRUE(run.status.ok()) << run.status.describe();
  EXPECT_EQ(run.output, "done\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(ChildProcess, EndlessOutputKeepsItsHeadAndTailAndSaysHowMuchWasDropped) {
  std::size_t lines = 0;
  workbench::CaptureOptions options;
  options.on_line = [&](const std::string& line) { lines += line == "y" ? 1 : 1000000000; };
  const auto run = workbench::run_captured("sh", {"-c", "yes | head -c 20000000"}, options);
  EXPECT_TRUE(run.status.ok()) << run.status.describe();
  EXPECT_EQ(lines, 10000000u);  // on_line sees every line
  const std::string dropped =
      "\n… " + std::to_string(20000000 - 2 * (1 << 20)) + " bytes dropped …\n";
  ASSERT_EQ(run.output.size(), 2u * (1 << 20) + dropped.size());
  EXPECT_EQ(run.output.substr(1 << 20, dropped.size()), dropped);
  EXPECT_EQ(run.output.substr(0, 4), "y\ny\n");
  EXPECT_EQ(run.output.substr(run.output.size() - 4), "y\ny\n");
}

TEST(ChildProcess, ALongLineIsCutBeforeItIsHandedOn) {
  std::vector<std::string> lines;
  workbench::CaptureOptions options;
  options.on_line = [&](const std::string& line) { lines.push_back(line); };
  const auto run = workbench::run_captured(
      "sh", {"-c", "head -c 200000 /dev/zero | tr '\\000' x; echo; echo after"}, options);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::string(64 << 10, 'x') + " … (" + std::to_string(200000 - (64 << 10)) +
                          " bytes cut)");
  EXPECT_EQ(lines[1], "after");
}

// Whether `pid` is running: not gone, and not a zombie waiting for its parent.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

TEST(ChildProcess, ASignalThatEndsTheParentKillsItsChildsProcessGroup) {
  int ids[2];
  ASSERT_EQ(pipe(ids), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // a workbook that runs a learner's endless test
    close(ids[0]);
    workbench::kill_children_on_signals();
    workbench::CaptureOptions options;
    options.time_limit = std::chrono::seconds(120);
    options.on_line = [&](const std::string& line) {
      const std::string text = line + "\n";
      (void)!write(ids[1], text.data(), text.size());
    };
    workbench::run_captured("sh", {"-c", "sleep 300 & echo $!; wait"}, options);
    _exit(0);
  }
  close(ids[1]);
  std::string sleeper;
  char c = 0;
  while (read(ids[0], &c, 1) == 1 && c != '\n') sleeper += c;
  close(ids[0]);
  ASSERT_FALSE(sleeper.empty());
  const pid_t sleep_pid = std::stoi(sleeper);
  EXPECT_TRUE(running(sleep_pid));
  kill(parent, SIGINT);
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (running(sleep_pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running(sleep_pid));
  if (running(sleep_pid)) kill(sleep_pid, SIGKILL);
}

TEST(ChildProcess, AfterStopChildrenNoChildStarts) {
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    workbench::stop_children();
    try {
      workbench::run_captured("true", {});
    } catch (const std::runtime_error&) {
      _exit(0);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ChildProcess, AProgramThatCannotStartThrowsNamingIt) {
  try {
    workbench::run_captured("/nonexistent/program", {});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/program"), std::string::npos) << e.what();
  }
  EXPECT_THROW(workbench::run_process("/nonexistent/program", {}), std::runtime_error);
}

// --- trim ---------------------------------------------------------------------------------------

TEST(VerifyRun, RecordWritesEachOutputsShapeToleranceAndBlock) {
  const fs::path dir =
      fs::temp_directory_path() / ("verify_run_record_" + std::to_string(getpid()));
  fs::remove_all(dir);
  workbench::VerifyRun run({"99-test", 1, {}}, "reference", dir / "out", dir / "dump");
  run.record("attention_backward_dq", xt::xarray<float>({{1.0f, 2.0f}}), 1e-5, "A");
  run.record("no_block", xt::xarray<float>({3.0f}), 0.0);  // as before: no "block" key
  const auto outputs = nlohmann::json::parse(workbench::read_file(dir / "dump" / "outputs.json"));
  EXPECT_EQ(outputs["attention_backward_dq"],
            nlohmann::json({{"shape", {1, 2}}, {"tolerance", 1e-5}, {"block", "A"}}));
  EXPECT_EQ(outputs["no_block"], nlohmann::json({{"shape", {1}}, {"tolerance", 0.0}}));
  EXPECT_TRUE(fs::exists(dir / "dump" / "attention_backward_dq.npy"));
  fs::remove_all(dir);
}

TEST(Text, TrimRemovesEveryKindOfSurroundingWhitespace) {
  EXPECT_EQ(workbench::trim(" \t\r\n\f\vword  word\r\n"), "word  word");
  EXPECT_EQ(workbench::trim(" \n\t"), "");
  EXPECT_EQ(workbench::split_lines("a\r\nb\n\nc"), (std::vector<std::string>{"a", "b", "", "c"}));
}

// --- environment_facts ------------------------------------------------------------------------

TEST(EnvironmentFacts, HasExactlyTheDocumentedKeysWithTheirTypes) {
  const nlohmann::json facts = workbench::environment_facts();
  SCOPED_TRACE(facts.dump(2));
  ASSERT_TRUE(facts.is_object());
  EXPECT_EQ(facts.size(), 4u);
  ASSERT_TRUE(facts.contains("git_sha") && facts["git_sha"].is_string());
  EXPECT_FALSE(facts["git_sha"].get<std::string>().empty());
  ASSERT_TRUE(facts.contains("git_dirty"));
  EXPECT_TRUE(facts["git_dirty"].is_boolean() || facts["git_dirty"].is_null());

  ASSERT_TRUE(facts.contains("versions") && facts["versions"].is_object());
  const auto& v = facts["versions"];
  EXPECT_EQ(v.size(), 7u);
  for (const char* key :
       {"compiler", "cxx_standard", "xtensor", "xtensor_blas", "cmake", "build_type"}) {
    ASSERT_TRUE(v.contains(key) && v[key].is_string()) << key;
    EXPECT_FALSE(v[key].get<std::string>().empty()) << key;
  }
  ASSERT_TRUE(v.contains("blas") && v["blas"].is_object());
  EXPECT_EQ(v["blas"].size(), 3u);
  EXPECT_EQ(v["blas"].value("library", ""), "OpenBLAS");
  ASSERT_TRUE(v["blas"].contains("config") && v["blas"]["config"].is_string());
  EXPECT_FALSE(v["blas"]["config"].get<std::string>().empty());
  ASSERT_TRUE(v["blas"].contains("threads") && v["blas"]["threads"].is_number_integer());
  EXPECT_GE(v["blas"]["threads"].get<int>(), 1);

  ASSERT_TRUE(facts.contains("hardware") && facts["hardware"].is_object());
  const auto& hw = facts["hardware"];
  EXPECT_EQ(hw.size(), 3u);
  ASSERT_TRUE(hw.contains("cpu_model") && hw["cpu_model"].is_string());
  ASSERT_TRUE(hw.contains("cores") && hw["cores"].is_number_unsigned());
  ASSERT_TRUE(hw.contains("ram_bytes"));
  EXPECT_TRUE(hw["ram_bytes"].is_null() || hw["ram_bytes"].is_number_unsigned());
}

TEST(EnvironmentFacts, ReportsAtLeastOneCoreAndSomeMemory) {
  const nlohmann::json hw = workbench::environment_facts()["hardware"];
  EXPECT_GE(hw["cores"].get<unsigned>(), 1u);
  if (!hw["ram_bytes"].is_null()) {
    EXPECT_GT(hw["ram_bytes"].get<std::uint64_t>(), 1u << 20);
  }
}

TEST(EnvironmentFacts, VersionsComeFromTheHeadersThisWasBuiltWith) {
  const nlohmann::json v = workbench::environment_facts()["versions"];
  EXPECT_EQ(v["xtensor"], std::to_string(XTENSOR_VERSION_MAJOR) + "." +
                              std::to_string(XTENSOR_VERSION_MINOR) + "." +
                              std::to_string(XTENSOR_VERSION_PATCH));
  EXPECT_EQ(v["cxx_standard"].get<std::string>().rfind("C++", 0), 0u) << v["cxx_standard"];
  const std::string compiler = v["compiler"];
  EXPECT_TRUE(compiler.rfind("GCC ", 0) == 0 || compiler.rfind("Clang ", 0) == 0) << compiler;
}

// ---- load_npy_bool (lab 06's key-padding masks) -------------------------------------------------

class NpyBoolTest : public WorkbenchTest {
 protected:
  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
};

TEST_F(NpyBoolTest, ReadsNumpyBoolAndUint8) {
  const xt::xarray<bool> mask = {{false, true, true}, {true, false, false}};
  const xt::xarray<std::uint8_t> bytes = {{0, 1, 7}, {1, 0, 0}};  // nonzero is true
  EXPECT_EQ(workbench::load_npy_bool(write("b1.npy", xt::dump_npy(mask))), mask);
  EXPECT_EQ(workbench::load_npy_bool(write("u1.npy", xt::dump_npy(bytes))), mask);
}

TEST_F(NpyBoolTest, RejectsOtherDtypesAndTruncatedFiles) {
  const xt::xarray<float> floats = {1.0f, 0.0f};
  const std::string bools = xt::dump_npy(xt::xarray<bool>{true, false, true, false});
  for (const auto& [name, bytes, expected] :
       {std::tuple{"f4.npy", xt::dump_npy(floats), "<f4"},
        std::tuple{"cut.npy", bools.substr(0, bools.size() - 2), "truncated"}}) {
    try {
      workbench::load_npy_bool(write(name, bytes));
      ADD_FAILURE() << name << " was accepted";
    } catch (const workbench::NpyError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// A version 1.0 .npy file with `header` (padded with spaces to a multiple of 64) and `data`.
std::string npy_bytes(std::string header, const std::string& data) {
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

TEST_F(NpyIo, RejectsShapesWhoseSizeOverflowsOrExceedsTheFile) {
  const std::string eight_bytes(8, '\0');
  for (const auto& [shape, mention] : std::vector<std::pair<std::string, std::string>>{
           {"(9223372036854775809, 2)", "overflows"},
           {"(0, 4294967296, 4294967296)", "overflows"},  // empty, but its strides overflow
           {"(2305843009213693952, 2)", "more than 2^64"},
           {"(3,)", "needs 12 bytes of data, but 8 follow"},
           {"(-1, -1)", "is not a size"}}) {
    SCOPED_TRACE(shape);
    const fs::path path = dir_ / "bad.npy";
    workbench::write_file_atomically(
        path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }",
                        eight_bytes));
    try {
      workbench::load_npy_f32(path);
      FAIL() << "loaded";
    } catch (const workbench::NpyError& e) {
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
    }
  }
}

TEST_F(NpyIo, ReadsAHeaderOf128BytesOrMore) {
  // A header length with its high bit set (here 192) is valid and must not be read as negative.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  header += std::string(150, ' ');
  const float values[2] = {1.5f, -2.0f};
  const fs::path path = dir_ / "long_header.npy";
  workbench::write_file_atomically(
      path, npy_bytes(header, std::string(reinterpret_cast<const char*>(values), sizeof values)));
  const auto loaded = workbench::load_npy_f32(path);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded(0), 1.5f);
  EXPECT_EQ(loaded(1), -2.0f);
}

TEST_F(NpyIo, AHeaderFieldOf60000CharactersIsReadNotACrash) {
  // A valid version 1.0 header may run to 65,535 bytes; a regex recursed once per character.
  const float values[2] = {1.5f, -2.0f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const fs::path path = dir_ / "wide.npy";
  workbench::write_file_atomically(
      path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2," +
                          std::string(60000, ' ') + "), }",
                      data));
  const auto loaded = workbench::load_npy_f32(path);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded(1), -2.0f);
  workbench::write_file_atomically(path,
                                   npy_bytes("{'descr': '" + std::string(60000, 'f') +
                                                 "', 'fortran_order': False, 'shape': (2,), }",
                                             data));
  try {
    workbench::load_npy_f32(path);
    FAIL() << "loaded";
  } catch (const workbench::NpyError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << "the dtype is not cut";
  }
}

TEST_F(NpyIo, OnlyTheHeadersTopLevelKeysCount) {
  // 'descr' quoted inside another key's value is not the dtype; a key named twice is refused.
  const float values[2] = {1.5f, -2.0f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const fs::path path = dir_ / "quoted.npy";
  workbench::write_file_atomically(
      path, npy_bytes("{'note': \"'descr': '<i8', 'shape': (1,)\", 'descr': '<f4', "
                      "'fortran_order': False, 'shape': (2,), }",
                      data));
  const auto loaded = workbench::load_npy_f32(path);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded(0), 1.5f);
  workbench::write_file_atomically(
      path,
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'descr': '<i8'}", data));
  try {
    workbench::load_npy_f32(path);
    FAIL() << "loaded";
  } catch (const workbench::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("names 'descr' twice"), std::string::npos) << e.what();
  }
}

TEST_F(NpyIo, AHeaderLongerThanTheFileIsRejectedAtOnce) {
  std::string bytes = "\x93NUMPY";
  bytes += '\x02';
  bytes += '\x00';
  bytes += std::string("\x00\x00\x56\x27", 4);  // 660 MB of header, in a 180-byte file
  bytes += std::string(168, ' ');
  const fs::path path = dir_ / "huge_header.npy";
  workbench::write_file_atomically(path, bytes);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(workbench::load_npy_f32(path), workbench::NpyError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(NpyIo, LoadNpyI64ReadsAnInt64File) {
  const xt::xtensor<std::int64_t, 1> positions = {3, 4, -5, 9000000000};
  const fs::path path = dir_ / "positions.npy";
  workbench::write_file_atomically(path, xt::dump_npy(positions));
  const xt::xarray<std::int64_t> loaded = workbench::load_npy_i64(path);
  ASSERT_EQ(loaded.dimension(), 1u);
  ASSERT_EQ(loaded.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(loaded(i), positions(i)) << "i=" << i;
}

TEST_F(NpyIo, LoadNpyI64RejectsAnotherDtypeNamingTheFile) {
  const fs::path path = dir_ / "floats.npy";
  workbench::save_npy_f32(path, xt::xarray<float>{1.0f, 2.0f});
  try {
    workbench::load_npy_i64(path);
    FAIL() << "no exception";
  } catch (const workbench::NpyError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("floats.npy"), std::string::npos) << message;
    EXPECT_NE(message.find("int64"), std::string::npos) << message;
  }
}

TEST_F(NpyIo, LoadNpyI64RejectsATruncatedFile) {
  const xt::xtensor<std::int64_t, 1> positions = {0, 1, 2, 3, 4, 5};
  std::string bytes = xt::dump_npy(positions);
  bytes.resize(bytes.size() - 4);  // half of the last element missing
  const fs::path path = dir_ / "short.npy";
  workbench::write_file_atomically(path, bytes);
  try {
    workbench::load_npy_i64(path);
    FAIL() << "no exception";
  } catch (const workbench::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// The lab tests' closeness check: where, by how much, and two values that visibly differ.
TEST(AllClose, NamesTheWorstIndexAndBothValues) {
  const xt::xtensor<float, 2> expected = {{1.0f, 2.0f}, {3.0f, 4.0f}};
  const xt::xtensor<float, 2> actual = {{1.0f, 2.0f}, {3.5f, 4.0f}};
  EXPECT_EQ(std::string(minimodel::testing::all_close(actual, expected, 0.0).message()),
            "max |actual - expected| = 0.5 > tolerance 0 at (1, 0): actual 3.5, expected 3");
  EXPECT_TRUE(minimodel::testing::all_close(actual, expected, 0.5));
}

TEST(AllClose, ValuesThatDifferPastTheSixthDigitArePrintedInFull) {
  const xt::xtensor<float, 1> expected = {0.563286f};
  const xt::xtensor<float, 1> actual = {std::nextafter(0.563286f, 1.0f)};
  EXPECT_EQ(std::string(minimodel::testing::all_close(actual, expected, 0.0).message()),
            "max |actual - expected| = 5.96046e-08 > tolerance 0 at (0): actual 0.563286066, "
            "expected 0.563286006");
}

// Lab 07's figures say what was measured: a layer that allocates its buffers in every call is not
// labelled "buffers reused across calls", whatever the reference does.
TEST(MeasuredLegends, HeapBytesSayBuffersReusedOnlyWhenTheSecondCallAllocatesItsOutputAlone) {
  constexpr double kMiB = 1024.0 * 1024.0;
  // The reference: a first call sets up four (T, d_model) buffers, a second allocates its output.
  EXPECT_EQ(workbench::heap_bytes_legend("efficient_forward", 4096, {5 * kMiB, 1 * kMiB, 1 * kMiB}),
            "efficient_forward: its output; buffers reused across calls");
  // A tile's scratch (16,896 bytes) per call is not a buffer of size T.
  EXPECT_EQ(workbench::heap_bytes_legend("efficient_forward", 4096, {5 * kMiB, kMiB + 16896, kMiB}),
            "efficient_forward: its output; buffers reused across calls");
  // Nothing to reuse: neither call allocates more than its output.
  EXPECT_EQ(workbench::heap_bytes_legend("efficient_forward", 4096, {kMiB, kMiB, kMiB}),
            "efficient_forward: its output alone");
  // A learner's Block C that allocates its buffers in every call.
  EXPECT_EQ(workbench::heap_bytes_legend("efficient_forward", 1024,
                                         {1.25 * kMiB, 1.25 * kMiB, 0.25 * kMiB}),
            "efficient_forward: 1.25 MiB per call at T = 1024, 5.0× its output");
  EXPECT_THROW(workbench::heap_bytes_legend("efficient_forward", 1024, {1.0, 1.0, 0.0}),
               std::invalid_argument);
  EXPECT_THROW(workbench::heap_bytes_legend("efficient_forward", 1024, {std::nan(""), 1.0, 1.0}),
               std::invalid_argument);
}

TEST(MeasuredLegends, CausalLineSaysHowManyOfTheTilesAboveTheDiagonalWereSkipped) {
  EXPECT_EQ(workbench::causal_skip_legend("efficient_forward", 28, 28),
            "efficient_forward, causal: skips the tiles above the diagonal");
  EXPECT_EQ(workbench::causal_skip_legend("efficient_forward", 0, 28),
            "efficient_forward, causal: computes every tile (check 4: skips none of 28)");
  EXPECT_EQ(workbench::causal_skip_legend("efficient_forward", 21, 28),
            "efficient_forward, causal: skips 21 of the 28 tiles above the diagonal (check 4)");
}
