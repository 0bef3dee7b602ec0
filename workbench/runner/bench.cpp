// `workbook bench`: time the labs' attention layers on a suite of shapes, with the engine of each
// implementation (bench-reference, bench-learner: Google Benchmark), and print one table or a
// JSON document. Times are medians of repetitions in one run (or the one run, with
// --repetitions 1); nothing asserts a time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"
#include "util/process.hpp"

namespace workbook {
namespace {

// One row of the table: a layer of one implementation on one shape.
struct Timing {
  std::string layer, implementation;
  std::size_t T = 0, d_model = 0, n_heads = 0;
  bool causal = false;
  double median_ms = 0, gflops = 0, peak_extra_bytes = 0;
  double median_cpu_ms = 0;  ///< CPU time of the engine's whole process per call, all its threads
  std::string error;         ///< why it did not run (a TODO stub), or empty
};

nlohmann::json to_json(const Timing& t) {
  nlohmann::json row = {{"layer", t.layer},
                        {"implementation", t.implementation},
                        {"T", t.T},
                        {"d_model", t.d_model},
                        {"n_heads", t.n_heads},
                        {"causal", t.causal}};
  if (!t.error.empty()) {
    row["error"] = t.error;
  } else {
    row["median_ms"] = t.median_ms;
    row["median_cpu_ms"] = t.median_cpu_ms;
    row["gflops_per_s"] = t.gflops;
    row["peak_extra_bytes"] = t.peak_extra_bytes;
  }
  return row;
}

// One engine's report: a row per layer and shape, and OpenBLAS's SGEMM rate in the same run.
struct Report {
  std::vector<Timing> rows;
  nlohmann::json sgemm;  ///< {"n", "median_ms", "gflops_per_s"}
};

// Google Benchmark's JSON report -> rows: the "median" aggregates, and the runs that failed. With
// one repetition it computes no aggregate: `single_run` reads the runs themselves. The engine names
// each benchmark after its layer and shape: "lab01/T:128/d_model:512/H:8/causal", and the SGEMM it
// times for comparison "sgemm/n:2048".
Report read_report(const nlohmann::json& report, const std::string& impl, bool single_run) {
  static const std::regex name_pattern(R"(^(\w+)/T:(\d+)/d_model:(\d+)/H:(\d+)(/causal)?)");
  static const std::regex sgemm_pattern(R"(^sgemm/n:(\d+))");
  Report result;
  std::vector<Timing>& rows = result.rows;
  for (const auto& run : report.at("benchmarks")) {
    const bool failed = run.value("error_occurred", false);
    const bool kept = single_run ? run.value("run_type", "") == "iteration"
                                 : run.value("aggregate_name", "") == "median";
    if (!failed && !kept) continue;
    const std::string name = run.at("run_name");
    std::smatch m;
    if (std::regex_search(name, m, sgemm_pattern) && !failed) {
      const double ms = run.at("real_time").get<double>();
      result.sgemm = {{"n", std::stoul(m[1])},
                      {"median_ms", ms},
                      {"gflops_per_s", run.at("flops").get<double>() / (ms * 1e6)}};
      continue;
    }
    if (!std::regex_search(name, m, name_pattern))
      throw EnvironmentError("bench-" + impl + " reported a benchmark named " + name);
    Timing t;
    t.layer = m[1];
    t.implementation = impl;
    t.T = std::stoul(m[2]);
    t.d_model = std::stoul(m[3]);
    t.n_heads = std::stoul(m[4]);
    t.causal = m[5].matched;
    if (failed) {  // e.g. a learner's TODO stub; reported once per repetition, kept once
      t.error = run.value("error_message", "failed");
      const bool seen = std::any_of(rows.begin(), rows.end(), [&](const Timing& row) {
        return row.layer == t.layer && row.T == t.T && row.d_model == t.d_model &&
               row.n_heads == t.n_heads && row.causal == t.causal;
      });
      if (!seen) rows.push_back(t);
      continue;
    }
    t.median_ms = run.at("real_time").get<double>();  // the engine reports milliseconds
    t.median_cpu_ms = run.value("cpu_time", 0.0);     // process-wide: MeasureProcessCPUTime
    t.gflops = run.at("flops").get<double>() / (t.median_ms * 1e6);
    t.peak_extra_bytes = run.at("peak_extra_bytes").get<double>();
    rows.push_back(t);
  }
  return result;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

void print_table(const Context& ctx, const std::vector<Timing>& rows,
                 const nlohmann::json& machine) {
  const int repetitions = machine.at("repetitions").get<int>();
  std::cout << "OpenBLAS threads " << machine.at("threads").dump() << ", "
            << machine.at("cpus").dump() << " cores, "
            << (repetitions == 1 ? std::string("1 run")
                                 : "median of " + std::to_string(repetitions) + " repetitions")
            << " (" << machine.value("blas", std::string()) << ")\n";
  std::map<std::string, double> sgemm;  // GF/s of each implementation's engine
  for (const auto& [impl, rate] : machine.at("sgemm").items()) {
    sgemm[impl] = rate.at("gflops_per_s").get<double>();
    std::printf("OpenBLAS SGEMM %s x %s, bench-%s: %s GF/s\n", rate.at("n").dump().c_str(),
                rate.at("n").dump().c_str(), impl.c_str(), fixed(sgemm[impl], 2).c_str());
  }
  std::printf("%-22s %6s %8s %4s %7s %10s %8s %8s %14s\n", "layer", "T", "d_model", "H", "causal",
              "ms", "GF/s", "of SGEMM", "peak extra MiB");
  for (const Timing& t : rows) {
    std::printf("%-22s %6zu %8zu %4zu %7s ", (t.layer + " " + t.implementation).c_str(), t.T,
                t.d_model, t.n_heads, t.causal ? "yes" : "no");
    if (!t.error.empty())  // a TODO stub's tag says enough: "TODO(lab 01, Block A)"
      std::cout << ctx.yellow("did not run: " + t.error.substr(0, t.error.rfind("TODO(", 0) == 0
                                                                      ? t.error.find(')') + 1
                                                                      : std::string::npos))
                << '\n';
    else
      std::printf("%10s %8s %8s %14s\n", fixed(t.median_ms, 3).c_str(), fixed(t.gflops, 2).c_str(),
                  sgemm.count(t.implementation)
                      ? (fixed(100.0 * t.gflops / sgemm[t.implementation], 0) + " %").c_str()
                      : "",
                  fixed(t.peak_extra_bytes / (1024.0 * 1024.0), 2).c_str());
  }
  std::cout << "GF/s counts 8·T·d_model² + 4·T²·d_model FLOPs per call, causal or not; "
               "\"of SGEMM\" is that rate over OpenBLAS's SGEMM rate in the same engine run.\n";
  std::cout.flush();
}

}  // namespace

// The full suite takes minutes on 2 cores; a learner's layer stuck in a loop stops here.
constexpr std::chrono::minutes kBenchTimeLimit{30};

int bench(const Context& ctx, const BenchOptions& options) {
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> impls = {"reference", "learner"};
  if (options.impl != "both") impls = {options.impl};

  std::vector<Timing> rows;
  nlohmann::json machine = {{"threads", threads},
                            {"repetitions", options.repetitions},
                            {"cpus", std::thread::hardware_concurrency()},
                            {"sgemm", nlohmann::json::object()}};
  bool reference_ran = true;
  for (const std::string& impl : impls) {
    const std::string engine = "bench-" + impl;
    const BuildResult build = build_targets(ctx.ws, {engine});
    if (!build.ok) {
      if (impl == "reference") reference_ran = false;
      if (!options.json) print_build_error(ctx, build);
      Timing t;
      t.layer = "all";
      t.implementation = impl;
      t.error = "does not build: " + build.first_error;
      rows.push_back(t);
      continue;
    }
    // One report per run: two benches at once on one build folder must not read each other's.
    const std::filesystem::path report =
        ctx.ws.build / ("bench-" + impl + "-" + std::to_string(getpid()) + ".json");
    std::vector<std::string> args = {
        "--threads",
        std::to_string(threads),
        "--benchmark_repetitions=" + std::to_string(options.repetitions),
        "--benchmark_report_aggregates_only=true",
        "--benchmark_out=" + report.string(),
        "--benchmark_out_format=json"};
    if (options.quick) {
      args.push_back("--quick");
      args.push_back("--benchmark_min_time=0.01");
    }
    // Progress on stderr, one line per finished benchmark, so that stdout stays the result: the
    // engine's console rows, but not the mean, stddev and cv beside each median.
    workbench::CaptureOptions progress;
    progress.time_limit = time_limit(kBenchTimeLimit);
    progress.on_line = [&](const std::string& line) {
      const bool row = line.rfind("sgemm/", 0) == 0 || line.rfind("lab", 0) == 0;
      const std::string name = line.substr(0, line.find(' '));
      bool other_statistic = false;  // a mean, stddev or cv row beside a median
      for (const std::string suffix : {"_mean", "_stddev", "_cv"})
        other_statistic = other_statistic ||
                          (name.size() > suffix.size() &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
      if (row && !other_statistic) std::cerr << engine << ": " << line << '\n' << std::flush;
    };
    std::filesystem::remove(report);
    const workbench::CapturedRun run =
        workbench::run_captured(ctx.ws.bin(engine).string(), args, progress);
    if (!run.status.ok() || !std::filesystem::exists(report))
      throw EnvironmentError(engine + " failed (" + how_it_ended(run.status, progress.time_limit) +
                             "):\n" + run.output);
    const nlohmann::json parsed = nlohmann::json::parse(workbench::read_file(report));
    std::filesystem::remove(report);
    const nlohmann::json& context = parsed.at("context");
    machine["blas"] = context.value("blas", "");
    machine["threads"] = std::stoi(context.value("threads", "0"));
    machine["mhz_per_cpu"] = context.value("mhz_per_cpu", 0);
    Report engine_report = read_report(parsed, impl, options.repetitions == 1);
    if (engine_report.rows.empty())  // never an empty table that looks like a result
      throw EnvironmentError(engine + " reported no benchmark (" + report.string() + ")");
    if (!engine_report.sgemm.is_null()) machine["sgemm"][impl] = engine_report.sgemm;
    for (Timing& t : engine_report.rows) {
      if (impl == "reference" && !t.error.empty()) reference_ran = false;
      rows.push_back(std::move(t));
    }
  }

  if (options.json) {
    nlohmann::json document = {{"machine", machine}, {"results", nlohmann::json::array()}};
    for (const Timing& t : rows) document["results"].push_back(to_json(t));
    std::cout << document.dump(2) << '\n';
  } else {
    print_table(ctx, rows, machine);
  }
  return reference_ran ? kSuccess : kNotDone;
}

}  // namespace workbook
