// The engine of `workbook bench`, one per implementation (bench-reference, bench-learner): times
// attention layers with Google Benchmark on a suite of shapes, and counts the heap bytes each call
// allocates beyond what was allocated before it. `workbook bench` runs it and prints the table.
//
// The layers: lab01 (lab 01's forward with lab 02's mask) and lab07 (lab 07's efficient_forward),
// each as the implementation wrote it, OpenBLAS on --threads threads; and in bench-reference only,
// lab07_tuned, the tuned twin of lab 07's reference (workbench/fast_attention), on --threads
// threads of its own with OpenBLAS set to one thread while it is timed (its header's contract).
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include "bench/bench_suite.hpp"
#include "bench/tuned_layer.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/implementation.hpp"
#include "util/heap_meter.hpp"

namespace {

using minimodel::Tensor2;
using minimodel::Tensor3;

using Shape = workbench::BenchShape;

// Issue 10's suite is workbench::kBenchSuite; --quick is for tests: a few milliseconds in all.
const std::vector<Shape> kQuickSuite = {{32, 64, 4}, {64, 64, 4}};

Tensor3 random_tokens(const Shape& s, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor3 x = Tensor3::from_shape({1, s.T, s.d_model});
  for (float& value : x) value = normal(generator);
  return x;
}

// The layers timed, each on one sequence of random tokens with lab 01's seeded weights; with
// --bounds, the tuned layer's parts alone (issue 28): its four projections, its attention core.
enum class Layer { lab01, lab07, lab07_tuned, projections, core };

// Sets OpenBLAS's process-wide thread count for as long as it lives: this program owns its process.
class BlasThreads {
 public:
  explicit BlasThreads(int threads) : saved_(openblas_get_num_threads()) {
    openblas_set_num_threads(threads);
  }
  ~BlasThreads() { openblas_set_num_threads(saved_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

// --tiles Q,K: the tuned layer's tiles (0, 0: its own choice for this machine).
std::size_t tile_queries = 0, tile_keys = 0;

void time_layer(benchmark::State& state, Layer which, Shape shape, bool causal) {
  const Tensor3 x = random_tokens(shape, 2025);
  std::size_t peak_extra = 0;
  // The tuned layer runs the engine's thread count on its own threads, OpenBLAS on one.
  const std::size_t threads = std::size_t(std::max(1, openblas_get_num_threads()));
  std::optional<BlasThreads> one_blas_thread;
  const bool tuned =
      which == Layer::lab07_tuned || which == Layer::projections || which == Layer::core;
  if (tuned) one_blas_thread.emplace(1);
  const workbench::TunedPart part = which == Layer::projections ? workbench::TunedPart::projections
                                    : which == Layer::core      ? workbench::TunedPart::core
                                                                : workbench::TunedPart::whole;
  try {
    minimodel::MultiHeadAttention layer(shape.d_model, shape.n_heads, 2024);
    // Lab 01 with lab 02's mask; lab 07 skips the masked tiles instead.
    const std::optional<Tensor2> mask =
        causal && which == Layer::lab01 ? std::optional<Tensor2>(minimodel::causal_mask(shape.T))
                                        : std::nullopt;
    const auto run = [&](workbench::TunedPart what) {
      Tensor3 y =
          which == Layer::lab01 ? layer.forward(x, mask)
          : which == Layer::lab07
              ? minimodel::efficient_forward(layer, x, causal)
              : workbench::tuned_forward()(
                    layer, x, causal, workbench::TunedCall{threads, what, tile_queries, tile_keys});
      benchmark::DoNotOptimize(y.data());
    };
    const auto call = [&] { run(part); };
    // Untimed: the first touch of fresh memory, buffers a layer keeps for later calls; a whole
    // call, so that the core alone finds real queries, keys and values in the workspace.
    run(workbench::TunedPart::whole);
    for (auto _ : state) peak_extra = std::max(peak_extra, workbench::peak_extra_heap_bytes(call));
  } catch (const std::exception& e) {  // a learner's TODO stub, or a bug
    state.SkipWithError(e.what());
  }
  state.counters["flops"] = workbench::attention_flops(shape);
  state.counters["peak_extra_bytes"] = double(peak_extra);
}

// OpenBLAS's own SGEMM on (n, n) matrices: the rate that the layers' GEMMs could reach on these
// threads, measured in the same run, so that a layer's GF/s can be read as a share of it.
void time_sgemm(benchmark::State& state, std::size_t n) {
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  const auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, a.data(),
                int(n), b.data(), int(n), 0.0f, c.data(), int(n));
    benchmark::DoNotOptimize(c.data());
  };
  call();  // untimed: the first touch of c, OpenBLAS's thread pool
  for (auto _ : state) call();
  state.counters["flops"] = 2.0 * double(n) * double(n) * double(n);
}

}  // namespace

// bench-<impl> [--quick] [--bounds] [--threads N] [--tiles Q,K] [Google Benchmark's flags]
// --bounds (bench-reference; scripts/bench_torch.py --bounds runs it): instead of the three
// layers, the tuned layer whole and its two parts alone, rows lab07_tuned, projections and core:
// the projections are the same GEMMs on both sides of issue 28's comparison, so no attention core
// can make the layer faster than they allow.
// --tiles Q,K: the tuned layer runs tiles of Q queries x K keys, not its own choice (issue 28's
// A/B of fast::machine_tiles against lab 07's 64 x 64).
int main(int argc, char** argv) {
  // Google Benchmark prints each row to stdout as it finishes: line by line into a pipe too
  // (`workbook bench` reads one), not in 4 KiB blocks.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  bool quick = false, bounds = false;
  int threads = 0;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--bounds") {
      bounds = true;
    } else if (arg == "--tiles" && i + 1 < argc) {
      const std::string tiles = argv[++i];
      const std::size_t comma = tiles.find(',');
      tile_queries = std::size_t(std::atoi(tiles.c_str()));
      tile_keys =
          comma == std::string::npos ? 0 : std::size_t(std::atoi(tiles.c_str() + comma + 1));
      if (tile_queries == 0 || tile_keys == 0) {
        std::fprintf(stderr, "bench: --tiles must be Q,K, two positive numbers, not %s\n", argv[i]);
        return 2;
      }
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
      if (threads < 1) {
        std::fprintf(stderr, "bench: --threads must be a positive number, not %s\n", argv[i]);
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (threads > 0) openblas_set_num_threads(threads);
  benchmark::AddCustomContext("implementation", minimodel::implementation_name());
  benchmark::AddCustomContext("threads", std::to_string(openblas_get_num_threads()));
  benchmark::AddCustomContext("blas", openblas_get_config());

  // `workbook bench` reads n back from this name.
  const std::size_t sgemm_n = quick ? 128 : 2048;
  benchmark::RegisterBenchmark(("sgemm/n:" + std::to_string(sgemm_n)).c_str(), time_sgemm, sgemm_n)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  if (bounds && !workbench::tuned_forward()) {
    std::fprintf(stderr, "bench: --bounds times the tuned layer, which only bench-reference has\n");
    return 2;
  }
  using Named = std::pair<Layer, const char*>;
  const std::vector<Named> layers = bounds
                                        ? std::vector<Named>{{Layer::lab07_tuned, "lab07_tuned"},
                                                             {Layer::projections, "projections"},
                                                             {Layer::core, "core"}}
                                        : std::vector<Named>{{Layer::lab01, "lab01"},
                                                             {Layer::lab07, "lab07"},
                                                             {Layer::lab07_tuned, "lab07_tuned"}};
  for (const Shape& shape : quick ? kQuickSuite : workbench::kBenchSuite)
    for (const bool causal : {false, true})
      for (const auto& [which, layer_name] : layers) {
        if (which == Layer::lab07_tuned && !workbench::tuned_forward()) continue;
        // `workbook bench` reads the layer and the shape back from this name.
        const std::string name = std::string(layer_name) + "/T:" + std::to_string(shape.T) +
                                 "/d_model:" + std::to_string(shape.d_model) +
                                 "/H:" + std::to_string(shape.n_heads) + (causal ? "/causal" : "");
        // Its CPU time counts every thread of the process (the tuned layer's helpers, OpenBLAS's
        // threads): `workbook bench --json` reports it beside the wall time, as median_cpu_ms.
        benchmark::RegisterBenchmark(name.c_str(), time_layer, which, shape, causal)
            ->Unit(benchmark::kMillisecond)
            ->MeasureProcessCPUTime()
            ->UseRealTime();
      }

  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_count, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
