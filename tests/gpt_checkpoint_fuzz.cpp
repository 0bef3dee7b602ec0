// libFuzzer target: any bytes as a lab 13 checkpoint's config.json make load_gpt_checkpoint throw
// std::runtime_error (the folder holds no tensors and no tokenizer, so nothing can pass): a crash,
// a stack overflow, a sanitizer report, an allocation beyond the fuzzer's limit or another
// exception is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <stdexcept>
#include <string>

#include "checkpoint/gpt_checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& checkpoint_dir() {
  static const fs::path dir = [] {
    const fs::path path =
        fs::temp_directory_path() / ("gpt_checkpoint_fuzz_" + std::to_string(getpid()));
    fs::create_directories(path);
    return path;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::ofstream(checkpoint_dir() / "config.json", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    workbench::load_gpt_checkpoint(checkpoint_dir());
    __builtin_trap();  // no tensors: it cannot have loaded
  } catch (const std::runtime_error&) {
  }
  return 0;
}
