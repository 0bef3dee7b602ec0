// Lab 14 verify: attention across processes. Runs on 4 MPI ranks (`workbook verify 14` and ctest
// start them with mpiexec; run alone it is one rank and checks P = 1 only), split into groups of
// 1, 2 and 4 ranks for each scheme:
//   Block A: tensor-parallel heads equal lab 01's layer (and lab 02's causal one); each rank sends
//            one all-reduce of T · d_model floats per layer.
//   Block B: ring attention equals lab 02's causal attention in both layouts; each rank sends
//            P − 1 blocks of K and V; the causal work per rank, contiguous against zig-zag.
//   Block C: data-parallel training of lab 10's model: the loss curve of 1, 2 and 4 ranks against
//            the single-process run's; each rank sends every parameter (and the loss sum) once a
//            step.
// Measured, not checked: what a ring all-reduce really sends (a hand-written one, counted), and
// 1 against 2 ranks on this machine: wall time, CPU time, and the split between computing and
// communicating, with the load average. Writes bytes_vs_formula.png, causal_work.png,
// time_split.png and loss_curves.png.
//
// Only rank 0 prints and writes; every rank runs the same collective code. A TODO stub throws on
// every rank at the same call; any other error on one rank stops the whole job (MPI_Abort) after
// printing it, since the other ranks may be waiting for it in a collective.
#include <mpi.h>
#include <time.h>  // clock_gettime

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

#include "figures/bar_chart.hpp"
#include "figures/line_plot.hpp"
#include "lab_setup.hpp"
#include "minimodel/distributed/distributed_attention.hpp"
#include "minimodel/todo.hpp"

extern "C" void openblas_set_num_threads(int threads);  // one BLAS thread per rank

using minimodel::comm_stats;
using minimodel::reset_comm_stats;
using minimodel::SequenceLayout;
using minimodel::Tensor2;
using workbench::scientific;

namespace {

#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
#else
constexpr bool kOptimised = false;  // the sanitizer build: smaller timings, a shorter training
#endif

// The checks' sizes: lab 01's toy layer on 64 tokens, one head of 64 over 256 tokens for the ring
// (blocks of 64, or 32 in zig-zag, on 4 ranks), lab 10's test model for the training.
constexpr std::size_t kT = 64, kDModel = 64, kHeads = 4;
constexpr std::size_t kRingT = 256, kRingD = 64;
const minimodel::ModelConfig kModel{16, 16, 32, 4, 2};  // V, max_len, d_model, heads, layers
constexpr std::size_t kBatch = 16;
constexpr int kSteps = kOptimised ? 60 : 3;  // every rank trains 1 + 3 runs; at -O0: seconds each
constexpr float kLearningRate = 1e-2f;
// Tolerances: as the lab's tests (float32 rounding of sums taken in another grouping), and for
// the loss curves the tests' 1e-5, which 60 steps stay well within (the printout shows by how
// much).
constexpr double kTolerance = 1e-5, kLossTolerance = 1e-5;
// The timings of 1 against 2 ranks: sizes that take tens of milliseconds a call at -O3.
constexpr std::size_t kTimeT = kOptimised ? 512 : 64, kTimeD = kOptimised ? 512 : 64,
                      kTimeHeads = 8, kTimeRingT = kOptimised ? 2048 : 128, kTimeBatch = 32;
constexpr int kRepeats = kOptimised ? 5 : 1;

int world_rank() { return minimodel::rank_of(MPI_COMM_WORLD); }
int world_size() { return minimodel::size_of(MPI_COMM_WORLD); }

Tensor2 normal(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  return lab_setup::normal_rows(rows, cols, seed);
}
Tensor2 take_rows(const Tensor2& t, const std::vector<std::size_t>& rows) {
  Tensor2 out({rows.size(), t.shape(1)});
  for (std::size_t i = 0; i < rows.size(); ++i) xt::row(out, i) = xt::row(t, rows[i]);
  return out;
}
minimodel::TokenBatch batch_of_step(std::size_t sequences, int step) {
  std::mt19937_64 rng(lab_setup::kSeed + 100 + std::uint64_t(step));
  return minimodel::copy_task(sequences, kModel.max_len, kModel.vocab, rng).tokens;
}

double max_over(MPI_Comm comm, double value) {
  double most = value;
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
  return most;
}
// `value` of every rank of MPI_COMM_WORLD, on every rank.
std::vector<double> gather(double value) {
  std::vector<double> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  return all;
}

// The groups of P consecutive ranks for each P of 1, 2, 4 that divides the world.
std::vector<int> group_sizes() {
  std::vector<int> sizes;
  for (const int P : {1, 2, 4})
    if (P <= world_size() && world_size() % P == 0) sizes.push_back(P);
  return sizes;
}
struct Group {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit Group(int P) { MPI_Comm_split(MPI_COMM_WORLD, world_rank() / P, world_rank(), &comm); }
  // Only ranks 0 … P − 1; the others get MPI_COMM_NULL and sit out.
  Group(int P, bool first_only) {
    (void)first_only;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() < P ? 0 : MPI_UNDEFINED, world_rank(), &comm);
  }
  ~Group() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
};

