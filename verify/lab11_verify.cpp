// Lab 11 verify, in the order of the blocks: the formats' landmarks round as IEEE 754 says
// (Block A); attention's error against float64 as the key length S grows, for fp32 and for bf16
// and fp16 with and without fp32 sums (Block B, error_vs_length.png); the largest score for which
// attention stays finite in each format, without and with the row maximum subtracted, measured on
// a fine grid against ln(largest finite) and the largest finite value (Block C, safe_logits.png);
// and RoPE's angles in bf16 against fp32 as the position grows to 16384 (Block C,
// rope_angle_error.png). Every table is also kept in the manifest's "measurements".
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/bar_chart.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/precision/half_precision.hpp"
#include "tensors/attention_float64.hpp"
#include "util/text.hpp"

using lab_setup::kSeed;
using lab_setup::normal_rows;
using minimodel::Kernel;
using minimodel::Positions;
using minimodel::Precision;
using minimodel::Tensor2;
using workbench::attention_float64;
using workbench::format_number;
using workbench::Matrix64;
using workbench::max_abs_error;

namespace {

// Error against length: T queries over S keys, q, k, v from N(0, 1); each S takes the first S
// keys and values of one draw, so that a longer row adds keys to a shorter one. The kernels
// without fp32 sums round after each of T · S · (d_head + d_v) additions: an unoptimised build
// (CI's sanitizer run, at -O0) stops at S = 2048, and the printout and the manifest say so.
constexpr std::size_t kQueries = 4, kDHead = 64, kDV = 64;
#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
const std::vector<std::size_t> kLengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
#else
constexpr bool kOptimised = false;
const std::vector<std::size_t> kLengths = {128, 256, 512, 1024, 2048};
#endif

// The safe-logit grid: L = 2^(i / 1024) for L from 1 to 2^128 (past float's largest value). Its
// step, 0.068%, is 0.0075 at ln 65504 = 11.09: fp16's own step there (2^-7 = 0.0078).
constexpr int kGridStepsPerOctave = 1024, kGridOctaves = 128;

// RoPE: every position up to kMaxPosition, lab 05's theta, a common head width.
constexpr std::int64_t kMaxPosition = 16384;
constexpr std::size_t kRopeDHead = 64;
constexpr float kTheta = 10000.0f;
// fp32 holds every position below 2^24 exactly; its angle p · f rounds f and the product, each by
// at most 2^-24 relative, so the error stays below 2^-23 · p <= 2^-23 · 16384 = 1.95e-3 rad.
constexpr double kFp32AngleBound = 2e-3;
// bf16: one radian turns a pair by 57 degrees, a rotation the model never learned; fp32 stays
// three orders of magnitude below it.
constexpr double kBf16AngleFloor = 1.0;
constexpr double kPi = 3.14159265358979323846;

// A format's layout: fraction bits and the exponent of its largest binade.
struct Format {
  Precision precision;
  int fraction_bits;
  int max_exponent;
  double largest() const { return std::ldexp(2.0 - std::ldexp(1.0, -fraction_bits), max_exponent); }
  double unit_roundoff() const { return std::ldexp(1.0, -fraction_bits - 1); }
  double step_at(double x) const { return std::ldexp(1.0, std::ilogb(x) - fraction_bits); }
};
const std::vector<Format> kFormats = {
    {Precision::fp32, 23, 127}, {Precision::bf16, 7, 127}, {Precision::fp16, 10, 15}};

const Format& format_of(Precision precision) {
  return *std::find_if(kFormats.begin(), kFormats.end(),
                       [&](const Format& f) { return f.precision == precision; });
}

struct NamedKernel {
  std::string name;  // the legend's and the manifest's
  std::string column;
  Kernel kernel;
};
const std::vector<NamedKernel> kKernels = {
    {"fp32", "fp32", {Precision::fp32, true}},
    {"bf16, sums in fp32", "bf16 fp32-sum", {Precision::bf16, true}},
    {"bf16, sums in bf16", "bf16 bf16-sum", {Precision::bf16, false}},
    {"fp16, sums in fp32", "fp16 fp32-sum", {Precision::fp16, true}},
    {"fp16, sums in fp16", "fp16 fp16-sum", {Precision::fp16, false}}};

// `text` right-aligned in `width` columns.
std::string right(const std::string& text, std::size_t width) {
  return std::string(width > text.size() ? width - text.size() : 0, ' ') + text;
}

// The points of a series that a log axis can draw: a NaN, an infinite or a zero error (a broken
// kernel's) would stop the figure, and the checks already report it. Counts what it leaves out.
workbench::LineSeries drawable(const std::vector<double>& x, const std::vector<double>& y,
                               const std::string& label, std::size_t& left_out) {
  workbench::LineSeries series{{}, {}, label};
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(std::isfinite(y[i]) && y[i] > 0.0)) {
      ++left_out;
      continue;
    }
    series.x.push_back(x[i]);
    series.y.push_back(y[i]);
  }
  return series;
}

