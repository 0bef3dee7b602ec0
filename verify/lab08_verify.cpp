// Lab 08 verify, in the order of the blocks: a KV cache takes the bytes its formula says, measured
// as it is allocated; decoding the toy sentence token by token, or as a prompt and then single
// tokens, gives lab 05's full causal forward; grouped-query and multi-query layers decode to their
// own full forward. Then two measurements, printed and kept in the manifest but never checked:
// the time of one generated token against its position, with the cache and by recomputing the
// prefix (time_per_token.png), and the cache of a 32-layer model with d_model 4096 against T for
// multi-head, grouped-query and multi-query attention in fp32 and fp16 (cache_bytes.png).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <cblas.h>   // OpenBLAS: cblas_sgemv, openblas_set_num_threads
#include <malloc.h>  // glibc: mallopt
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "explore/page_data.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/attention/kv_cache.hpp"
#include "util/heap_meter.hpp"

using lab_setup::embed_tokens;
using lab_setup::kDModel;
using lab_setup::kHeads;
using lab_setup::kSeed;
using lab_setup::toy_sentence;

using minimodel::BatchPositions;
using minimodel::GroupedQueryAttention;
using minimodel::KVCache;
using minimodel::RotaryPositionalEmbedding;
using minimodel::Tensor2;
using minimodel::Tensor3;

