// Lab 07 verify, in the order of the blocks: the online softmax survives rows that start with -inf
// and rows with no key; a causal kernel skips the tiles above the diagonal (causal_tiles.png); the
// tiled layer equals lab 01's on the toy sentence, causal and not; and the heap bytes of one call
// grow as T² for lab 01 but as T for the tiled layer (memory_vs_T.png). Then two measurements,
// printed and kept in the manifest but never checked, since times on a shared machine drift 2×
// from run to run: the time of one call against T, lab 01's and the tiled layer's (time_vs_T.png),
// and the tiled layer's GF/s per shape of `workbook bench` (gflops_vs_torch.png), beside PyTorch's
// only when --torch times it in the same run on the same machine (scripts/bench_torch.py, run as a
// child of this program). The legends say what was measured: bytes per call, tiles skipped.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>  // getpid

#include <cblas.h>  // OpenBLAS: openblas_set_num_threads
#include <xtensor/xbuilder.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "bench/bench_suite.hpp"
#include "explore/page_data.hpp"
#include "figures/bar_chart.hpp"
#include "figures/heatmap.hpp"
#include "figures/line_plot.hpp"
#include "figures/measured_legends.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "util/heap_meter.hpp"
#include "util/process.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::MultiHeadAttention;
using minimodel::Tensor2;
using minimodel::Tensor3;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kTolerance = 1e-6;  // the lab 07 tests' tolerance against labs 00 and 01
// Check 3 sums up to 256 weighted values of size up to about 3 in another order than lab 00: the
// rounding differs by about sqrt(256) · 3 · 6e-8 = 3e-6 typically, so 1e-5, lab 01's tolerance.
constexpr double kLongTolerance = 1e-5;
constexpr std::size_t kTileT = 256, kTile = 32;
const std::vector<std::size_t> kLab01Lengths = {128, 256, 512, 1024};

// The timings: one thread, one untimed call, then the median of kRepetitions calls. An unoptimised
// build (CI's sanitizer run, at -O0) runs the kernel's loops many times slower, so it times the
// short lengths only, once each; the printout and the figures say so.
// Lab 01 stops earlier: it computes and stores (1, 8, T, T) weights, so its seven calls per length
// would take 2 s at T = 1024 and about 10 s at 2048, of the 15 s the timings may add to CI's run.
// The memory figure goes on to T = 16384 where the build is optimised (about 2 s more), and stops
// at T = 1024 where it is not (T = 4096 alone took 17 s of the sanitizer run).
#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
const std::vector<std::size_t> kTiledLengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
constexpr int kRepetitions = 3;
const std::vector<std::size_t> kTimeLab01Lengths = {128, 256, 512};
const std::vector<std::size_t> kTimeTiledLengths = {128, 256, 512, 1024, 2048, 4096};
#else
constexpr bool kOptimised = false;
const std::vector<std::size_t> kTiledLengths = {128, 256, 512, 1024};
constexpr int kRepetitions = 1;
const std::vector<std::size_t> kTimeLab01Lengths = {128, 256};
const std::vector<std::size_t> kTimeTiledLengths = {128, 256, 512};
#endif
constexpr std::size_t kTimeDModel = 512, kTimeHeads = 8;
// --torch: PyTorch's nn.MultiheadAttention timed by this Python, which must import torch.
const std::string kPython = "/usr/bin/python3";
const std::string kBenchTorch = "scripts/bench_torch.py";  // in the source tree

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// "the median of 3 calls after a warm-up", or what an unoptimised build measures instead.
std::string timing_text() {
  return (kRepetitions == 1 ? std::string("one call")
                            : "the median of " + std::to_string(kRepetitions) + " calls") +
         " after a warm-up" + (kOptimised ? "" : ", unoptimised build");
}

