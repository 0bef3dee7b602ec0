// Build and machine facts for run manifests, and atomic file writes.
#include "workbench/manifest.hpp"

#include <cblas.h>  // OpenBLAS's own, from the include folder PkgConfig::openblas adds
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <xtensor-blas/xblas_config.hpp>
#include <xtensor/xtensor_config.hpp>

#ifndef MINIMODEL_SOURCE_DIR
#error "MINIMODEL_SOURCE_DIR must be defined by the build (see workbench/CMakeLists.txt)"
#endif
#ifndef MINIMODEL_CMAKE_VERSION
#error "MINIMODEL_CMAKE_VERSION must be defined by the build (see workbench/CMakeLists.txt)"
#endif
#ifndef MINIMODEL_BUILD_TYPE
#error "MINIMODEL_BUILD_TYPE must be defined by the build (see workbench/CMakeLists.txt)"
#endif

namespace workbench {
namespace {

namespace fs = std::filesystem;

/// Runs `command` through the shell and returns its stdout, or false if it did not exit with 0.
bool run_command(const std::string& command, std::string& output) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  output.clear();
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

/// "git -C <source dir> <args>", quiet on stderr so a build outside git prints nothing.
std::string git(const std::string& args) {
  return "git -C " + shell_quote(MINIMODEL_SOURCE_DIR) + " " + args + " 2>/dev/null";
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

/// The one way files are written: `content` into `path`.tmp beside the target, then a rename.
/// `caller` names the public function in error messages.
void write_atomically(const fs::path& path, const std::string& content, const char* caller) {
  const std::string where = std::string(caller) + ": cannot write " + path.string() + ": ";
  std::error_code ec;
  if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw std::runtime_error(where + "cannot create its folder (" + ec.message() + ")");
  }
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();  // flushes; a full disk shows up here
    if (!out) {
      fs::remove(tmp, ec);
      throw std::runtime_error(where + "writing " + tmp.string() + " failed");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error(where + ec.message());
  }
}

}  // namespace

nlohmann::json environment_facts() {
  nlohmann::json facts;

  std::string out;
  const std::string sha = run_command(git("rev-parse HEAD"), out) ? trim(out) : "";
  facts["git_sha"] = sha.empty() ? "unknown" : sha;
  facts["git_dirty"] = nullptr;
  if (run_command(git("status --porcelain"), out)) facts["git_dirty"] = !trim(out).empty();

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
  write_atomically(path, text + "\n", "write_json_atomically");
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  write_atomically(path, text, "write_text_atomically");
}

}  // namespace workbench
