#include "tensors/npy_io.hpp"

#include <cstdint>
#include <fstream>

#include <xtensor/xnpy.hpp>

#include "util/files.hpp"

namespace workbench {
namespace {

// Reads `path` as a C-order array of T, or throws NpyError naming the file and `expected`.
// xt::load_npy does not notice a short read, so this reads the file object and checks the stream;
// cast<> checks the dtype unless `typestrings` lists the accepted ones instead.
template <class T>
xt::xarray<T> read_npy(const std::filesystem::path& path, const std::string& expected,
                       std::initializer_list<const char*> typestrings = {}) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw NpyError(path.string() + ": cannot open file");
  try {
    auto file = xt::detail::load_npy_file(stream);
    if (!stream) throw NpyError(path.string() + ": file is truncated");
    bool accepted = typestrings.size() == 0;
    for (const char* typestring : typestrings) accepted |= file.m_typestring == typestring;
    if (!accepted)
      throw NpyError(path.string() + ": not " + expected + " (dtype " + file.m_typestring + ")");
    return xt::xarray<T>(
        std::move(file).cast<T, xt::layout_type::row_major>(typestrings.size() == 0));
  } catch (const NpyError&) {
    throw;
  } catch (const std::exception& e) {
    // xtensor says e.g. "Cast error: formats not matching <f8 vs <f4".
    throw NpyError(path.string() + ": not " + expected + " (" + e.what() + ")");
  }
}

}  // namespace

xt::xarray<float> load_npy_f32(const std::filesystem::path& path) {
  return read_npy<float>(path, "a float32 C-order .npy file");
}

xt::xarray<std::int64_t> load_npy_i64(const std::filesystem::path& path) {
  return read_npy<std::int64_t>(path, "an int64 C-order .npy file");
}

xt::xarray<bool> load_npy_bool(const std::filesystem::path& path) {
  // Both dtypes are one byte: read them as uint8, so a byte other than 0 or 1 is simply true.
  const auto bytes =
      read_npy<std::uint8_t>(path, "a bool or uint8 C-order .npy file", {"|b1", "|u1"});
  return xt::not_equal(bytes, std::uint8_t{0});
}

void save_npy_f32(const std::filesystem::path& path, const xt::xarray<float>& values) {
  try {
    write_file_atomically(path, xt::dump_npy(values));
  } catch (const std::exception& e) {
    throw NpyError(e.what());
  }
}

}  // namespace workbench
