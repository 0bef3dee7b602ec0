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
