#include "workbench/npy_io.hpp"

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

xt::xarray<std::int64_t> load_npy_i64(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw NpyError(path.string() + ": cannot open file");
  try {
    // As load_npy_f32: check the stream after reading, and let cast<> check the dtype.
    auto file = xt::detail::load_npy_file(stream);
    if (!stream) throw NpyError(path.string() + ": file is truncated");
    return xt::xarray<std::int64_t>(
        std::move(file).cast<std::int64_t, xt::layout_type::row_major>());
  } catch (const NpyError&) {
    throw;
  } catch (const std::exception& e) {
    // xtensor says e.g. "Cast error: formats not matching <i4 vs <i8".
    throw NpyError(path.string() + ": not an int64 C-order .npy file (" + e.what() + ")");
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
