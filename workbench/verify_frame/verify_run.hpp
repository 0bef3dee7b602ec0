#pragma once
// The frame of every verify program: options, printing, checks, artifacts and the manifest.
//
//   int main(int argc, char** argv) {
//     return workbench::run_verify(argc, argv, {"01-multi-head-attention", seed, config},
//                                  "reference", "experiments/01-multi-head-attention/reference",
//                                  [](workbench::VerifyRun& run) { ... run.check(...) ... });
//   }
// (verify/lab_setup.hpp fills in the experiment, implementation and folder for the labs.)
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

namespace workbench {

/// What a verify program is: its experiment's name, its seed and its configuration.
struct VerifySpec {
  std::string experiment;  ///< "01-multi-head-attention", as the manifest names it
  std::uint64_t seed = 0;
  nlohmann::json config;  ///< the lab's settings, copied into the manifest
};

/// One verify run. Everything printed through out() goes to stdout and into verify_output.txt.
class VerifyRun {
 public:
  /// `dump_dir`: where record() writes its outputs; empty (the default) to record nothing.
  VerifyRun(VerifySpec spec, std::string implementation, std::filesystem::path out_dir,
            std::filesystem::path dump_dir = {});

  /// Prints a line to stdout and keeps it for verify_output.txt.
  void print(const std::string& line = "");

  /// Prints "name (rows, cols) =" and the matrix, one row per line, to 5 decimals.
  void print_matrix(const std::string& name, const xt::xtensor<float, 2>& matrix);

  /// Records a numeric check: passes when |value| <= tolerance. Prints, e.g.,
  /// "[PASS] H = 1 equivalence: max |diff| = 2.4e-08 (tolerance 1e-05)". Returns whether it passed.
  bool check_max_abs_diff(const std::string& name, double max_abs_diff, double tolerance);

  /// Records a check that is true or false, with the number it rests on. Returns `passed`.
  bool check(const std::string& name, bool passed, double value, const std::string& detail);

  /// Names `value` as one of this lab's key outputs, compared by `workbook diff` with the other
  /// implementation's to within `tolerance` (that of the lab's tests). `block` is the lab's block
  /// whose code produced it ("A"), shown in diff's Block column; "" for none. When the program
  /// runs with --dump DIR it writes DIR/<name>.npy and rewrites DIR/outputs.json (name -> shape,
  /// tolerance, block) at once, so the outputs recorded before a TODO stub stopped the program are
  /// kept. Without --dump it does nothing. `name` is a file name: letters, digits and '_'.
  void record(const std::string& name, const xt::xarray<float>& value, double tolerance,
              const std::string& block = "");

  /// Keeps a measurement under `name` in the manifest's "measurements" (written only when there is
  /// one): a number such as a time, which is reported but never checked, since it varies from run
  /// to run. A second call with the same name replaces the first.
  void measure(const std::string& name, const nlohmann::json& value);

  /// Where an artifact called `filename` goes; the file is listed in the manifest and the summary.
  /// @throws std::runtime_error if that path exists and is not a regular file (check_replaceable).
  std::filesystem::path artifact(const std::string& filename);

  /// Writes verify_output.txt and manifest.json, prints where everything went, and returns the exit
  /// status: 0 if every check passed, 1 otherwise.
  /// @throws std::runtime_error if an artifact() was not written during this run.
  int finish();

  const std::string& implementation() const { return implementation_; }

  /// True when the run records outputs for `workbook diff` (--dump): a verify program may stop
  /// after its last record(), before what takes long and records nothing (timings, training).
  bool comparing() const { return !dump_dir_.empty(); }

 private:
  struct Check {
    std::string name;
    bool passed;
    double value;
    double tolerance;  // NaN for checks without one
    std::string detail;
  };

  VerifySpec spec_;
  std::string implementation_;
  std::filesystem::path out_dir_;
  std::filesystem::path dump_dir_;
  nlohmann::ordered_json recorded_ = nlohmann::ordered_json::object();
  nlohmann::json measurements_ = nlohmann::json::object();
  std::ostringstream captured_;
  std::vector<Check> checks_;
  std::vector<std::filesystem::path> artifacts_;
  // File times come from a coarse kernel clock (a few ms behind): a second of slack.
  std::filesystem::file_time_type started_ =
      std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1);
};

/// Parses the common options (--out DIR, --dump DIR, --help), runs `body`, and turns what escapes
/// it into one line a learner can act on: a TODO stub (an exception whose message starts with
/// "TODO(lab ") names its lab and block (exit 1), a bad input or I/O failure says what failed
/// (exit 2). verify_output.txt and manifest.json are written only when `body` completes.
/// `implementation` ("learner" or "reference") names the code the program is linked with, for the
/// manifest; the artifacts go to `default_out_dir` unless --out says otherwise.
int run_verify(int argc, char** argv, const VerifySpec& spec, const std::string& implementation,
               const std::filesystem::path& default_out_dir,
               const std::function<void(VerifyRun&)>& body);

}  // namespace workbench
