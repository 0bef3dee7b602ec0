// Build and machine facts for run manifests.
#include "verify_frame/manifest.hpp"

#include <cblas.h>  // OpenBLAS's own, from the include folder PkgConfig::openblas adds

#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <xtensor-blas/xblas_config.hpp>
#include <xtensor/xtensor_config.hpp>

#include "util/files.hpp"
#include "util/process.hpp"
#include "util/source_tree.hpp"
#include "util/text.hpp"

#ifndef MINIMODEL_CMAKE_VERSION
#error \
    "MINIMODEL_CMAKE_VERSION must be defined by the build (see workbench/verify_frame/CMakeLists.txt)"
#endif
#ifndef MINIMODEL_BUILD_TYPE
#error \
    "MINIMODEL_BUILD_TYPE must be defined by the build (see workbench/verify_frame/CMakeLists.txt)"
#endif

namespace workbench {
namespace {

// git in the source tree this binary was built from; a failed run (no git, not a repository)
// leaves the facts unknown instead of failing the verify program.
CapturedRun git(std::vector<std::string> args) {
  args.insert(args.begin(), {"-C", source_dir().string()});
  try {
    return run_captured("git", args);
  } catch (const std::exception&) {
    return {{true, 127}, ""};
  }
}

std::string compiler() {
#if defined(__clang__)
  return "Clang " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
         std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
  return "GCC " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#elif defined(_MSC_VER)
  return "MSVC " + std::to_string(_MSC_VER);
#else
  return "unknown";
#endif
}

std::string cxx_standard() {
  constexpr long v = __cplusplus;
  const char* name = v > 202002L    ? "C++23"
                     : v >= 202002L ? "C++20"
                     : v >= 201703L ? "C++17"
                     : v >= 201402L ? "C++14"
                                    : "C++11";
  return std::string(name) + " (" + std::to_string(v) + "L)";
}

std::string version(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

/// The text after the colon of the first line of `file` that starts with `key`, or "".
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(colon + 1));
  }
  return "";
}

nlohmann::json ram_bytes() {
  const std::string mem_total = proc_field("/proc/meminfo", "MemTotal");  // "16318820 kB"
  try {
    return static_cast<std::uint64_t>(std::stoull(mem_total)) * 1024;
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace

nlohmann::json environment_facts() {
  nlohmann::json facts;

  const CapturedRun sha = git({"rev-parse", "HEAD"});
  facts["git_sha"] = sha.status.ok() && !trim(sha.output).empty() ? trim(sha.output) : "unknown";
  const CapturedRun status = git({"status", "--porcelain"});
  facts["git_dirty"] = status.status.ok() ? nlohmann::json(!trim(status.output).empty()) : nullptr;

  const char* blas_config = openblas_get_config();
  facts["versions"] = {
      {"compiler", compiler()},
      {"cxx_standard", cxx_standard()},
      {"xtensor", version(XTENSOR_VERSION_MAJOR, XTENSOR_VERSION_MINOR, XTENSOR_VERSION_PATCH)},
      {"xtensor_blas",
       version(XTENSOR_BLAS_VERSION_MAJOR, XTENSOR_BLAS_VERSION_MINOR, XTENSOR_BLAS_VERSION_PATCH)},
      {"blas",
       {{"library", "OpenBLAS"},
        {"config", trim(blas_config != nullptr ? blas_config : "")},
        {"threads", openblas_get_num_threads()}}},
      {"cmake", MINIMODEL_CMAKE_VERSION},
      {"build_type", MINIMODEL_BUILD_TYPE},
  };

  const std::string cpu = proc_field("/proc/cpuinfo", "model name");
  facts["hardware"] = {
      {"cpu_model", cpu.empty() ? "unknown" : cpu},
      {"cores", std::thread::hardware_concurrency()},
      {"ram_bytes", ram_bytes()},
  };
  return facts;
}

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& doc) {
  // Invalid UTF-8 (say, a token cut mid-character) becomes U+FFFD instead of an exception.
  const std::string text = doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  write_file_atomically(path, text + "\n");
}

}  // namespace workbench
