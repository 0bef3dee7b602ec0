#pragma once
// PyTorch-generated golden data in tests/fixtures/<case>/ (see scripts/make_fixtures.py).
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>

#include "tensors/npy_io.hpp"
#include "util/source_tree.hpp"

namespace minimodel::testing {

/// Parity with a PyTorch fixture. Torch ran in float64 on the same float32 inputs and its results
/// were rounded to float32 (tests/fixtures/README.md), so a fixture is off by at most half a unit
/// in the last place, 6e-8 for O(1) values, and a float32 implementation of the fixtures' small
/// cases lands about 1e-6 from it. 1e-5 leaves ~10x headroom over that and still catches any real
/// slip. It is an absolute bound for O(1) outputs; tests whose values reach ~10 apply it to
/// max(1, max |expected|) instead (lab 09's close_at_scale).
inline constexpr double kTorchTolerance = 1e-5;

/// tests/fixtures/, where scripts/make_fixtures.py writes one folder per case.
inline std::filesystem::path fixtures_dir() {
  return workbench::source_dir() / "tests" / "fixtures";
}

/// One fixture case: its .npy arrays by name and its meta.json.
class Fixture {
 public:
  explicit Fixture(const std::string& name) : dir_(fixtures_dir() / name) {
    std::ifstream meta(dir_ / "meta.json");
    if (!meta)
      throw std::runtime_error("missing fixture " + dir_.string() +
                               "; HINT: run /usr/bin/python3 scripts/make_fixtures.py");
    meta_ = nlohmann::json::parse(meta);
  }

  /// The array `name`.npy of this case, e.g. array<3>("x").
  template <std::size_t N>
  xt::xtensor<float, N> array(const std::string& name) const {
    return workbench::to_rank<N>(workbench::load_npy_f32(dir_ / (name + ".npy")), name);
  }

  /// The rank of array `name`, for cases whose x may be 2-D or 3-D.
  std::size_t rank(const std::string& name) const {
    return workbench::load_npy_f32(dir_ / (name + ".npy")).dimension();
  }

  const nlohmann::json& meta() const { return meta_; }

 private:
  std::filesystem::path dir_;
  nlohmann::json meta_;
};

}  // namespace minimodel::testing
