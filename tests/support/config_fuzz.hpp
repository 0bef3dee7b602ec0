#pragma once
// The body of the checkpoint readers' libFuzzer targets (labs 10 and 13).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <stdexcept>
#include <string>

namespace minimodel::testing {

/// Writes the fuzzer's bytes as config.json into a folder of this process's and expects
/// load(folder) to throw std::runtime_error: the folder holds nothing else, so no checkpoint can
/// load. A crash, a stack overflow, a sanitizer report, an allocation beyond the fuzzer's limit or
/// another exception is a finding.
template <class Load>
int fuzz_checkpoint_config(const std::uint8_t* data, std::size_t size, const Load& load) {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("checkpoint_config_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  std::ofstream(dir / "config.json", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    load(dir);
    __builtin_trap();  // nothing but a config: it cannot have loaded
  } catch (const std::runtime_error&) {
  }
  return 0;
}

}  // namespace minimodel::testing
