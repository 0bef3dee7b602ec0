// The engine of `workbook bench`, one per implementation (bench-reference, bench-learner): times
// attention layers with Google Benchmark on a suite of shapes, and counts the heap bytes each call
// allocates beyond what was allocated before it. `workbook bench` runs it and prints the table.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include "minimodel/attention/attention.hpp"
#include "minimodel/implementation.hpp"

// ---- Heap accounting: every operator new of this process, so that a layer's temporaries count.
// (OpenBLAS allocates its buffers once, outside these calls, with its own allocator.)
namespace {

std::atomic<std::size_t> heap_in_use{0}, heap_peak{0};

void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const std::size_t now = heap_in_use += malloc_usable_size(p);
  for (std::size_t peak = heap_peak; now > peak && !heap_peak.compare_exchange_weak(peak, now);) {
  }
  return p;
}

void uncounted(void* p) noexcept {
  if (!p) return;
  heap_in_use -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new(std::size_t n, std::align_val_t alignment) {
  void* p = nullptr;
  const std::size_t a = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  return counted(posix_memalign(&p, a, n ? n : 1) == 0 ? p : nullptr);
}
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

namespace {

using minimodel::Tensor2;
using minimodel::Tensor3;

struct Shape {
  std::size_t T, d_model, n_heads;
};

// The suite of issue 10's measurements; --quick is for tests: a few milliseconds in all.
const std::vector<Shape> kSuite = {
    {128, 512, 8}, {512, 512, 8}, {1024, 768, 12}, {2048, 1024, 16}, {4096, 512, 8}};
const std::vector<Shape> kQuickSuite = {{32, 64, 4}, {64, 64, 4}};

// Multiply-adds counted twice: Q, K, V and the output projection, 4 · 2·T·d², then Q Kᵀ and
// P V, 2 · 2·T²·d. Causal attention is counted at the same FLOPs, so skipping the masked half
// shows as a higher rate.
double attention_flops(const Shape& s) {
  const double T = double(s.T), d = double(s.d_model);
  return 8.0 * T * d * d + 4.0 * T * T * d;
}

Tensor3 random_tokens(const Shape& s, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor3 x = Tensor3::from_shape({1, s.T, s.d_model});
  for (float& value : x) value = normal(generator);
  return x;
}

// Lab 01's MultiHeadAttention::forward on one sequence; the causal run adds lab 02's mask.
void time_lab01(benchmark::State& state, Shape shape, bool causal) {
  const Tensor3 x = random_tokens(shape, 2025);
  std::size_t peak_extra = 0;
  try {
    minimodel::MultiHeadAttention layer(shape.d_model, shape.n_heads, 2024);
    const std::optional<Tensor2> mask =
        causal ? std::optional<Tensor2>(minimodel::causal_mask(shape.T)) : std::nullopt;
    for (auto _ : state) {
      const std::size_t before = heap_in_use;
      heap_peak = before;
      Tensor3 y = layer.forward(x, mask);
      benchmark::DoNotOptimize(y.data());
      peak_extra = std::max(peak_extra, heap_peak - before);
    }
  } catch (const std::exception& e) {  // a learner's TODO stub, or a bug
    state.SkipWithError(e.what());
  }
  state.counters["flops"] = attention_flops(shape);
  state.counters["peak_extra_bytes"] = double(peak_extra);
}

}  // namespace

// bench-<impl> [--quick] [--threads N] [Google Benchmark's --benchmark_* flags]
int main(int argc, char** argv) {
  bool quick = false;
  int threads = 0;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
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

  for (const Shape& shape : quick ? kQuickSuite : kSuite)
    for (const bool causal : {false, true}) {
      // `workbook bench` reads the layer and the shape back from this name.
      const std::string name = "lab01/T:" + std::to_string(shape.T) +
                               "/d_model:" + std::to_string(shape.d_model) +
                               "/H:" + std::to_string(shape.n_heads) + (causal ? "/causal" : "");
      benchmark::RegisterBenchmark(name.c_str(), time_lab01, shape, causal)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }

  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_count, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
