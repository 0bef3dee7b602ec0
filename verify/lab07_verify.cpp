// Lab 07 verify, in the order of the blocks: the online softmax survives rows that start with -inf
// and rows with no key; a causal kernel skips the tiles above the diagonal (causal_tiles.png); the
// tiled layer equals lab 01's on the toy sentence, causal and not; and the heap bytes of one call
// grow as T² for lab 01 but as T for the tiled layer (memory_vs_T.png).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <cblas.h>  // OpenBLAS: openblas_set_num_threads
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "figures/heatmap.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "util/heap_meter.hpp"

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
const std::vector<std::size_t> kTiledLengths = {128, 256, 512, 1024, 2048, 4096};

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const nlohmann::json config = lab_setup::toy_config(
      {{"tiles", {{"queries", minimodel::Tiles{}.queries}, {"keys", minimodel::Tiles{}.keys}}},
       {"causal_tiles", {{"T", kTileT}, {"tile", kTile}}},
       {"memory_lab01_T", kLab01Lengths},
       {"memory_tiled_T", kTiledLengths}});
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
    run.record("tiled_attention_causal", tiled_head, kLongTolerance);
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
    tiles_figure.title = "Lab 07: causal attention, T = " + std::to_string(kTileT) + " in " +
                         std::to_string(kTile) + " x " + std::to_string(kTile) +
                         " tiles: " + std::to_string(counts.computed) + " computed, " +
                         std::to_string(counts.skipped) + " never computed";
    tiles_figure.panels = {grid};
    tiles_figure.row_axis = "query block";
    tiles_figure.col_axis = "key block";
    tiles_figure.colorbar_label = "share of the tile's scores that are kept";
    tiles_figure.excluded_label = "skipped: never computed";
    tiles_figure.annotate = true;
    workbench::render_heatmaps(run.artifact("causal_tiles.png"), tiles_figure);

    MultiHeadAttention layer(kDModel, kHeads, kSeed + 1);
    run.print(
        "Checks 5-6 (Block C). efficient_forward against lab 01's forward on <bos> I work , "
        "you work , he (d_model 64, H 4).");
    const Tensor3 tiled = minimodel::efficient_forward(layer, x);
    run.record("efficient_forward", tiled, kTolerance);
    run.check_max_abs_diff("not causal, tiles 64 x 64: equals MultiHeadAttention::forward",
                           workbench::max_abs_diff(tiled, layer.forward(x)), kTolerance);
    const Tensor3 tiled_causal = minimodel::efficient_forward(layer, x, true, {3, 3});
    run.record("efficient_forward_causal", tiled_causal, kTolerance);
    run.check_max_abs_diff(
        "causal, tiles 3 x 3: equals forward with causal_mask(8)",
        workbench::max_abs_diff(tiled_causal, layer.forward(x, minimodel::causal_mask(T))),
        kTolerance);

    // One thread, so that the bytes do not depend on the machine: each helper thread of a threaded
    // layer would add its own scratch.
    const int threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    run.print("Checks 7-8. Peak heap bytes of one call on one thread, d_model 64, H 4, causal:");
    run.print("       T   lab 01 forward   efficient_forward");
    std::vector<double> lab01_T, lab01_bytes, tiled_T, tiled_bytes;
    for (const std::size_t length : kTiledLengths) {
      xt::random::seed(kSeed + length);
      const Tensor3 tokens_x = xt::random::randn<float>({std::size_t{1}, length, kDModel});
      minimodel::efficient_forward(layer, tokens_x, true);  // sets up its reusable buffers
      const double tiled_peak = double(workbench::peak_extra_heap_bytes(
          [&] { minimodel::efficient_forward(layer, tokens_x, true); }));
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
      std::snprintf(line, sizeof line, "%8zu %16s %19s", length, lab01_text.c_str(),
                    mib(tiled_peak).c_str());
      run.print(line);
    }
    openblas_set_num_threads(threads);
    // Lab 01 keeps the (1, H, T, T) weights of every call: at least H·T² floats.
    const double stored = double(kHeads) * 1024.0 * 1024.0 * sizeof(float);
    run.check("lab 01 at T = 1024 allocates at least its weights, H·T² floats",
              lab01_bytes.back() >= stored, lab01_bytes.back(),
              mib(lab01_bytes.back()) + " >= " + mib(stored));
    const double t4096 = 4096.0 * 4096.0 * sizeof(float);
    run.check("efficient_forward at T = 4096 allocates less than one T x T float matrix",
              tiled_bytes.back() < t4096, tiled_bytes.back(),
              mib(tiled_bytes.back()) + " < " + mib(t4096));

    workbench::LinePlot memory;
    memory.title = "Lab 07: peak heap bytes of one call (d_model 64, H 4, causal)";
    memory.x_label = "sequence length T";
    memory.y_label = "bytes allocated during the call";
    memory.log_x = true;
    memory.log_y = true;
    memory.series = {
        {lab01_T, lab01_bytes, "lab 01 forward: stores (H, T, T) weights"},
        {tiled_T, tiled_bytes, "efficient_forward: its output; buffers reused across calls"}};
    workbench::render_line_plot(run.artifact("memory_vs_T.png"), memory);
  });
}