// Waits for every rank at a barrier, sleeping between polls: a rank that sits out a timing must not
// spin on a core (OpenMPI's blocking calls poll without sleeping) while the others are timed.
void sleeping_barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return one.empty() ? "unknown" : one + " (1 min), " + five + " (5 min)";
}

// A ring all-reduce by hand (reduce-scatter, then all-gather) through the counted sendrecv, so
// that what a bandwidth-optimal all-reduce sends can be counted: 2 (P − 1) chunks of n / P floats.
void ring_allreduce(std::vector<float>& data, MPI_Comm comm) {
  const int P = minimodel::size_of(comm), r = minimodel::rank_of(comm);
  const std::size_t n = data.size();
  auto first = [&](int chunk) { return std::size_t(chunk) * n / std::size_t(P); };
  auto size = [&](int chunk) { return first(chunk + 1) - first(chunk); };
  std::vector<float> incoming(n / std::size_t(P) + 1);
  for (int s = 0; s + 1 < P; ++s) {  // reduce-scatter: chunk (r + 1) mod P ends summed here
    const int send = ((r - s) % P + P) % P, recv = ((r - s - 1) % P + P) % P;
    minimodel::sendrecv(data.data() + first(send), size(send), (r + 1) % P, incoming.data(),
                        size(recv), (r - 1 + P) % P, comm);
    for (std::size_t i = 0; i < size(recv); ++i) data[first(recv) + i] += incoming[i];
  }
  for (int s = 0; s + 1 < P; ++s) {  // all-gather: pass the summed chunks on
    const int send = ((r + 1 - s) % P + P) % P, recv = ((r - s) % P + P) % P;
    minimodel::sendrecv(data.data() + first(send), size(send), (r + 1) % P,
                        data.data() + first(recv), size(recv), (r - 1 + P) % P, comm);
  }
}

// One scheme's timing on P ranks: medians over kRepeats calls.
struct Timing {
  double wall = 0.0, communicating = 0.0;  // seconds per call, rank 0
  std::vector<double> cpu;                 // CPU seconds per call of each working rank
};

// Times `call` on ranks 0 … P − 1 while the others sleep. Every rank must call it.
template <class Call>
Timing time_on(int P, Call call) {
  Group group(P, true);
  std::vector<double> walls, comms, cpus;
  for (int repeat = 0; repeat < kRepeats + 1; ++repeat) {  // the first call warms up
    sleeping_barrier();
    if (group.comm == MPI_COMM_NULL) continue;
    MPI_Barrier(group.comm);
    reset_comm_stats();
    const double cpu0 = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    call(group.comm);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (repeat == 0) continue;
    walls.push_back(wall);
    comms.push_back(comm_stats().seconds);
    cpus.push_back(cpu_seconds() - cpu0);
  }
  sleeping_barrier();
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  Timing timing{median(walls), median(comms), {}};
  const std::vector<double> cpu = gather(median(cpus));
  timing.cpu.assign(cpu.begin(), cpu.begin() + P);
  return timing;
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}
// "ring attention" -> "ring_attention", for the manifest's names.
std::string snake_case(std::string text) {
  std::replace(text.begin(), text.end(), ' ', '_');
  std::replace(text.begin(), text.end(), '-', '_');
  return text;
}
std::string ms(double seconds) { return fixed(1000.0 * seconds, 1) + " ms"; }

