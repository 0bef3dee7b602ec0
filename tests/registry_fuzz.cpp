// libFuzzer target: any bytes as labs/labs.json either give the registry's labs or throw
// std::runtime_error, as load_registry does for the real file: a crash, a stack overflow, a
// sanitizer report or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "runner/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    workbook::parse_registry(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::runtime_error&) {
  }
  return 0;
}
