#include "workbench/npy_io.hpp"

#include <cstdint>
#include <fstream>

#include <xtensor/xnpy.hpp>

#include "workbench/manifest.hpp"

namespace workbench {

xt::xarray<float> load_npy_f32(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw NpyError(path.string() + ": cannot open file");
  try {
    // xt::load_npy does not notice a short read, so read the file object and check the stream.
    auto file = xt::detail::load_npy_file(stream);
    if (!stream) throw NpyError(path.string() + ": file is truncated");
    return xt::xarray<float>(std::move(file).cast<float, xt::layout_type::row_major>());
  } catch (const NpyError&) {
    throw;
  } catch (const std::exception& e) {
    // xtensor says e.g. "Cast error: formats not matching <f8 vs <f4".
    throw NpyError(path.string() + ": not a float32 C-order .npy file (" + e.what() + ")");
  }
}

xt::xarray<bool> load_npy_bool(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw NpyError(path.string() + ": cannot open file");
  try {
    auto file = xt::detail::load_npy_file(stream);
    if (!stream) throw NpyError(path.string() + ": file is truncated");
    if (file.m_typestring != "|b1" && file.m_typestring != "|u1")
      throw NpyError(path.string() + ": not a bool or uint8 .npy file (dtype " + file.m_typestring +
                     ")");
    // Read the bytes as uint8 (both dtypes are one byte), so a byte other than 0 or 1 is simply
    // true instead of an invalid bool.
    const xt::xarray<std::uint8_t> bytes =
        std::move(file).cast<std::uint8_t, xt::layout_type::row_major>(false);
    return xt::xarray<bool>(xt::not_equal(bytes, std::uint8_t{0}));
  } catch (const NpyError&) {
    throw;
  } catch (const std::exception& e) {
    throw NpyError(path.string() + ": not a C-order bool .npy file (" + e.what() + ")");
  }
}

void save_npy_f32(const std::filesystem::path& path, const xt::xarray<float>& values) {
  try {
    write_text_atomically(path, xt::dump_npy(values));
  } catch (const std::exception& e) {
    throw NpyError(e.what());
  }
}

}  // namespace workbench
