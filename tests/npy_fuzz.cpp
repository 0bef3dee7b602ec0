// libFuzzer target: any bytes given to the .npy decoders either decode to an array whose data fits
// in those bytes, or throw NpyError. A crash, a sanitizer report, another exception or an array
// larger than its input is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensors/npy_io.hpp"

namespace {

template <class Decode>
void decode(const std::string& bytes, Decode decode_npy, std::size_t item_size) {
  try {
    const auto values = decode_npy(bytes, "input");
    if (values.size() * item_size > bytes.size()) __builtin_trap();
  } catch (const workbench::NpyError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  decode(bytes, workbench::decode_npy_f32, sizeof(float));
  decode(bytes, workbench::decode_npy_i64, sizeof(std::int64_t));
  decode(bytes, workbench::decode_npy_bool, 1);
  return 0;
}