namespace {

// The lab 08 tests' tolerance against the full forward: decoding sums the same products in
// another order, so the two differ by a few units in the last place of the largest outputs
// (|y| near 3 here, where one unit is 2.4e-7). Differences are divided by max(1, max |y|).
constexpr double kTolerance = 1e-6;
constexpr float kTheta = 10000.0f;
constexpr std::size_t kPrompt = 5;  // check 4: a prompt of 5 tokens, then single tokens

// The realistic model of the cache figure: a LLaMA-2-7B-sized decoder (d_model 4096, 32 query
// heads of width 128, 32 layers), with 32, 8 or 1 key/value heads.
constexpr std::size_t kBigLayers = 32, kBigHeads = 32, kBigDHead = 128;
const std::vector<std::size_t> kBigKvHeads = {32, 8, 1};
constexpr double kBigParameters = 6.74e9;
constexpr std::size_t kMeasuredT = 1024;  // one layer's cache, allocated and measured (check 2)

// The timings: one thread, one untimed call, then the median of kRepetitions. An unoptimised build
// (CI's sanitizer run, at -O0) times short prefixes only, once each; the printout says so.
#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
const std::vector<std::size_t> kTimePositions = {128, 256, 512, 1024, 2048, 4096};
constexpr int kRepetitions = 3;
#else
constexpr bool kOptimised = false;
const std::vector<std::size_t> kTimePositions = {64, 128, 256};
constexpr int kRepetitions = 1;
#endif
constexpr std::size_t kTimeDModel = 512, kTimeHeads = 8, kTimeKvHeads = 8;

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

double elapsed_ms(const std::function<void()>& call) {  // wall-clock
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// One untimed call, then the median of kRepetitions.
double median_ms(const std::function<void()>& call) {
  call();
  std::vector<double> times;
  for (int i = 0; i < kRepetitions; ++i) times.push_back(elapsed_ms(call));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Tensor2 random_weight(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  xt::random::seed(seed);
  return xt::random::randn<float>({rows, cols}) / std::sqrt(float(rows));
}

GroupedQueryAttention make_layer(std::size_t d_model, std::size_t n_heads, std::size_t n_kv_heads,
                                 std::size_t max_len, std::uint64_t seed) {
  const std::size_t d_head = d_model / n_heads;
  return GroupedQueryAttention(random_weight(d_model, d_model, seed),
                               random_weight(d_model, n_kv_heads * d_head, seed + 1),
                               random_weight(d_model, n_kv_heads * d_head, seed + 2),
                               random_weight(d_model, d_model, seed + 3), n_heads, n_kv_heads,
                               RotaryPositionalEmbedding(kTheta, d_head, max_len));
}

// max |actual − expected| / max(1, max |expected|)
double scaled_diff(const Tensor3& actual, const Tensor3& expected) {
  return workbench::max_abs_diff(actual, expected) /
         std::max(1.0, double(xt::amax(xt::abs(expected))()));
}

BatchPositions first_positions(std::size_t T) {  // (1, T): 0 … T − 1
  BatchPositions positions({1, T});
  for (std::size_t t = 0; t < T; ++t) positions(0, t) = std::int64_t(t);
  return positions;
}

// x (1, T, d_model) fed to forward_step: the first `prompt` tokens as one chunk (none if 0), then
// one token at a time. -> (1, T, d_model)
Tensor3 decode(const GroupedQueryAttention& layer, const Tensor3& x, std::size_t prompt) {
  const std::size_t T = x.shape(1);
  const BatchPositions positions = first_positions(T);
  KVCache cache = layer.make_cache(1, T);
  Tensor3 y(x.shape());
  for (std::size_t from = 0; from < T;) {
    const std::size_t to = from == 0 && prompt > 0 ? prompt : from + 1;
    xt::view(y, xt::all(), xt::range(from, to)) =
        layer.forward_step(xt::view(x, xt::all(), xt::range(from, to)),
                           xt::view(positions, xt::all(), xt::range(from, to)), cache);
    from = to;
  }
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  const nlohmann::json config = lab_setup::toy_config({{"theta", kTheta},
                                                       {"prompt", kPrompt},
                                                       {"big_model",
                                                        {{"layers", kBigLayers},
                                                         {"n_heads", kBigHeads},
                                                         {"d_head", kBigDHead},
                                                         {"n_kv_heads", kBigKvHeads},
                                                         {"measured_T", kMeasuredT}}},
                                                       {"time_d_model", kTimeDModel},
                                                       {"time_n_heads", kTimeHeads},
                                                       {"time_n_kv_heads", kTimeKvHeads},
                                                       {"time_positions", kTimePositions},
                                                       {"time_threads", 1},
                                                       {"time_repetitions", kRepetitions}});
  return lab_setup::run(argc, argv, kSeed, config, [&](workbench::VerifyRun& run) {
    const auto& tokens = toy_sentence();
    const std::size_t T = tokens.size();
    const Tensor2 embedded = embed_tokens(tokens);  // (T, d_model)
    const Tensor3 x = xt::reshape_view(embedded, std::array<std::size_t, 3>{1, T, kDModel});
    const std::size_t d_head = kDModel / kHeads;

    // ---- Block A: the cache's bytes, by formula and by measurement ----
    run.print("Checks 1-2 (Block A). The bytes of a KV cache: 2 · B · H_kv · T_max · d_head · 4.");
    const GroupedQueryAttention gqa = make_layer(kDModel, kHeads, 2, T, kSeed + 1);
    const KVCache toy_cache = gqa.make_cache(1, T);
    const std::size_t toy_formula = 2 * 1 * 2 * T * d_head * sizeof(float);
    run.check("the toy layer's cache (B 1, H_kv 2, T_max 8, d_head 16): bytes() = the formula",
              toy_cache.bytes() == toy_formula, double(toy_cache.bytes()),
              std::to_string(toy_cache.bytes()) + " = " + std::to_string(toy_formula) + " bytes");
    // One layer of the big model per key/value layout, allocated: what malloc hands out must be
    // the formula, give or take the allocator's page rounding.
    std::vector<double> measured_bytes, formula_bytes;
    for (const std::size_t kv_heads : kBigKvHeads) {
      const double formula = 2.0 * double(kv_heads * kMeasuredT * kBigDHead * sizeof(float));
      const double measured = double(
          workbench::peak_extra_heap_bytes([&] { KVCache(1, kv_heads, kMeasuredT, kBigDHead); }));
      measured_bytes.push_back(measured);
      formula_bytes.push_back(formula);
      run.print("  one layer, H_kv " + std::to_string(kv_heads) + ", T_max " +
                std::to_string(kMeasuredT) + ", d_head 128, fp32: measured " + mib(measured) +
                ", formula " + mib(formula));
    }
    double worst = 0.0;
    for (std::size_t i = 0; i < measured_bytes.size(); ++i)
      worst = std::max(worst, std::abs(measured_bytes[i] / formula_bytes[i] - 1.0));
    run.check("each measured allocation is the formula to within 1%", worst <= 0.01, worst,
              "largest relative difference " + workbench::scientific(worst));

    // For `workbook diff`, Block A's cache on its own (exact: append and truncate copy values):
    // (B 2, H_kv 2, max_len 4, d_head 3), two tokens appended, sequence 1 cut to one, one more.
    {
      KVCache cache(2, 2, 4, 3);
      const minimodel::Tensor4 k =
          xt::reshape_view(xt::arange<float>(24) + 1.0f, std::array<std::size_t, 4>{2, 2, 2, 3});
      cache.append(k, -k);
      cache.truncate(1, 1);
      cache.append(xt::view(k, xt::all(), xt::all(), xt::range(0, 1)),
                   xt::view(-k, xt::all(), xt::all(), xt::range(0, 1)));
      run.record("kv_cache_keys", cache.keys(), 0.0, "A");
      run.record("kv_cache_values", cache.values(), 0.0, "A");
    }

    // ---- Block B: decoding equals the full forward ----
    run.print(
        "Checks 3-4 (Block B). Decoding <bos> I work , you work , he (d_model 64, H 4, "
        "H_kv 4, RoPE) against lab 05's rope_self_attention over the whole sentence; "
        "differences divided by max(1, max |y|).");
    const GroupedQueryAttention mha = make_layer(kDModel, kHeads, kHeads, T, kSeed + 1);
    const minimodel::Positions sentence_positions = xt::view(first_positions(T), 0);
    const minimodel::MultiHeadResult reference = minimodel::rope_self_attention(
        x, mha.w_q(), mha.w_k(), mha.w_v(), mha.w_o(), kHeads, *mha.rope(), sentence_positions);
    const Tensor3& full = reference.output;
    // The weights each decoding step must reproduce, a row per step, for the attention explorer:
    // `workbook explore 08`.
    workbench::save_page_data(
        run.artifact("explore.json"),
        workbench::lab_page("Lab 08: the causal RoPE weights that decoding with the KV cache "
                            "reproduces row by row (H 4 = H_kv, seeded weights)",
                            tokens, {reference.weights}));
    const Tensor3 token_by_token = decode(mha, x, 0);
    // Block B's kv_head (exact), RoPE at (B, T) positions (lab 05's tests' 1e-5) and forward_step
    // (kTolerance: the tests compare at scale max(1, max |y|), here absolute).
    xt::xtensor<float, 1> kv_head_of = xt::zeros<float>({kHeads});
    for (std::size_t h = 0; h < kHeads; ++h) kv_head_of(h) = float(gqa.kv_head(h));
    run.record("kv_head", kv_head_of, 0.0, "B");
    {
      const minimodel::Tensor4 rows = xt::reshape_view(xt::sin(xt::arange<float>(2 * 1 * 3 * 16)),
                                                       std::array<std::size_t, 4>{2, 1, 3, 16});
      const BatchPositions at = {{0, 1, 2}, {5, 7, 6}};
      run.record("rope_batch_positions", mha.rope()->apply(rows, at), 1e-5, "B");
    }
    run.record("forward_step_token_by_token", token_by_token, kTolerance, "B");
    run.check_max_abs_diff("one token at a time: equals the full causal forward",
                           scaled_diff(token_by_token, full), kTolerance);
    const Tensor3 prompt_then_tokens = decode(mha, x, kPrompt);
    run.check_max_abs_diff("a prompt of 5 as one chunk, then 3 single tokens: the same",
                           scaled_diff(prompt_then_tokens, full), kTolerance);

    // ---- Block C: grouped heads ----
    run.print(
        "Checks 5-6 (Block C). Grouped-query (H_kv 2) and multi-query (H_kv 1) layers, "
        "decoded token by token, against their own forward over the whole sentence (differences "
        "scaled as above).");
    const Tensor3 gqa_decoded = decode(gqa, x, 0);
    run.record("forward_step_gqa_token_by_token", gqa_decoded, kTolerance, "B");
    {
      const minimodel::Tensor4 kv = xt::reshape_view(xt::arange<float>(2 * 2 * 3 * 2),
                                                     std::array<std::size_t, 4>{2, 2, 3, 2});
      run.record("repeat_kv", minimodel::repeat_kv(kv, 2), 0.0, "C");  // exact: a copy
    }
    run.record("forward_gqa", gqa.forward(x, first_positions(T)), kTolerance, "C");
    run.check_max_abs_diff("H_kv 2: decoding equals forward",
                           scaled_diff(gqa_decoded, gqa.forward(x, first_positions(T))),
                           kTolerance);
    const GroupedQueryAttention mqa = make_layer(kDModel, kHeads, 1, T, kSeed + 1);
    run.check_max_abs_diff("H_kv 1: decoding equals forward",
                           scaled_diff(decode(mqa, x, 0), mqa.forward(x, first_positions(T))),
                           kTolerance);
    if (run.comparing()) return;  // workbook diff: what follows is time and memory

    // ---- Measurement: time per generated token ----
    // Freed memory stays in the process from here on. Otherwise glibc hands each large temporary
    // of `forward` back to the kernel, and the next call pays a page fault per 4 KiB on first
    // touch (tens of microseconds on these VMs): at S >= 2048 that, not the arithmetic, would
    // set the without-cache times.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks up to 32 MiB come from the heap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap is not trimmed below 1 GiB of free space
    const int threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    const std::size_t longest = kTimePositions.back();
    const GroupedQueryAttention timed =
        make_layer(kTimeDModel, kTimeHeads, kTimeKvHeads, longest + 1, kSeed + 1);
    xt::random::seed(kSeed);
    const Tensor3 text = xt::random::randn<float>({std::size_t{1}, longest + 1, kTimeDModel});
    const BatchPositions text_positions = first_positions(longest + 1);
    // One prefill of the longest prefix; each position then truncates the cache back to it, so
    // that a step at position S reads exactly S cached tokens.
    KVCache cache = timed.make_cache(1, longest + 1);
    timed.forward_step(xt::view(text, xt::all(), xt::range(0, longest)),
                       xt::view(text_positions, xt::all(), xt::range(0, longest)), cache);
    const std::string timing =
        (kRepetitions == 1 ? std::string("one call")
                           : "the median of " + std::to_string(kRepetitions) + " calls") +
        " after a warm-up" + (kOptimised ? "" : ", unoptimised build");
    run.print(
        "Time to generate the token at position S on one thread, d_model 512, H 8, H_kv 8, "
        "RoPE, " +
        timing + ", freed memory kept (measured, not checked):");
    run.print(
        "       S   with the cache   of which W_Q,K,V,O   without (forward over S + 1)   ratio");
    // Longest first: truncate only shortens, so each position cuts the cache back from the last.
    std::vector<double> xs, with_ms, projection_ms, without_ms;
    const Tensor2 one_token = xt::view(text, 0, xt::range(0, 1));  // (1, d_model)
    Tensor2 projected = Tensor2::from_shape({1, kTimeDModel});
    for (auto S = kTimePositions.rbegin(); S != kTimePositions.rend(); ++S) {
      auto next = xt::range(*S, *S + 1);
      const Tensor3 token = xt::view(text, xt::all(), next);
      const BatchPositions position = xt::view(text_positions, xt::all(), next);
      with_ms.insert(with_ms.begin(), median_ms([&] {
                       cache.truncate(0, *S);
                       timed.forward_step(token, position, cache);
                     }));
      // The part that does not grow with S: the four projections of one token, as the step does
      // them: GEMVs, W read once each.
      projection_ms.insert(
          projection_ms.begin(), median_ms([&] {
            for (const Tensor2* w : {&timed.w_q(), &timed.w_k(), &timed.w_v(), &timed.w_o()})
              cblas_sgemv(CblasRowMajor, CblasTrans, int(kTimeDModel), int(w->shape(1)), 1.0f,
                          w->data(), int(w->shape(1)), one_token.data(), 1, 0.0f, projected.data(),
                          1);
          }));
      const Tensor3 prefix = xt::view(text, xt::all(), xt::range(0, *S + 1));
      const BatchPositions prefix_positions =
          xt::view(text_positions, xt::all(), xt::range(0, *S + 1));
      without_ms.insert(without_ms.begin(),
                        median_ms([&] { timed.forward(prefix, prefix_positions); }));
      xs.insert(xs.begin(), double(*S));
    }
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      char line[128];
      std::snprintf(line, sizeof line, "%8.0f %13.3f ms %17.3f ms %27.3f ms %7.0fx", xs[i],
                    with_ms[i], projection_ms[i], without_ms[i], without_ms[i] / with_ms[i]);
      run.print(line);
      rows.push_back({{"S", xs[i]},
                      {"with_cache_ms", with_ms[i]},
                      {"projections_ms", projection_ms[i]},
                      {"without_cache_ms", without_ms[i]}});
    }
    openblas_set_num_threads(threads);
    run.measure("time_per_token", rows);

    workbench::LinePlot time_plot;
    time_plot.title =
        "Lab 08: time to generate one token at position S (d_model 512, H 8, H_kv 8, RoPE, one "
        "thread)" +
        std::string(kOptimised ? "" : ", unoptimised build");
    time_plot.x_label = "position S of the new token (tokens before it)";
    time_plot.y_label = "milliseconds per token";
    time_plot.log_x = true;
    time_plot.log_y = true;
    time_plot.series = {
        {xs, without_ms, "without a cache: forward over all S + 1 tokens"},
        {xs, with_ms, "with the cache: forward_step on one token"},
        {xs, projection_ms, "of which the projections W_Q, W_K, W_V, W_O (flat in S)"}};
    workbench::render_line_plot(run.artifact("time_per_token.png"), time_plot);

    // ---- Measurement: the cache of a real model ----
    run.print(
        "The KV cache of a 32-layer model with d_model 4096 and 32 query heads of width 128, "
        "batch 1 (2 · layers · B · H_kv · T · d_head · bytes; computed):");
    run.print("       T     MHA fp32    MHA fp16   GQA-8 fp16   MQA fp16");
    workbench::LinePlot bytes_plot;
    bytes_plot.title = "Lab 08: KV cache of a 32-layer, d_model 4096 model (batch 1)";
    bytes_plot.x_label = "tokens cached T";
    bytes_plot.y_label = "bytes";
    bytes_plot.log_x = true;
    bytes_plot.log_y = true;
    const std::vector<std::size_t> lengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
    const auto cache_bytes = [](std::size_t kv_heads, std::size_t length, std::size_t bytes) {
      return 2.0 * double(kBigLayers * kv_heads * length * kBigDHead * bytes);
    };
    for (const std::size_t bytes : {4u, 2u})
      for (const std::size_t kv_heads : kBigKvHeads) {
        workbench::LineSeries series{{},
                                     {},
                                     (kv_heads == kBigHeads ? "MHA"
                                      : kv_heads == 1       ? "MQA"
                                                            : "GQA") +
                                         std::string(", H_kv ") + std::to_string(kv_heads) +
                                         (bytes == 4 ? ", fp32" : ", fp16")};
        for (const std::size_t length : lengths) {
          series.x.push_back(double(length));
          series.y.push_back(cache_bytes(kv_heads, length, bytes));
        }
        bytes_plot.series.push_back(series);
      }
    // For scale: the weights of such a model (LLaMA 2 7B has 6.74e9 parameters) in fp16.
    bytes_plot.series.push_back({{double(lengths.front()), double(lengths.back())},
                                 {kBigParameters * 2.0, kBigParameters * 2.0},
                                 "the model's 6.74e9 weights in fp16, for scale"});
    nlohmann::json cache_rows = nlohmann::json::array();
    for (const std::size_t length :
         {std::size_t{256}, std::size_t{1024}, std::size_t{4096}, std::size_t{32768}}) {
      char line[128];
      std::snprintf(line, sizeof line, "%8zu %12s %11s %12s %10s", length,
                    gib(cache_bytes(32, length, 4)).c_str(),
                    gib(cache_bytes(32, length, 2)).c_str(), gib(cache_bytes(8, length, 2)).c_str(),
                    gib(cache_bytes(1, length, 2)).c_str());
      run.print(line);
      cache_rows.push_back({{"T", length},
                            {"mha_fp32_bytes", cache_bytes(32, length, 4)},
                            {"mha_fp16_bytes", cache_bytes(32, length, 2)},
                            {"gqa8_fp16_bytes", cache_bytes(8, length, 2)},
                            {"mqa_fp16_bytes", cache_bytes(1, length, 2)}});
    }
    run.measure("cache_bytes",
                {{"computed", cache_rows}, {"measured_one_layer_fp32_T1024", measured_bytes}});
    workbench::render_line_plot(run.artifact("cache_bytes.png"), bytes_plot);
  });
}
