// libFuzzer target: any bytes as a checkpoint's config.json make load_checkpoint throw
// std::runtime_error (support/config_fuzz.hpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "checkpoint/checkpoint.hpp"
#include "support/config_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return minimodel::testing::fuzz_checkpoint_config(
      data, size, [](const std::filesystem::path& dir) { workbench::load_checkpoint(dir); });
}
