#include "verify_frame/verify_run.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <limits>

#include <CLI/CLI.hpp>

#include "minimodel/shapes.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"
#include "util/text.hpp"
#include "verify_frame/manifest.hpp"

namespace workbench {
namespace {}  // namespace

VerifyRun::VerifyRun(VerifySpec spec, std::string implementation, std::filesystem::path out_dir,
                     std::filesystem::path dump_dir)
    : spec_(std::move(spec)),
      implementation_(std::move(implementation)),
      out_dir_(std::move(out_dir)),
      dump_dir_(std::move(dump_dir)) {}

void VerifyRun::print(const std::string& line) {
  std::cout << line << '\n';
  captured_ << line << '\n';
}

void VerifyRun::print_matrix(const std::string& name, const xt::xtensor<float, 2>& matrix) {
  print(name + " " + minimodel::shape_of(matrix) + " =");
  for (std::size_t i = 0; i < matrix.shape(0); ++i) {
    std::ostringstream row;
    row << "  [";
    for (std::size_t j = 0; j < matrix.shape(1); ++j) {
      const float value = matrix(i, j);
      // Mask values like -1e9 in scientific notation, so columns stay aligned.
      if (std::abs(value) >= 1e5f)
        row << std::scientific << std::setprecision(1);
      else
        row << std::fixed << std::setprecision(5);
      row << (j ? " " : "") << std::setw(11) << value;
    }
    print(row.str() + " ]");
  }
}

bool VerifyRun::check_max_abs_diff(const std::string& name, double max_abs_diff, double tolerance) {
  const bool passed = max_abs_diff <= tolerance;  // false for NaN
  checks_.push_back({name, passed, max_abs_diff, tolerance, ""});
  print(std::string(passed ? "[PASS] " : "[FAIL] ") + name + ": max |diff| = " +
        scientific(max_abs_diff) + " (tolerance " + scientific(tolerance) + ")");
  return passed;
}

bool VerifyRun::check(const std::string& name, bool passed, double value,
                      const std::string& detail) {
  checks_.push_back({name, passed, value, std::numeric_limits<double>::quiet_NaN(), detail});
  print(std::string(passed ? "[PASS] " : "[FAIL] ") + name + ": " + detail);
  return passed;
}

void VerifyRun::record(const std::string& name, const xt::xarray<float>& value, double tolerance,
                       const std::string& block) {
  if (dump_dir_.empty()) return;
  std::filesystem::create_directories(dump_dir_);
  save_npy_f32(dump_dir_ / (name + ".npy"), value);
  const std::vector<std::size_t> shape(value.shape().begin(), value.shape().end());
  recorded_[name] = {{"shape", shape}, {"tolerance", tolerance}};
  if (!block.empty()) recorded_[name]["block"] = block;
  write_file_atomically(dump_dir_ / "outputs.json", recorded_.dump(2) + "\n");
}

void VerifyRun::measure(const std::string& name, const nlohmann::json& value) {
  measurements_[name] = value;
}

std::filesystem::path VerifyRun::artifact(const std::string& filename) {
  std::filesystem::create_directories(out_dir_);
  // Whoever writes it (cairo, a stream), it replaces a regular file or nothing: never a device, a
  // FIFO or a link in the learner's --out folder.
  check_replaceable(out_dir_ / filename);
  artifacts_.push_back(out_dir_ / filename);
  return artifacts_.back();
}

int VerifyRun::finish() {
  // An artifact asked for but not (re)written would leave an earlier run's file in the manifest.
  for (const auto& path : artifacts_) {
    std::error_code error;
    const auto written = std::filesystem::last_write_time(path, error);
    if (error || written < started_)
      throw std::runtime_error(path.filename().string() +
                               " is listed as an artifact but this run did not write it");
  }
  std::size_t n_passed = 0;
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : checks_) {
    n_passed += c.passed;
    nlohmann::json entry = {{"name", c.name}, {"passed", c.passed}};
    entry["value"] = std::isfinite(c.value) ? nlohmann::json(c.value) : nlohmann::json(nullptr);
    if (!std::isnan(c.tolerance)) entry["tolerance"] = c.tolerance;
    if (!c.detail.empty()) entry["detail"] = c.detail;
    checks.push_back(entry);
  }
  // No check at all is a failure, but for a --dump run that stopped at its last record().
  const bool all_passed = n_passed == checks_.size() && (!checks_.empty() || comparing());

  print();
  print(all_passed ? "all " + std::to_string(n_passed) + " checks passed"
                   : std::to_string(checks_.size() - n_passed) + " of " +
                         std::to_string(checks_.size()) + " checks failed");
  for (const auto& path : artifacts_) print("wrote " + path.string());
  const auto output = artifact("verify_output.txt");
  const auto manifest_path = artifact("manifest.json");
  print("wrote " + output.string());
  print("wrote " + manifest_path.string());

  nlohmann::json manifest = environment_facts();
  manifest["experiment"] = spec_.experiment;
  manifest["implementation"] = implementation_;
  manifest["date"] = utc_now("%Y-%m-%dT%H:%M:%SZ");
  manifest["seed"] = spec_.seed;
  manifest["config"] = spec_.config;
  manifest["results_summary"] = {{"passed", all_passed},
                                 {"n_passed", n_passed},
                                 {"n_checks", checks_.size()},
                                 {"checks", checks}};
  if (!measurements_.empty()) manifest["measurements"] = measurements_;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& path : artifacts_) files.push_back(path.filename().string());
  manifest["artifacts"] = files;

  write_file_atomically(output, captured_.str());
  write_json_atomically(manifest_path, manifest);
  return all_passed ? 0 : 1;
}

int run_verify(int argc, char** argv, const VerifySpec& spec, const std::string& impl,
               const std::filesystem::path& default_out_dir,
               const std::function<void(VerifyRun&)>& body) {
  // Line by line into a pipe too (`workbook verify` reads one), not in 4 KiB blocks at the end.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  CLI::App app{"Verify program of experiment " + spec.experiment + " (" + impl +
               " implementation): prints its checks and writes verify_output.txt, its figures "
               "and manifest.json."};
  std::filesystem::path out_dir = default_out_dir;
  app.add_option("--out", out_dir, "Folder for the artifacts")->capture_default_str();
  std::filesystem::path dump_dir;
  app.add_option("--dump", dump_dir,
                 "Also write the lab's key outputs as DIR/<name>.npy with DIR/outputs.json "
                 "(used by `workbook diff`)");
  CLI11_PARSE(app, argc, argv);

  try {
    VerifyRun run(spec, impl, out_dir, dump_dir);
    run.print("== " + spec.experiment + " (" + impl + " implementation) ==");
    body(run);
    return run.finish();
  } catch (const std::exception& e) {
    if (starts_with(e.what(), "TODO(lab ")) {  // a learner stub: minimodel::Todo
      std::cerr << e.what() << '\n';
      return 1;
    }
    std::cerr << "verify " << spec.experiment << " (" << impl << "): " << e.what() << '\n';
    return 2;
  }
}

}  // namespace workbench