double elapsed_ms(const std::function<void()>& call) {  // wall-clock
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct CallTimes {
  double plain, causal;  // median ms of a call without and with the causal mask
};

// One layer on one input, not causal and causal, after one untimed call: the first touch of fresh
// memory and of the buffers efficient_forward keeps for later calls, which both variants share.
// The two alternate, so that whatever still settles after the warm-up weighs on both alike.
CallTimes time_calls(const std::function<void(bool causal)>& call) {
  call(false);
  std::vector<double> plain, causal;
  for (int i = 0; i < kRepetitions; ++i) {
    plain.push_back(elapsed_ms([&] { call(false); }));
    causal.push_back(elapsed_ms([&] { call(true); }));
  }
  return {median(plain), median(causal)};
}

Tensor3 random_tokens(std::size_t T, std::size_t d_model) {  // (1, T, d_model)
  xt::random::seed(kSeed + T);
  return xt::random::randn<float>({std::size_t{1}, T, d_model});
}

using ShapeKey = std::tuple<std::size_t, std::size_t, std::size_t, bool>;  // T, d_model, H, causal

std::string shape_text(const workbench::BenchShape& s) {
  return "(" + std::to_string(s.T) + ", " + std::to_string(s.d_model) + ", " +
         std::to_string(s.n_heads) + ")";
}

// torch MHA timed in this run, or why not.
struct TorchRun {
  std::map<ShapeKey, double> median_ms;  // empty: not measured
  std::string version;
  std::string note;  // "torch not measured: …" when median_ms is empty
};

// Runs scripts/bench_torch.py --torch-only on `shapes`, causal and not, on one thread (the script
// sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS from --threads before it imports torch), with the
// repetitions of this program's own timings, and reads what it records.
TorchRun measure_torch(const std::vector<workbench::BenchShape>& shapes) {
  TorchRun torch;
  workbench::CaptureOptions probe;
  probe.time_limit = std::chrono::seconds(60);
  try {
    if (!workbench::run_captured(kPython, {"-c", "import torch"}, probe).status.ok()) {
      torch.note = "torch not measured: no PyTorch at " + kPython;
      return torch;
    }
  } catch (const std::runtime_error&) {
    torch.note = "torch not measured: no " + kPython;
    return torch;
  }
  const std::filesystem::path record = std::filesystem::temp_directory_path() /
                                       ("lab07_torch_" + std::to_string(getpid()) + ".json");
  std::vector<std::string> args = {(workbench::source_dir() / kBenchTorch).string(),
                                   "--threads",
                                   "1",
                                   "--repetitions",
                                   std::to_string(kRepetitions),
                                   "--torch-only",
                                   "--record",
                                   record.string()};
  for (const workbench::BenchShape& s : shapes)
    args.insert(args.end(), {"--shape", std::to_string(s.T), std::to_string(s.d_model),
                             std::to_string(s.n_heads)});
  workbench::CaptureOptions options;
  options.on_line = [](const std::string& line) {  // progress, not kept: the table has the times
    if (line.rfind("wrote ", 0) != 0) std::cout << "  torch: " << line << std::endl;
  };
  options.time_limit = std::chrono::minutes(20);
  const workbench::CapturedRun run = workbench::run_captured(kPython, args, options);
  std::error_code ignored;
  if (!run.status.ok()) {
    std::filesystem::remove(record, ignored);
    torch.note = "torch not measured: " + kBenchTorch + " stopped (" + run.status.describe() + ")";
    return torch;
  }
  try {
    std::ifstream file(record);
    const nlohmann::json doc = nlohmann::json::parse(file);
    torch.version = doc.at("machine").at("torch").get<std::string>();
    for (const auto& row : doc.at("results"))
      torch.median_ms[{row.at("T").get<std::size_t>(), row.at("d_model").get<std::size_t>(),
                       row.at("n_heads").get<std::size_t>(), row.at("causal").get<bool>()}] =
          row.at("median_ms").at("torch MHA").get<double>();
  } catch (const nlohmann::json::exception& e) {
    torch.median_ms.clear();
    torch.note = "torch not measured: " + kBenchTorch + " recorded no figures (" + e.what() + ")";
  }
  std::filesystem::remove(record, ignored);
  for (const workbench::BenchShape& s : shapes)
    for (const bool causal : {false, true})
      if (!torch.median_ms.empty() &&
          torch.median_ms.count({s.T, s.d_model, s.n_heads, causal}) == 0) {
        torch.median_ms.clear();
        torch.note = "torch not measured: " + kBenchTorch + " left out " + shape_text(s);
      }
  return torch;
}

// The verify run; main() takes --torch out of the options first.
int verify_lab07(int argc, char** argv, bool torch_requested, const std::string& torch_hint) {
  nlohmann::json bench_suite = nlohmann::json::array();
  for (const workbench::BenchShape& s : workbench::kBenchSuite)
    bench_suite.push_back({{"T", s.T}, {"d_model", s.d_model}, {"n_heads", s.n_heads}});
  const nlohmann::json config = lab_setup::toy_config(
      {{"tiles", {{"queries", minimodel::Tiles{}.queries}, {"keys", minimodel::Tiles{}.keys}}},
       {"causal_tiles", {{"T", kTileT}, {"tile", kTile}}},
       {"memory_lab01_T", kLab01Lengths},
       {"memory_tiled_T", kTiledLengths},
       {"time_d_model", kTimeDModel},
       {"time_n_heads", kTimeHeads},
       {"time_lab01_T", kTimeLab01Lengths},
       {"time_tiled_T", kTimeTiledLengths},
       {"time_threads", 1},
       {"time_repetitions", kRepetitions},
       {"bench_suite", bench_suite},
       {"torch", torch_requested}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Tensor2 embedded = embed_tokens(tokens);  // (T, d_model)
    const Tensor3 x = xt::reshape_view(embedded, std::array<std::size_t, 3>{1, T, kDModel});

    run.print(
        "Checks 1-2 (Block A). online_softmax on rows that start with -inf, and a row with no "
        "key.");
    const Tensor2 scores = {{-kInf, -kInf, 0.5f, 2.0f, -kInf}, {-kInf, -kInf, -kInf, -kInf, -kInf}};
    const Tensor2 weights = minimodel::online_softmax(scores);
    run.print_matrix("online_softmax", weights);
    run.record("online_softmax", weights, kTolerance, "A");
    const Tensor2 finite = {{0.5f, 2.0f}};
    Tensor2 expected = xt::zeros<float>({2, 5});
    xt::view(expected, 0, xt::range(2, 4)) = xt::view(minimodel::softmax(finite), 0);
    run.check_max_abs_diff("-inf first: the weights of the finite scores, 0 elsewhere",
                           workbench::max_abs_diff(xt::view(weights, 0), xt::view(expected, 0)),
                           kTolerance);
    run.check_max_abs_diff("every score -inf: zeros, not NaN",
                           workbench::max_abs_diff(xt::view(weights, 1), xt::view(expected, 1)),
                           0.0);

    run.print("Checks 3-4 (Block B). Causal attention of one head over T = " +
              std::to_string(kTileT) + " in " + std::to_string(kTile) + " x " +
              std::to_string(kTile) + " tiles (q = k = v, d_head 16).");
    xt::random::seed(kSeed);
    const Tensor2 q = xt::random::randn<float>({kTileT, std::size_t{16}});
    minimodel::TileCounts counts;
    minimodel::TiledOptions options;
    options.causal = true;
    options.tiles = {kTile, kTile};
    options.counts = &counts;
    const Tensor2 tiled_head = minimodel::tiled_attention(q, q, q, options);
    run.record("tiled_attention_causal", tiled_head, kLongTolerance, "B");
    run.check_max_abs_diff(
        "equals single_head_attention with causal_mask(" + std::to_string(kTileT) + ")",
        workbench::max_abs_diff(
            tiled_head,
            minimodel::single_head_attention(q, q, q, minimodel::causal_mask(kTileT)).output),
        kLongTolerance);
    const std::size_t blocks = kTileT / kTile;
    run.check(
        "only the tiles on and below the diagonal are computed",
        counts.computed == blocks * (blocks + 1) / 2 && counts.skipped == blocks * (blocks - 1) / 2,
        double(counts.skipped),
        std::to_string(counts.computed) + " computed, " + std::to_string(counts.skipped) +
            " skipped of " + std::to_string(blocks * blocks));
    // Each tile's share of scores that count: 1 below the diagonal, (b + 1) / 2b on it.
    workbench::HeatmapPanel grid{xt::zeros<float>({blocks, blocks}),
                                 "the tiles a causal kernel needs (check 4 counts yours)",
                                 xt::zeros<bool>({blocks, blocks})};
    for (std::size_t i = 0; i < blocks; ++i)
      for (std::size_t j = 0; j < blocks; ++j) {
        grid.values(i, j) = j < i ? 1.0f : j == i ? float(kTile + 1) / float(2 * kTile) : 0.0f;
        grid.excluded(i, j) = j > i;
      }
    workbench::HeatmapFigure tiles_figure;
    // The grid shows the tiles needed; what this run's kernel did is its counts, in the title.
    tiles_figure.title = "Lab 07: causal attention, T = " + std::to_string(kTileT) + " in " +
                         std::to_string(kTile) + " x " + std::to_string(kTile) +
                         " tiles; this run computed " + std::to_string(counts.computed) +
                         ", skipped " + std::to_string(counts.skipped);
    tiles_figure.panels = {grid};
    tiles_figure.row_axis = "query block";
    tiles_figure.col_axis = "key block";
    tiles_figure.colorbar_label = "share of the tile's scores that are kept";
    tiles_figure.excluded_label = "above the diagonal: not needed";
    tiles_figure.annotate = true;
    workbench::render_heatmaps(run.artifact("causal_tiles.png"), tiles_figure);

    MultiHeadAttention layer(kDModel, kHeads, kSeed + 1);
    run.print(
        "Checks 5-6 (Block C). efficient_forward against lab 01's forward on <bos> I work , "
        "you work , he (d_model 64, H 4).");
    const Tensor3 tiled = minimodel::efficient_forward(layer, x);
    run.record("efficient_forward", tiled, kTolerance, "C");
    run.check_max_abs_diff("not causal, tiles 64 x 64: equals MultiHeadAttention::forward",
                           workbench::max_abs_diff(tiled, layer.forward(x)), kTolerance);
    const Tensor3 tiled_causal = minimodel::efficient_forward(layer, x, true, {3, 3});
    run.record("efficient_forward_causal", tiled_causal, kTolerance, "C");
    run.check_max_abs_diff(
        "causal, tiles 3 x 3: equals forward with causal_mask(8)",
        workbench::max_abs_diff(tiled_causal, layer.forward(x, minimodel::causal_mask(T))),
        kTolerance);
    // For the attention explorer (`workbook explore 07`): the causal weights efficient_forward
    // never stores, from tiled_attention itself. With v = the identity (T, T), its output row t
    // is query t's weights over the keys: out = P I = P.
    {
      const minimodel::Tensor4 q_heads =
          minimodel::split_heads(minimodel::project(x, layer.w_q()), kHeads);  // (1, H, T, d_head)
      const minimodel::Tensor4 k_heads =
          minimodel::split_heads(minimodel::project(x, layer.w_k()), kHeads);
      const Tensor2 identity = xt::eye<float>(T);
      minimodel::TiledOptions causal_tiles;
      causal_tiles.causal = true;
      causal_tiles.tiles = {3, 3};
      minimodel::Tensor4 heads = xt::zeros<float>({std::size_t{1}, kHeads, T, T});  // (1, H, T, T)
      for (std::size_t h = 0; h < kHeads; ++h) {
        const Tensor2 q_h = xt::view(q_heads, 0, h);  // (T, d_head)
        const Tensor2 k_h = xt::view(k_heads, 0, h);
        xt::view(heads, 0, h) = minimodel::tiled_attention(q_h, k_h, identity, causal_tiles);
      }
      workbench::save_page_data(
          run.artifact("explore.json"),
          workbench::lab_page("Lab 07: the causal weights tiled_attention never stores (tiles 3 "
                              "x 3, v = the identity), lab 01's layer over the sentence",
                              tokens, {heads}));
    }
    if (run.comparing()) return;  // workbook diff: what follows is memory and time

    // One thread, so that the bytes do not depend on the machine: each helper thread of a
    // threaded layer would add its own scratch.
    const int threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    run.print(
        "Checks 7-8. Peak heap bytes of one call on one thread, d_model 64, H 4, causal "
        "(efficient_forward: a second call on the same input, and the first):");
    run.print("       T   lab 01 forward   efficient_forward   first call");
    std::vector<double> lab01_T, lab01_bytes, tiled_T, tiled_bytes;
    workbench::CallHeapBytes longest;  // efficient_forward's at the longest T
    for (const std::size_t length : kTiledLengths) {
      xt::random::seed(kSeed + length);
      const Tensor3 tokens_x = xt::random::randn<float>({std::size_t{1}, length, kDModel});
      // The first call at a length sets up whatever buffers a layer keeps for later calls.
      const auto call = [&] { minimodel::efficient_forward(layer, tokens_x, true); };
      longest.first_call = double(workbench::peak_extra_heap_bytes(call));
      longest.second_call = double(workbench::peak_extra_heap_bytes(call));
      longest.output = double(length * kDModel * sizeof(float));
      const double tiled_peak = longest.second_call;
      tiled_T.push_back(double(length));
      tiled_bytes.push_back(tiled_peak);
      std::string lab01_text = "";
      if (std::find(kLab01Lengths.begin(), kLab01Lengths.end(), length) != kLab01Lengths.end()) {
        const minimodel::Tensor2 mask = minimodel::causal_mask(length);
        const double peak =
            double(workbench::peak_extra_heap_bytes([&] { layer.forward(tokens_x, mask); }));
        lab01_T.push_back(double(length));
        lab01_bytes.push_back(peak);
        lab01_text = mib(peak);
      }
      char line[96];
      std::snprintf(line, sizeof line, "%8zu %16s %19s %12s", length, lab01_text.c_str(),
                    mib(tiled_peak).c_str(), mib(longest.first_call).c_str());
      run.print(line);
    }
    const std::string tiled_memory =
        workbench::heap_bytes_legend("efficient_forward", kTiledLengths.back(), longest);
    run.print("memory_vs_T.png's legend, from the bytes at T = " +
              std::to_string(kTiledLengths.back()) + ": " + tiled_memory);
    openblas_set_num_threads(threads);
    // Lab 01 keeps the (1, H, T, T) weights of every call: at least H·T² floats.
    const double stored = double(kHeads) * 1024.0 * 1024.0 * sizeof(float);
    run.check("lab 01 at T = 1024 allocates at least its weights, H·T² floats",
              lab01_bytes.back() >= stored, lab01_bytes.back(),
              mib(lab01_bytes.back()) + " >= " + mib(stored));
    // At T = 4096, or at an unoptimised build's longest, 1024.
    const std::size_t at = std::min<std::size_t>(5, tiled_T.size() - 1);
    const double one_matrix = tiled_T[at] * tiled_T[at] * sizeof(float);
    run.check("efficient_forward at T = " + std::to_string(std::size_t(tiled_T[at])) +
                  " allocates less than one T x T float matrix",
              tiled_bytes[at] < one_matrix, tiled_bytes[at],
              mib(tiled_bytes[at]) + " < " + mib(one_matrix));
    // What lab 01's weights alone would take beyond T = 1024: H·T² floats, computed, not run.
    std::vector<double> weights_bytes;
    for (const double length : tiled_T)
      weights_bytes.push_back(double(kHeads) * length * length * sizeof(float));

    workbench::LinePlot memory;
    memory.title = "Lab 07: peak heap bytes of one call (d_model 64, H 4, causal)";
    memory.x_label = "sequence length T";
    memory.y_label = "bytes allocated during the call";
    memory.log_x = true;
    memory.log_y = true;
    memory.series = {
        {lab01_T, lab01_bytes, "lab 01 forward: stores (H, T, T) weights"},
        {tiled_T, tiled_bytes, tiled_memory},
        {tiled_T, weights_bytes, "lab 01's weights alone, H·T² floats (computed, not run)"}};
    workbench::render_line_plot(run.artifact("memory_vs_T.png"), memory);

    // Times, on one thread as above, so that they do not depend on the machine's core count.
    openblas_set_num_threads(1);
    // efficient_forward's times per (T, d_model, H), shared by both tables.
    std::map<std::tuple<std::size_t, std::size_t, std::size_t>, CallTimes> tiled_ms;
    const auto time_tiled = [&](const MultiHeadAttention& timed, const Tensor3& tokens_x) {
      const auto key = std::make_tuple(tokens_x.shape(1), timed.d_model(), timed.n_heads());
      if (tiled_ms.count(key) == 0)
        tiled_ms[key] =
            time_calls([&](bool causal) { minimodel::efficient_forward(timed, tokens_x, causal); });
      return tiled_ms.at(key);
    };
    const std::string sizes =
        "d_model " + std::to_string(kTimeDModel) + ", H " + std::to_string(kTimeHeads);
    run.print("Time of one call on one thread, " + sizes + ", " + timing_text() +
              " (measured, not checked):");
    run.print("       T   lab 01 forward   + causal mask   efficient_forward     causal");
    MultiHeadAttention wide(kTimeDModel, kTimeHeads, kSeed + 1);
    std::vector<workbench::LineSeries> time_series = {
        {{}, {}, "lab 01 forward"},
        {{}, {}, "lab 01 forward with causal_mask(T): computes every score"},
        {{}, {}, "efficient_forward"},
        {{},
         {},
         workbench::causal_skip_legend("efficient_forward", counts.skipped,
                                       blocks * (blocks - 1) / 2)}};
    nlohmann::json time_rows = nlohmann::json::array();
    for (const std::size_t length : kTimeTiledLengths) {
      const Tensor3 tokens_x = random_tokens(length, kTimeDModel);
      std::vector<double> columns;  // in the order of time_series; lab 01's only up to its last T
      if (std::find(kTimeLab01Lengths.begin(), kTimeLab01Lengths.end(), length) !=
          kTimeLab01Lengths.end()) {
        const std::optional<Tensor2> mask = minimodel::causal_mask(length);
        const std::optional<Tensor2> none = std::nullopt;
        const CallTimes lab01 =
            time_calls([&](bool causal) { wide.forward(tokens_x, causal ? mask : none); });
        columns = {lab01.plain, lab01.causal};
      } else {
        columns = {std::nan(""), std::nan("")};
      }
      const CallTimes tiled_times = time_tiled(wide, tokens_x);
      columns.insert(columns.end(), {tiled_times.plain, tiled_times.causal});
      std::string cells[4];
      for (std::size_t column = 0; column < 4; ++column) {
        const double ms = columns[column];
        if (std::isnan(ms)) continue;
        time_series[column].x.push_back(double(length));
        time_series[column].y.push_back(ms);
        cells[column] = fixed(ms, 2) + " ms";
        time_rows.push_back({{"layer", column < 2 ? "lab01 forward" : "efficient_forward"},
                             {"T", length},
                             {"d_model", kTimeDModel},
                             {"n_heads", kTimeHeads},
                             {"causal", column % 2 == 1},
                             {"median_ms", ms}});
      }
      char line[128];
      std::snprintf(line, sizeof line, "%8zu %16s %15s %19s %10s", length, cells[0].c_str(),
                    cells[1].c_str(), cells[2].c_str(), cells[3].c_str());
      run.print(line);
    }
    run.measure("time_vs_T", time_rows);

    workbench::LinePlot time_plot;
    time_plot.title = "Lab 07: time of one call on one thread (" + sizes + "), " + timing_text();
    time_plot.x_label = "sequence length T";
    time_plot.y_label = "milliseconds per call";
    time_plot.log_x = true;
    time_plot.log_y = true;
    time_plot.series = time_series;
    workbench::render_line_plot(run.artifact("time_vs_T.png"), time_plot);

    // GF/s on `workbook bench`'s suite; an unoptimised build times only its short shapes.
    std::vector<workbench::BenchShape> rate_shapes;
    for (const workbench::BenchShape& s : workbench::kBenchSuite)
      if (s.T <= kTimeTiledLengths.back()) rate_shapes.push_back(s);
    std::vector<CallTimes> rate_times;
    for (const workbench::BenchShape& s : rate_shapes) {
      const MultiHeadAttention layer_s(s.d_model, s.n_heads, kSeed + 1);
      rate_times.push_back(time_tiled(layer_s, random_tokens(s.T, s.d_model)));
    }
    openblas_set_num_threads(threads);
    TorchRun torch;
    if (torch_requested) {
      run.print("Timing torch MHA on the same shapes (--torch): " + kPython + " " + kBenchTorch +
                " --torch-only --threads 1 --repetitions " + std::to_string(kRepetitions));
      torch = measure_torch(rate_shapes);
    } else {
      torch.note = "torch not measured: " + torch_hint + " times it";
    }
    const bool with_torch = !torch.median_ms.empty();
    run.print(
        "GF/s on one thread on the shapes of `workbook bench`, FLOPs counted as it counts "
        "them, causal or not (measured, not checked):");
    run.print("efficient_forward: " + timing_text() +
              (with_torch ? "; torch MHA (nn.MultiheadAttention, torch " + torch.version +
                                "): the same, in this run, on one thread"
                          : "; " + torch.note));
    run.print(std::string("     T  d_model    H  causal   efficient_forward ms     GF/s") +
              (with_torch ? "   torch MHA ms     GF/s   ratio" : ""));
    std::vector<workbench::ShapeRates> ours_rates, torch_rates;
    nlohmann::json rate_rows = nlohmann::json::array();
    for (std::size_t i = 0; i < rate_shapes.size(); ++i) {
      const workbench::BenchShape& s = rate_shapes[i];
      workbench::ShapeRates ours{shape_text(s)}, theirs{shape_text(s)};
      for (const bool causal : {false, true}) {
        const double ms = causal ? rate_times[i].causal : rate_times[i].plain;
        const double gflops = workbench::attention_flops(s) / (ms * 1e6);
        (causal ? ours.causal : ours.plain) = gflops;
        char line[160];
        int n = std::snprintf(line, sizeof line, "%6zu %8zu %4zu %7s %22.2f %8.1f", s.T, s.d_model,
                              s.n_heads, causal ? "yes" : "no", ms, gflops);
        nlohmann::json row = {{"T", s.T},         {"d_model", s.d_model}, {"n_heads", s.n_heads},
                              {"causal", causal}, {"median_ms", ms},      {"gflops_per_s", gflops}};
        if (with_torch) {
          const double torch_ms = torch.median_ms.at({s.T, s.d_model, s.n_heads, causal});
          const double torch_gflops = workbench::attention_flops(s) / (torch_ms * 1e6);
          (causal ? theirs.causal : theirs.plain) = torch_gflops;
          std::snprintf(line + n, sizeof line - std::size_t(n), " %14.2f %8.1f %7.2f", torch_ms,
                        torch_gflops, gflops / torch_gflops);
          row["torch_mha_median_ms"] = torch_ms;
          row["torch_mha_gflops_per_s"] = torch_gflops;
          row["ratio"] = gflops / torch_gflops;
        }
        run.print(line);
        rate_rows.push_back(row);
      }
      ours_rates.push_back(ours);
      if (with_torch) torch_rates.push_back(theirs);
    }
    if (!kOptimised)
      run.print("(unoptimised build: only the shapes with T <= " +
                std::to_string(kTimeTiledLengths.back()) + ")");
    if (with_torch)
      run.print(
          "ratio = efficient_forward's GF/s / torch MHA's, both timed in this run: above 1, "
          "efficient_forward is faster.");
    run.measure("gflops_vs_torch", {{"torch",
                                     {{"requested", torch_requested},
                                      {"measured", with_torch},
                                      {"version", torch.version},
                                      {"note", with_torch ? "" : torch.note}}},
                                    {"rows", rate_rows}});

    const workbench::BarChart rate_chart =
        workbench::rates_per_shape_chart("Lab 07: GF/s on one thread per shape of workbook bench" +
                                             std::string(kOptimised ? "" : " (unoptimised build)"),
                                         "efficient_forward", ours_rates, torch_rates, torch.note);
    workbench::render_bar_chart(run.artifact("gflops_vs_torch.png"), rate_chart);
  });
}

}  // namespace

int main(int argc, char** argv) {
  // --torch is this program's own option; the verify frame parses the rest.
  bool torch_requested = false, help = false;
  std::vector<char*> frame_args;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    help = help || arg == "--help" || arg == "-h";
    if (arg == "--torch")
      torch_requested = true;
    else
      frame_args.push_back(argv[i]);
  }
  // The command that adds torch, as the learner would type it from the repository's top.
  std::filesystem::path self = argv[0];
  if (self.is_absolute()) {
    const std::filesystem::path inside = self.lexically_relative(workbench::source_dir());
    self = !inside.empty() && *inside.begin() != ".." ? inside : self.filename();
  }
  const std::string torch_hint = self.string() + " --torch";
  const int status =
      verify_lab07(int(frame_args.size()), frame_args.data(), torch_requested, torch_hint);
  if (help)
    std::cout << "Lab 07's own option:\n  --torch   also time PyTorch's nn.MultiheadAttention "
                 "on the GF/s shapes, in this run on one thread, with "
              << kPython << " " << kBenchTorch << " (needs torch there; adds torch's time)\n";
  return status;
}