// Where a sweep of the logit L over the grid stops giving a finite output.
struct Sweep {
  double largest_safe = std::nan("");  // the largest grid L below which every output is finite
  double first_unsafe = std::nan("");  // the next grid L, whose output is not
  bool monotone = true;                // every grid L past first_unsafe is unsafe too
};

// One query row per grid point L = 2^(i / 1024), q = (L), over two keys k = (1; 0) with d_head 1
// (so the scale 1/sqrt(d_head) is 1): the scores are L, rounded to the format, and 0. v = (1; 0),
// so a finite output is key 0's weight. A grid point past float's largest value is +inf.
Sweep sweep_logits(Precision precision, bool subtract_max) {
  const std::size_t n = std::size_t{kGridOctaves} * kGridStepsPerOctave + 1;
  std::vector<double> grid(n);
  Tensor2 q({n, std::size_t{1}});
  for (std::size_t i = 0; i < n; ++i) {
    grid[i] = std::exp2(double(i) / kGridStepsPerOctave);
    q(i, 0) =
        grid[i] <= FLT_MAX ? static_cast<float>(grid[i]) : std::numeric_limits<float>::infinity();
  }
  const Tensor2 k = {{1.0f}, {0.0f}}, v = {{1.0f}, {0.0f}};
  const Kernel kernel{precision, true, true, subtract_max};
  const Tensor2 out = minimodel::attention_in(q, k, v, std::nullopt, kernel);  // (n, 1)
  Sweep sweep;
  std::size_t i = 0;
  while (i < n && std::isfinite(out(i, 0))) ++i;
  if (i == 0 || i == n) return sweep;  // no change of state inside the grid
  sweep.largest_safe = grid[i - 1];
  sweep.first_unsafe = grid[i];
  for (std::size_t j = i; j < n; ++j) sweep.monotone = sweep.monotone && !std::isfinite(out(j, 0));
  return sweep;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> kernel_names;
  for (const NamedKernel& k : kKernels) kernel_names.push_back(k.name);
  const nlohmann::json config = {
      {"error_vs_length",
       {{"T", kQueries},
        {"d_head", kDHead},
        {"d_v", kDV},
        {"S", kLengths},
        {"optimised_build", kOptimised},
        {"q_k_v_seeds", {kSeed, kSeed + 1, kSeed + 2}},
        {"kernels", kernel_names},
        {"truth", "float64 attention of the same float32 inputs"}}},
      {"safe_logits",
       {{"grid", "L = 2^(i / 1024), L from 1 to 2^128"},
        {"scores", "(L, 0): q = (L), k = (1; 0), d_head 1, v = (1; 0)"}}},
      {"rope_angles",
       {{"positions", "0 to " + std::to_string(kMaxPosition) + ", every one"},
        {"d_head", kRopeDHead},
        {"theta", kTheta},
        {"error", "max over the frequency index k of |angle - angle in float64|"}}}};
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    // ---- Block A: the formats' landmarks ----
    // For `workbook diff`: round_to each 16-bit format on values near its landmarks, exact (the
    // lab 11 tests compare bit patterns).
    {
      const xt::xtensor<float, 1> values = {
          0.1f,  1.0f / 3, 1.0f + 1.0f / 2048, 65504.0f, 65519.0f, 65520.0f, 6.1e-5f,
          6e-8f, -2.9e-8f, 3.14159f,           1e5f,     -1e9f,    257.0f,   1.00390625f};
      for (const Precision precision : {Precision::fp16, Precision::bf16}) {
        xt::xtensor<float, 1> rounded = values;
        for (float& value : rounded) value = minimodel::round_to(value, precision);
        run.record(std::string("round_to_") + minimodel::precision_name(precision), rounded, 0.0,
                   "A");
      }
    }
    run.print(
        "Check 1 (Block A). round_to on each format's landmarks: the largest finite value, the "
        "first value that rounds to inf, a tie (to even), a subnormal.");
    struct Landmark {
      Precision precision;
      float x;
      float expected;
      const char* what;
    };
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<Landmark> landmarks = {
        {Precision::fp16, 65504.0f, 65504.0f, "largest finite"},
        {Precision::fp16, std::nextafter(65520.0f, 0.0f), 65504.0f,
         "just below largest + half a step"},
        {Precision::fp16, 65520.0f, inf, "largest + half a step: inf"},
        {Precision::fp16, 2049.0f, 2048.0f, "2049: a tie between 2048 and 2050, to even"},
        {Precision::fp16, std::ldexp(1.0f, -24), std::ldexp(1.0f, -24), "smallest subnormal"},
        {Precision::bf16, float(format_of(Precision::bf16).largest()),
         float(format_of(Precision::bf16).largest()), "largest finite, 3.3895e38"},
        {Precision::bf16, FLT_MAX, inf, "float's largest: past bf16's + half a step"},
        {Precision::bf16, 257.0f, 256.0f, "257: a tie between 256 and 258, to even"},
        {Precision::bf16, 16383.0f, 16384.0f, "16383: steps of 64 below 16384"}};
    std::size_t wrong = 0;
    for (const Landmark& m : landmarks) {
      const float got = minimodel::round_to(m.x, m.precision);
      const bool same = got == m.expected;
      wrong += !same;
      char line[160];
      std::snprintf(line, sizeof line, "  %s  %-15.9g -> %-15.9g %s (%s)",
                    minimodel::precision_name(m.precision), double(m.x), double(got),
                    same ? "  " : "!=", m.what);
      run.print(line);
    }
    run.check("every landmark rounds to the value IEEE 754 gives", wrong == 0, double(wrong),
              std::to_string(wrong) + " of " + std::to_string(landmarks.size()) + " wrong");

    // ---- Block B: error against length ----
    run.print();
    run.print(
        "Checks 2-6 (Block B). attention_in against attention in float64 of the same inputs: "
        "T = " +
        std::to_string(kQueries) + " queries, d_head " + std::to_string(kDHead) + ", d_v " +
        std::to_string(kDV) + ", q, k, v from N(0, 1) (seeds " + std::to_string(kSeed) + "-" +
        std::to_string(kSeed + 2) + "); max |error| over the (T, d_v) output.");
    if (!kOptimised)
      run.print("(unoptimised build: S up to " + std::to_string(kLengths.back()) +
                " only; an optimised build goes on to 16384)");
    const std::size_t S_max = kLengths.back();
    const Tensor2 q = normal_rows(kQueries, kDHead, kSeed);
    const Tensor2 k_all = normal_rows(S_max, kDHead, kSeed + 1);
    const Tensor2 v_all = normal_rows(S_max, kDV, kSeed + 2);
    std::string header = "       S";
    for (const NamedKernel& k : kKernels) header += right(k.column, 15);
    run.print(header);
    std::vector<std::vector<double>> errors(kKernels.size());  // [kernel][length]
    std::vector<double> lengths;
    nlohmann::json error_rows = nlohmann::json::array();
    for (const std::size_t S : kLengths) {
      const Tensor2 k = xt::view(k_all, xt::range(0, S), xt::all());  // (S, d_head)
      const Tensor2 v = xt::view(v_all, xt::range(0, S), xt::all());  // (S, d_v)
      const Matrix64 truth = attention_float64(q, k, v);              // (T, d_v)
      lengths.push_back(double(S));
      std::string line = format_number("%8.0f", double(S));
      nlohmann::json row = {{"S", S}};
      for (std::size_t i = 0; i < kKernels.size(); ++i) {
        const Tensor2 out = minimodel::attention_in(q, k, v, std::nullopt, kKernels[i].kernel);
        if (S == kLengths.front() && kKernels[i].kernel.fp32_accumulation &&
            kKernels[i].kernel.storage != Precision::fp32)
          // Both implementations are within u of the truth (the lab 11 tests): 2u of each other.
          run.record(std::string("output_") +
                         minimodel::precision_name(kKernels[i].kernel.storage) + "_S" +
                         std::to_string(S),
                     out, 2 * format_of(kKernels[i].kernel.storage).unit_roundoff(), "B");
        errors[i].push_back(max_abs_error(out, truth));
        line += format_number("%15.3e", errors[i].back());
        row[kKernels[i].name] = errors[i].back();
      }
      run.print(line);
      error_rows.push_back(row);
    }
    run.measure("error_vs_length", error_rows);
    // For the attention explorer (`workbook explore 11`): the first queries' weights over the
    // first 16 keys in each kernel, a "head" per kernel, from attention_in itself: with v = the
    // identity (S, S), its output row t is query t's weights, as that kernel rounds them.
    {
      const std::size_t S = 16;
      const Tensor2 k = xt::view(k_all, xt::range(0, S), xt::all());  // (S, d_head)
      const Tensor2 identity = xt::eye<float>(S);
      minimodel::Tensor4 weights = xt::zeros<float>({std::size_t{1}, kKernels.size(), kQueries, S});
      std::vector<std::string> queries, keys;
      std::string heads = "the heads are kernels:";
      for (std::size_t i = 0; i < kKernels.size(); ++i) {
        xt::view(weights, 0, i) =
            minimodel::attention_in(q, k, identity, std::nullopt, kKernels[i].kernel);
        heads += (i ? ", H" : " H") + std::to_string(i) + " " + kKernels[i].name;
      }
      for (std::size_t t = 0; t < kQueries; ++t) queries.push_back("q" + std::to_string(t));
      for (std::size_t s = 0; s < S; ++s) keys.push_back("k" + std::to_string(s));
      workbench::PageData page = workbench::cross_attention_page(
          "Lab 11: " + std::to_string(kQueries) + " random queries over " + std::to_string(S) +
              " random keys, the weights in each precision (d_head " + std::to_string(kDHead) + ")",
          queries, keys, weights);
      page.notes.push_back(heads);
      workbench::save_page_data(run.artifact("explore.json"), page);
    }

    // The rows the write-up quotes, one kernel a line: the error and the error in units of the
    // kernel's format's unit roundoff u (fp32 2^-24, bf16 2^-8, fp16 2^-11).
    const std::vector<std::size_t> quoted = {128, 1024, S_max};
    std::string quoted_header = "  kernel              ";
    for (const std::size_t S : quoted) quoted_header += right("S = " + std::to_string(S), 24);
    run.print("At S = 128, 1024 and " + std::to_string(S_max) +
              ": max |error|, and (in brackets) that error in units of the format's u:");
    run.print(quoted_header);
    for (std::size_t i = 0; i < kKernels.size(); ++i) {
      const double u = format_of(kKernels[i].kernel.storage).unit_roundoff();
      std::string line = "  " + kKernels[i].name + std::string(20 - kKernels[i].name.size(), ' ');
      for (const std::size_t S : quoted) {
        const auto at =
            std::size_t(std::find(kLengths.begin(), kLengths.end(), S) - kLengths.begin());
        line += right(
            format_number("%.3e", errors[i][at]) + format_number(" (%.2g u)", errors[i][at] / u),
            24);
      }
      run.print(line);
    }

    const auto worst = [](const std::vector<double>& values) {
      return *std::max_element(values.begin(), values.end());
    };
    // fp32: the only rounding is float32's, u = 6e-8, in sums of up to S = 16384 terms of size
    // below 1; in practice a sum of n terms errs by about sqrt(n) u relative, 128 · 6e-8 = 7.6e-6
    // at S = 16384. 1e-5 allows that, and stays below every half-precision kernel's error (the
    // smallest: 4.3e-5, fp16 with fp32 sums at S = 16384).
    run.check_max_abs_diff("fp32: error at every S", worst(errors[0]), 1e-5);
    // With fp32 sums, the error is that of rounding the inputs, scores, exponentials and weights,
    // each by at most u relative. A score of size ~1 is then off by about u, its weight by about u
    // relative, and the output, a weighted mean of values of size ~1 whose errors partly cancel,
    // by less than u: the bound of the lab 11 tests. Not a worst case: it is tightest at the
    // shortest row, whose outputs are largest (measured: 0.93 u in bf16, 0.73 u in fp16 at
    // S = 128, 0.08 u and 0.09 u at 16384).
    run.check_max_abs_diff("bf16, sums in fp32: error at every S below bf16's u = 2^-8",
                           worst(errors[1]), format_of(Precision::bf16).unit_roundoff());
    run.check_max_abs_diff("fp16, sums in fp32: error at every S below fp16's u = 2^-11",
                           worst(errors[3]), format_of(Precision::fp16).unit_roundoff());
    // Rounded after every addition, a sum of n terms loses up to n u, in practice sqrt(n) u: at
    // S = 16384 that is 128 u against fp32 sums' fraction of u (the lab 11 tests measured 22 u
    // against 0.17 u for fp16 at S = 4096). 10 times is the tests' own margin.
    for (const std::size_t pure : {std::size_t{2}, std::size_t{4}}) {
      const double ratio = errors[pure].back() / errors[pure - 1].back();
      run.check(kKernels[pure].name + " at S = " + std::to_string(S_max) +
                    ": more than 10 times the error with sums in fp32",
                ratio > 10.0, ratio,
                format_number("%.3e", errors[pure].back()) + " vs " +
                    format_number("%.3e", errors[pure - 1].back()) + ", " +
                    format_number("%.1f", ratio) + " times");
    }

    workbench::LinePlot error_plot;
    error_plot.title =
        "Lab 11: attention's error against float64 (T = " + std::to_string(kQueries) + ", d_head " +
        std::to_string(kDHead) + ", d_v " + std::to_string(kDV) + ", q, k, v from N(0, 1))" +
        (kOptimised ? "" : ", unoptimised build");
    error_plot.x_label = "key length S";
    error_plot.y_label = "max |output - float64 output|";
    error_plot.log_x = error_plot.log_y = true;
    std::size_t left_out = 0;
    for (std::size_t i = 0; i < kKernels.size(); ++i) {
      workbench::LineSeries series = drawable(lengths, errors[i], kKernels[i].name, left_out);
      if (!series.x.empty()) error_plot.series.push_back(series);
    }
    for (const Precision p : {Precision::bf16, Precision::fp16}) {
      const double u = format_of(p).unit_roundoff();
      error_plot.series.push_back({{lengths.front(), lengths.back()},
                                   {u, u},
                                   std::string("u of ") + minimodel::precision_name(p) + " (2^" +
                                       std::to_string(std::ilogb(u)) + ")"});
    }
    workbench::render_line_plot(run.artifact("error_vs_length.png"), error_plot);
    if (left_out > 0)
      run.print("(error_vs_length.png leaves out " + std::to_string(left_out) +
                " errors that are not finite or are 0: a log axis cannot show them)");

    // ---- Block C: the largest safe logit ----
    run.print();
    run.print(
        "Checks 7-12 (Block C). The largest logit L for which attention stays finite: scores "
        "(L, 0) (q = (L), k = (1; 0), d_head 1), L on the grid 2^(i/1024) from 1 to 2^128, "
        "sums in fp32.");
    run.print(
        "Without the max, exp(L) must be finite: L < ln(largest finite). With the max, only "
        "the score L itself must be: L < largest finite. Tolerance: the grid's step, 2^(1/1024) - "
        "1 = 0.068% of L, plus one step of the format at the analytic value (L is rounded to the "
        "format before exp, and exp's result too).");
    run.print(
        "  format  max subtracted      measured L   (stored as)   first unsafe L        "
        "analytic   |measured/analytic - 1|");
    // The limit lies between the largest safe grid point and the next, a factor 1 + grid_step
    // apart; rounding L to the format, and exp's result, move it from the analytic value by less
    // than one step of the format there. (fp32 with the max lands almost a whole grid step below
    // FLT_MAX: the grid's next point, 2^128, is past it.)
    const double grid_step = std::exp2(1.0 / kGridStepsPerOctave) - 1.0;
    nlohmann::json safe_rows = nlohmann::json::array();
    std::vector<std::string> categories;  // "fp16: 11.09 and 65492", the measured values
    workbench::BarSeries measured_no_max{{}, "without the max: measured"},
        analytic_no_max{{}, "without: ln(largest finite)"},
        measured_max{{}, "with the max: measured"}, analytic_max{{}, "with: largest finite"};
    xt::xtensor<float, 2> safe_record({kFormats.size(), std::size_t{2}});
    struct SafeCheck {
      std::string name;
      bool passed;
      double value;
      std::string detail;
    };
    std::vector<SafeCheck> safe_checks;
    for (std::size_t f = 0; f < kFormats.size(); ++f) {
      const Format& fmt = kFormats[f];
      const char* name = minimodel::precision_name(fmt.precision);
      std::string category = name;
      for (const bool subtract_max : {false, true}) {
        const Sweep sweep = sweep_logits(fmt.precision, subtract_max);
        const double analytic = subtract_max ? fmt.largest() : std::log(fmt.largest());
        const double relative = std::abs(sweep.largest_safe / analytic - 1.0);
        const double tolerance = grid_step + fmt.step_at(analytic) / analytic;
        const bool found = std::isfinite(sweep.largest_safe);
        const float stored =
            found ? minimodel::round_to(float(sweep.largest_safe), fmt.precision) : 0.0f;
        // The grid's last point, 2^128, is past float's largest value: its q is +inf.
        const std::string first_unsafe = sweep.first_unsafe > FLT_MAX
                                             ? std::string("2^128 (inf)")
                                             : format_number("%.6g", sweep.first_unsafe);
        char line[200];
        std::snprintf(line, sizeof line, "  %-6s  %-14s %14.6g %13.6g %16s %15.6g %14.3e", name,
                      subtract_max ? "yes" : "no", sweep.largest_safe, double(stored),
                      first_unsafe.c_str(), analytic, relative);
        run.print(line);
        safe_record(f, subtract_max ? 1 : 0) = float(sweep.largest_safe);
        safe_rows.push_back({{"format", name},
                             {"subtract_max", subtract_max},
                             {"largest_safe_logit",
                              found ? nlohmann::json(sweep.largest_safe) : nlohmann::json(nullptr)},
                             {"stored_as", stored},
                             {"first_unsafe_logit", std::isfinite(sweep.first_unsafe)
                                                        ? nlohmann::json(sweep.first_unsafe)
                                                        : nlohmann::json(nullptr)},
                             {"analytic", analytic},
                             {"relative_difference", relative},
                             {"tolerance", tolerance},
                             {"unsafe_beyond", sweep.monotone}});
        // A sweep that found no limit draws no bar (and its check fails).
        (subtract_max ? measured_max : measured_no_max)
            .values.push_back(found ? std::log10(sweep.largest_safe) : 0.0);
        category += (subtract_max ? " and " : ": ") + format_number("%.5g", sweep.largest_safe);
        (subtract_max ? analytic_max : analytic_no_max).values.push_back(std::log10(analytic));
        const std::string what = subtract_max
                                     ? format_number("the largest finite value %.5g", analytic)
                                     : format_number("ln(largest finite) = %.4f", analytic);
        safe_checks.push_back(
            {std::string(name) + (subtract_max ? " with" : " without") +
                 " the max: the largest safe logit is " + what,
             found && sweep.monotone && relative <= tolerance, relative,
             "measured " + format_number("%.6g", sweep.largest_safe) +
                 ", |measured/analytic - 1| = " + format_number("%.3e", relative) + " (tolerance " +
                 format_number("%.3e", tolerance) +
                 (sweep.monotone ? "" : "; finite again past the first unsafe L") + ")"});
      }
      categories.push_back(category);
    }
    for (const SafeCheck& c : safe_checks) run.check(c.name, c.passed, c.value, c.detail);
    run.record("largest_safe_logits", safe_record, 0.0, "C");  // exact: the formats decide them
    {  // Block C's masks, exact: each format's own values.
      xt::xtensor<float, 1> masks = xt::zeros<float>({std::size_t{3}});
      std::size_t i = 0;
      for (const Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16})
        masks(i++) = minimodel::mask_value(precision);
      run.record("mask_value_fp32_bf16_fp16", masks, 0.0, "C");
      run.record("causal_mask_in_fp16", minimodel::causal_mask_in(4, Precision::fp16), 0.0, "C");
    }
    run.measure("largest_safe_logit", safe_rows);

    workbench::BarChart safe_chart;
    safe_chart.title =
        "Lab 11: the largest score for which attention stays finite (scores (L, 0), sums in "
        "fp32)";
    safe_chart.x_label = "storage format: the measured L without and with the max";
    safe_chart.y_label = "log10 of the largest safe logit L";
    safe_chart.categories = categories;
    safe_chart.series = {measured_no_max, analytic_no_max, measured_max, analytic_max};
    workbench::render_bar_chart(run.artifact("safe_logits.png"), safe_chart);

    // ---- Block C: RoPE's angles against position ----
    run.print();
    run.print("Checks 13-14 (Block C). rope_angles_in (d_head " + std::to_string(kRopeDHead) +
              ", theta 10000) at every position 0-" + std::to_string(kMaxPosition) +
              ", fp32 and bf16, against p · theta^(-2k/d_head) in float64; error: the largest "
              "|angle error| over the " +
              std::to_string(kRopeDHead / 2) + " frequencies k.");
    const Positions positions = xt::arange<std::int64_t>(0, kMaxPosition + 1);
    const Tensor2 angles_fp32 =
        minimodel::rope_angles_in(positions, kRopeDHead, kTheta, Precision::fp32);  // (P, d/2)
    const Tensor2 angles_bf16 =
        minimodel::rope_angles_in(positions, kRopeDHead, kTheta, Precision::bf16);  // (P, d/2)
    {  // For `workbook diff`: a few positions around bf16's 256, each format's angles. fp32 to 1e-6
       // of max(1, angle) at angles below 1000 (RopeAngles' tolerance); bf16 exact, as its tests.
      const Positions few = {0, 1, 255, 256, 257, 259, 1000};
      run.record("rope_angles_in_fp32", minimodel::rope_angles_in(few, 8, kTheta, Precision::fp32),
                 1e-3, "C");
      run.record("rope_angles_in_bf16", minimodel::rope_angles_in(few, 8, kTheta, Precision::bf16),
                 0.0, "C");
    }
    std::vector<double> frequencies(kRopeDHead / 2);
    for (std::size_t k = 0; k < frequencies.size(); ++k)
      frequencies[k] = std::pow(double(kTheta), -2.0 * double(k) / double(kRopeDHead));
    std::vector<double> error_fp32(positions.size()), error_bf16(positions.size());
    for (std::size_t p = 0; p < positions.size(); ++p)
      for (std::size_t k = 0; k < frequencies.size(); ++k) {
        const double exact = double(positions(p)) * frequencies[k];
        const double diff32 = std::abs(double(angles_fp32(p, k)) - exact);
        const double diff16 = std::abs(double(angles_bf16(p, k)) - exact);
        // A NaN counts as an infinite error: std::max would drop it.
        error_fp32[p] = std::max(error_fp32[p], std::isnan(diff32) ? HUGE_VAL : diff32);
        error_bf16[p] = std::max(error_bf16[p], std::isnan(diff16) ? HUGE_VAL : diff16);
      }
    run.print("  position   fp32 error (rad)   bf16 error (rad)");
    for (const std::int64_t p : {1, 16, 255, 256, 257, 1024, 4096, 8192, 16383, 16384}) {
      char line[96];
      std::snprintf(line, sizeof line, "  %8lld %18.3e %18.3e", static_cast<long long>(p),
                    error_fp32[std::size_t(p)], error_bf16[std::size_t(p)]);
      run.print(line);
    }
    const auto argmax = [](const std::vector<double>& values) {
      return std::size_t(std::max_element(values.begin(), values.end()) - values.begin());
    };
    const std::size_t worst_fp32 = argmax(error_fp32), worst_bf16 = argmax(error_bf16);
    run.print("  largest over every position: fp32 " +
              format_number("%.3e", error_fp32[worst_fp32]) + " at position " +
              std::to_string(worst_fp32) + ", bf16 " +
              format_number("%.3e", error_bf16[worst_bf16]) + " at position " +
              std::to_string(worst_bf16) +
              " (an error above pi leaves the pair's rotation no better than a random one)");
    run.check_max_abs_diff("fp32: angle error at every position up to " +
                               std::to_string(kMaxPosition) + " below 2^-23 · 16384",
                           error_fp32[worst_fp32], kFp32AngleBound);
    const double bf16_last = error_bf16.back();
    run.check("bf16: angle error at position " + std::to_string(kMaxPosition) + " above 1 rad",
              bf16_last > kBf16AngleFloor, bf16_last,
              format_number("%.3f rad", bf16_last) +
                  " (fp32: " + format_number("%.2e rad", error_fp32.back()) + ")");

    // The figure: the largest error over k and over the positions since the previous point, at
    // 8 points an octave from position 1 (position 0 is exact in both).
    std::vector<double> rope_x, rope_fp32, rope_bf16;
    nlohmann::json rope_rows = nlohmann::json::array();
    std::size_t from = 1;
    for (int j = 0; j <= 8 * 14; ++j) {
      const auto to = static_cast<std::size_t>(std::lround(std::exp2(j / 8.0)));
      if (to < from) continue;
      double worst32 = 0.0, worst16 = 0.0;
      for (std::size_t p = from; p <= to; ++p) {
        worst32 = std::max(worst32, error_fp32[p]);
        worst16 = std::max(worst16, error_bf16[p]);
      }
      rope_x.push_back(double(to));
      rope_fp32.push_back(worst32);
      rope_bf16.push_back(worst16);
      rope_rows.push_back({{"positions", {from, to}}, {"fp32", worst32}, {"bf16", worst16}});
      from = to + 1;
    }
    run.measure("rope_angle_error", rope_rows);
    workbench::LinePlot rope_plot;
    rope_plot.title = "Lab 11: RoPE angle error against position (d_head " +
                      std::to_string(kRopeDHead) + ", theta 10000)";
    rope_plot.x_label = "position p (each point: the largest error since the previous point)";
    rope_plot.y_label =
        "max over " + std::to_string(kRopeDHead / 2) + " k of |angle - float64 angle| (rad)";
    rope_plot.log_x = rope_plot.log_y = true;
    std::size_t rope_left_out = 0;
    for (const workbench::LineSeries& series : {drawable(rope_x, rope_fp32, "fp32", rope_left_out),
                                                drawable(rope_x, rope_bf16, "bf16", rope_left_out)})
      if (!series.x.empty()) rope_plot.series.push_back(series);
    rope_plot.series.push_back({{rope_x.front(), rope_x.back()},
                                {kPi, kPi},
                                "π rad: past it, as good as a random rotation"});
    workbench::render_line_plot(run.artifact("rope_angle_error.png"), rope_plot);
    if (rope_left_out > 0)
      run.print("(rope_angle_error.png leaves out " + std::to_string(rope_left_out) +
                " errors that are not finite or are 0: a log axis cannot show them)");
  });
}