// Every rank runs this; `run` is rank 0's verify run, null on the others. `comparing`: the run
// records outputs for `workbook diff` (--dump), and stops after the last record, before the
// measurements.
void body(workbench::VerifyRun* run, bool comparing) {
  auto print = [&](const std::string& line = "") {
    if (run) run->print(line);
  };
  const int world = world_size();
  print("Lab 14 on " + std::to_string(world) + " MPI rank" + (world > 1 ? "s" : "") +
        ", split into groups of P = 1, 2, 4 ranks (those that divide " + std::to_string(world) +
        ").");
  struct Bytes {
    std::string scheme;
    int P;
    double measured, formula, ring_allreduce;  // per rank; ring_allreduce: 0 where no all-reduce
  };
  std::vector<Bytes> bytes;

  // ---- Block A ----
  print();
  print("Block A: tensor-parallel heads. Lab 01's layer, d_model " + std::to_string(kDModel) +
        ", " + std::to_string(kHeads) + " heads, on " + std::to_string(kT) + " tokens.");
  {
    minimodel::MultiHeadAttention layer(kDModel, kHeads, lab_setup::kSeed + 1);
    const Tensor2 x = normal(kT, kDModel, lab_setup::kSeed);
    const Tensor2 expected = layer.forward(x),
                  expected_causal = layer.forward(x, minimodel::causal_mask(kT));
    for (const int P : group_sizes()) {
      Group group(P);
      const minimodel::TensorParallelAttention shard(layer, group.comm);
      reset_comm_stats();
      const Tensor2 out = shard.forward(x);
      const double sent = double(comm_stats().bytes_sent);
      const Tensor2 causal = shard.forward(x, true);
      const double diff = max_over(MPI_COMM_WORLD, workbench::max_abs_diff(out, expected)),
                   diff_causal =
                       max_over(MPI_COMM_WORLD, workbench::max_abs_diff(causal, expected_causal));
      const double most = max_over(MPI_COMM_WORLD, sent);
      if (run) {
        run->check_max_abs_diff("A: P = " + std::to_string(P) + " equals lab 01's layer", diff,
                                kTolerance);
        run->check_max_abs_diff("A: P = " + std::to_string(P) + " causal equals lab 02's",
                                diff_causal, kTolerance);
        const double formula = double(kT * kDModel * sizeof(float));
        run->check("A: P = " + std::to_string(P) + " bytes sent per rank per layer = T·d_model·4",
                   most == formula, most,
                   std::to_string(std::size_t(most)) + " B measured, formula " +
                       std::to_string(std::size_t(formula)) + " B");
        if (P > 1)
          bytes.push_back({"tensor parallel", P, most, formula, 2.0 * (P - 1) / P * formula});
        if (P == group_sizes().back()) run->record("tensor_parallel", out, kTolerance, "A");
      }
    }
    // P not dividing H: 3 heads on every rank of the world (2 or 4 do not divide 3).
    if (world > 1) {
      minimodel::MultiHeadAttention three(12, 3, lab_setup::kSeed + 2);
      std::string message;
      try {
        minimodel::TensorParallelAttention bad(three, MPI_COMM_WORLD);
      } catch (const std::invalid_argument& e) {
        message = e.what();
      }
      const double threw = max_over(MPI_COMM_WORLD, message.empty() ? 0.0 : 1.0),
                   all_threw = -max_over(MPI_COMM_WORLD, message.empty() ? -0.0 : -1.0);
      if (run)
        run->check("A: 3 heads on " + std::to_string(world) + " ranks: every rank rejects them",
                   threw == 1.0 && all_threw == 1.0, all_threw, "\"" + message + "\"");
    }
  }

  // ---- Block B ----
  print();
  print("Block B: ring attention, one head of " + std::to_string(kRingD) + " over T = " +
        std::to_string(kRingT) + " tokens, causal, against lab 02's causal attention.");
  std::vector<double> work_contiguous, work_zigzag;
  {
    const Tensor2 q = normal(kRingT, kRingD, lab_setup::kSeed + 3),
                  k = normal(kRingT, kRingD, lab_setup::kSeed + 4),
                  v = normal(kRingT, kRingD, lab_setup::kSeed + 5);
    const Tensor2 expected =
        minimodel::single_head_attention(q, k, v, minimodel::causal_mask(kRingT)).output;
    for (const int P : group_sizes())
      for (const SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
        const std::string name = layout == SequenceLayout::zigzag ? "zig-zag" : "contiguous";
        Group group(P);
        const std::vector<std::size_t> rows =
            minimodel::rows_of_rank(kRingT, minimodel::rank_of(group.comm), P, layout);
        minimodel::RingWork work;
        reset_comm_stats();
        const Tensor2 out =
            minimodel::ring_attention(take_rows(q, rows), take_rows(k, rows), take_rows(v, rows),
                                      kRingT, layout, group.comm, &work);
        const double sent = max_over(MPI_COMM_WORLD, double(comm_stats().bytes_sent));
        const double diff =
            max_over(MPI_COMM_WORLD, workbench::max_abs_diff(out, take_rows(expected, rows)));
        const std::vector<double> scores = gather(double(work.scores));
        if (P == world) (layout == SequenceLayout::zigzag ? work_zigzag : work_contiguous) = scores;
        if (!run) continue;
        run->check_max_abs_diff("B: P = " + std::to_string(P) + " " + name + " equals lab 02's",
                                diff, kTolerance);
        const double formula =
            double((P - 1) * 2 * (kRingT / std::size_t(P)) * kRingD * sizeof(float));
        run->check("B: P = " + std::to_string(P) + " " + name +
                       " bytes sent per rank = (P − 1)·2·(T/P)·d·4",
                   sent == formula, sent,
                   std::to_string(std::size_t(sent)) + " B measured, formula " +
                       std::to_string(std::size_t(formula)) + " B");
        if (P == group_sizes().back() && layout == SequenceLayout::zigzag)
          run->record("ring_attention", out, kTolerance, "B");  // rank 0's rows
        if (P > 1 && layout == SequenceLayout::contiguous)
          bytes.push_back({"ring attention", P, sent, formula, 0.0});
      }
  }
  if (run && !work_contiguous.empty()) {
    auto imbalance = [](const std::vector<double>& w) {
      double total = 0.0;
      for (const double x : w) total += x;
      return *std::max_element(w.begin(), w.end()) / (total / double(w.size()));
    };
    const double before = imbalance(work_contiguous), after = imbalance(work_zigzag);
    run->print("  causal work (scores computed) per rank on " + std::to_string(world) + " ranks:");
    std::string c = "    contiguous:", z = "    zig-zag:   ";
    for (std::size_t r = 0; r < work_contiguous.size(); ++r)
      c += " " + std::to_string(std::size_t(work_contiguous[r])),
          z += " " + std::to_string(std::size_t(work_zigzag[r]));
    run->print(c);
    run->print(z);
    run->print("  imbalance (busiest rank / mean): contiguous " + fixed(before, 3) + ", zig-zag " +
               fixed(after, 3));
    run->check("B: zig-zag balances the causal work (imbalance 1)", after == 1.0, after,
               "contiguous " + fixed(before, 3));
    run->measure("imbalance_contiguous", before);
    run->measure("imbalance_zigzag", after);
    workbench::BarChart chart;
    chart.title = "Causal work per rank: T = " + std::to_string(kRingT) + ", " +
                  std::to_string(world) + " ranks";
    chart.x_label = "rank";
    chart.y_label = "query-key scores computed";
    for (std::size_t r = 0; r < work_contiguous.size(); ++r)
      chart.categories.push_back("rank " + std::to_string(r));
    chart.series = {{work_contiguous, "contiguous blocks"},
                    {work_zigzag, "zig-zag (one early, one late block)"}};
    workbench::render_bar_chart(run->artifact("causal_work.png"), chart);
  }

  // ---- Block C ----
  print();
  print("Block C: data-parallel training of lab 10's model (V " + std::to_string(kModel.vocab) +
        ", d_model " + std::to_string(kModel.d_model) + ", " + std::to_string(kModel.n_layers) +
        " layers of " + std::to_string(kModel.n_heads) + " heads), global batch " +
        std::to_string(kBatch) + ", Adam at lr 0.01, " + std::to_string(kSteps) +
        " steps, against lab 10's train_step on the whole batch.");
  {
    std::vector<double> single;
    {
      minimodel::ModelParams<float> params = minimodel::init_model(kModel, lab_setup::kSeed);
      minimodel::Adam adam(params, {kLearningRate, 0.9f, 0.999f, 1e-8f});
      for (int step = 0; step < kSteps; ++step)
        single.push_back(double(xt::mean(
            minimodel::train_step(params, kModel.n_heads, adam, batch_of_step(kBatch, step)))()));
    }
    std::size_t n_params = 0;
    std::vector<workbench::LineSeries> curves = {{{}, single, "1 process (lab 10's train_step)"}};
    std::vector<workbench::LineSeries> gaps;
    for (int step = 0; step < kSteps; ++step) curves[0].x.push_back(step + 1);
    for (const int P : group_sizes()) {
      Group group(P);
      minimodel::ModelParams<float> params = minimodel::init_model(kModel, lab_setup::kSeed);
      n_params = 0;
      for (const auto* t : minimodel::tensors_of(params)) n_params += t->size();
      minimodel::Adam adam(params, {kLearningRate, 0.9f, 0.999f, 1e-8f});
      std::vector<double> losses, gap;
      double sent = 0.0, worst = 0.0;
      for (int step = 0; step < kSteps; ++step) {
        reset_comm_stats();
        losses.push_back(minimodel::data_parallel_step(params, kModel.n_heads, adam,
                                                       batch_of_step(kBatch, step), group.comm));
        sent = std::max(sent, double(comm_stats().bytes_sent));
        gap.push_back(std::abs(losses.back() - single[std::size_t(step)]));
        worst = std::max(worst, gap.back());
      }
      worst = max_over(MPI_COMM_WORLD, worst);
      sent = max_over(MPI_COMM_WORLD, sent);
      if (!run) continue;
      run->check_max_abs_diff("C: P = " + std::to_string(P) + " loss curve equals the single run's",
                              worst, kLossTolerance);
      const double formula = double((n_params + 1) * sizeof(float));
      run->check("C: P = " + std::to_string(P) + " bytes sent per rank per step = (N + 1)·4",
                 sent == formula, sent,
                 std::to_string(std::size_t(sent)) + " B measured, N = " +
                     std::to_string(n_params) + " parameters and the loss sum");
      if (P == group_sizes().back())
        run->record("data_parallel_losses",
                    xt::adapt(std::vector<float>(losses.begin(), losses.end())), kLossTolerance,
                    "C");
      if (P > 1) {
        bytes.push_back({"data parallel", P, sent, formula, 2.0 * (P - 1) / P * formula});
        curves.push_back({curves[0].x, losses, std::to_string(P) + " ranks"});
        gaps.push_back({curves[0].x, gap, std::to_string(P) + " ranks"});
      }
    }
    if (run) {
      run->print("  loss: " + fixed(single.front(), 4) + " at step 1, " + fixed(single.back(), 4) +
                 " at step " + std::to_string(kSteps));
      if (!gaps.empty()) {
        workbench::LinePlot loss{"Mean loss of the global batch", "step", "loss", curves};
        workbench::LinePlot gap{"|data-parallel − single-process| loss", "step",
                                "absolute difference", gaps};
        workbench::render_line_plots(
            run->artifact("loss_curves.png"),
            "Data-parallel training of lab 10's model equals the single run", {loss, gap});
      }
    }
  }

  if (comparing) return;

  // ---- What a ring all-reduce really sends ----
  if (world > 1) {
    std::vector<float> data(kT * kDModel);
    std::mt19937_64 rng(lab_setup::kSeed + 6 + std::uint64_t(world_rank()));
    std::normal_distribution<float> draw;
    for (float& x : data) x = draw(rng);
    std::vector<float> summed = data;
    MPI_Allreduce(MPI_IN_PLACE, summed.data(), int(summed.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    reset_comm_stats();
    ring_allreduce(data, MPI_COMM_WORLD);
    const double sent = max_over(MPI_COMM_WORLD, double(comm_stats().bytes_sent));
    double diff = 0.0;
    for (std::size_t i = 0; i < data.size(); ++i)
      diff = std::max(diff, double(std::abs(data[i] - summed[i])));
    diff = max_over(MPI_COMM_WORLD, diff);
    if (run) {
      const double buffer = double(data.size() * sizeof(float));
      print();
      print(
          "What an all-reduce sends: a ring all-reduce written with sendrecv (reduce-scatter, then "
          "all-gather) of the T·d_model buffer on " +
          std::to_string(world) + " ranks sent " + std::to_string(std::size_t(sent)) +
          " B per rank, 2(P − 1)/P = " + fixed(2.0 * (world - 1) / world, 2) + " times the " +
          std::to_string(std::size_t(buffer)) +
          " B the formula counts; it equals MPI_Allreduce's "
          "sum to " +
          scientific(diff) + " (float32 sums in another order).");
      run->measure("ring_allreduce_bytes", sent);
      bytes.push_back({"hand ring all-reduce", world, sent, buffer, sent});
    }
  }
  if (run && !bytes.empty()) {
    workbench::BarChart chart;
    chart.title = "Bytes each rank sends per layer or step";
    chart.x_label = "scheme and ranks";
    chart.y_label = "bytes per rank";
    workbench::BarSeries measured{{}, "measured (counted at the MPI call)"}, formula{{}, "formula"},
        ring{{}, "a ring all-reduce: 2(P-1)/P of the buffer"};
    for (const Bytes& b : bytes) {
      chart.categories.push_back(b.scheme + " P=" + std::to_string(b.P));
      measured.values.push_back(b.measured);
      formula.values.push_back(b.formula);
      ring.values.push_back(b.ring_allreduce);
    }
    chart.series = {measured, formula, ring};
    workbench::render_bar_chart(run->artifact("bytes_vs_formula.png"), chart);
    for (const Bytes& b : bytes)
      run->measure("bytes_" + snake_case(b.scheme) + "_P" + std::to_string(b.P), b.measured);
  }

  // ---- 1 against 2 ranks ----
  if (world < 2) return;
  {
    print();
    print("1 against 2 ranks on this machine (" +
          std::to_string(std::thread::hardware_concurrency()) +
          " cores; one BLAS thread per rank; the ranks not timed sleep), load average " +
          load_average() + ":");
    print("  tensor parallel: T " + std::to_string(kTimeT) + ", d_model " + std::to_string(kTimeD) +
          ", " + std::to_string(kTimeHeads) + " heads; ring: one head of 64 over T " +
          std::to_string(kTimeRingT) +
          ", zig-zag; data parallel: one step's gradients of lab 10's model on a batch of " +
          std::to_string(kTimeBatch) + ".");
    minimodel::MultiHeadAttention layer(kTimeD, kTimeHeads, lab_setup::kSeed + 7);
    const Tensor2 x = normal(kTimeT, kTimeD, lab_setup::kSeed + 8);
    const Tensor2 qkv = normal(kTimeRingT, kRingD, lab_setup::kSeed + 9);
    const minimodel::TokenBatch batch = batch_of_step(kTimeBatch, 0);
    const minimodel::ModelParams<float> params = minimodel::init_model(kModel, lab_setup::kSeed);
    workbench::BarChart chart;
    chart.title = "1 against 2 ranks: time per call on rank 0";
    chart.x_label = "scheme and ranks";
    chart.y_label = "milliseconds";
    workbench::BarSeries computing{{}, "computing"},
        communicating{{}, "in MPI calls (sending and waiting)"};
    std::vector<std::string> table;
    for (const std::string scheme : {"tensor", "ring", "data"}) {
      double wall_one = 0.0;
      for (const int P : {1, 2}) {
        const Timing timing = time_on(P, [&](MPI_Comm comm) {
          if (scheme == "tensor") {
            const minimodel::TensorParallelAttention shard(layer, comm);
            shard.forward(x, true);
          } else if (scheme == "ring") {
            const std::vector<std::size_t> rows = minimodel::rows_of_rank(
                kTimeRingT, minimodel::rank_of(comm), P, SequenceLayout::zigzag);
            const Tensor2 mine = take_rows(qkv, rows);
            minimodel::ring_attention(mine, mine, mine, kTimeRingT, SequenceLayout::zigzag, comm);
          } else {
            minimodel::data_parallel_gradients(params, kModel.n_heads, batch, comm);
          }
        });
        if (P == 1) wall_one = timing.wall;
        std::string cpu;
        for (const double c : timing.cpu) cpu += (cpu.empty() ? "" : " + ") + ms(c);
        table.push_back("  " + scheme + " P=" + std::to_string(P) + ": wall " + ms(timing.wall) +
                        " (" + ms(timing.wall - timing.communicating) + " computing, " +
                        ms(timing.communicating) + " in MPI), CPU " + cpu +
                        (P == 2 ? ", speed-up " + fixed(wall_one / timing.wall, 2) : ""));
        chart.categories.push_back(scheme + " P=" + std::to_string(P));
        computing.values.push_back(1000.0 * (timing.wall - timing.communicating));
        communicating.values.push_back(1000.0 * timing.communicating);
        if (run) {
          run->measure("wall_ms_" + scheme + "_P" + std::to_string(P), 1000.0 * timing.wall);
          run->measure("mpi_ms_" + scheme + "_P" + std::to_string(P),
                       1000.0 * timing.communicating);
          std::vector<double> cpu_ms;
          for (const double c : timing.cpu) cpu_ms.push_back(1000.0 * c);
          run->measure("cpu_ms_" + scheme + "_P" + std::to_string(P), cpu_ms);
        }
      }
    }
    for (const std::string& line : table) print(line);
    print("  load average after: " + load_average());
    if (run) {
      run->measure("load_average", load_average());
      chart.series = {computing, communicating};
      workbench::render_bar_chart(run->artifact("time_split.png"), chart);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  openblas_set_num_threads(1);
  const nlohmann::json config = {
      {"ranks", world_size()},
      {"tensor_parallel", {{"T", kT}, {"d_model", kDModel}, {"n_heads", kHeads}}},
      {"ring", {{"T", kRingT}, {"d_head", kRingD}}},
      {"data_parallel",
       {{"vocab", kModel.vocab},
        {"d_model", kModel.d_model},
        {"n_heads", kModel.n_heads},
        {"n_layers", kModel.n_layers},
        {"batch", kBatch},
        {"steps", kSteps},
        {"learning_rate", kLearningRate}}}};
  int status = 0;
  if (world_rank() == 0) {
    bool started = false;
    status = lab_setup::run(argc, argv, lab_setup::kSeed, config, [&](workbench::VerifyRun& run) {
      int go = run.comparing() ? 2 : 1;
      started = true;
      MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
      body(&run, run.comparing());
    });
    if (!started) {  // --help or a bad option: the others need not run
      int go = 0;
      MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    } else if (status == 2 && world_size() > 1) {
      MPI_Abort(MPI_COMM_WORLD, 2);  // an error that may have left the others in a collective
    }
  } else {
    int go = 0;
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    try {
      if (go) body(nullptr, go == 2);
    } catch (const minimodel::Todo&) {
      status = 1;  // every rank meets the same stub; rank 0 names it
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lab 14 verify, rank %d: %s\n", world_rank(), e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Finalize();
  return status;
}
