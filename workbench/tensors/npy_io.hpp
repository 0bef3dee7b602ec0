#pragma once
// .npy input and output for tests, verify programs and `workbook attend`, on top of xtensor's
// npy support, which does not notice a truncated file by itself.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "minimodel/shapes.hpp"

namespace workbench {

/// A .npy file that cannot be used; the message names the file and the reason.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Loads a little-endian float32, C-order .npy file of any rank.
/// @throws NpyError if the file is missing, not .npy, truncated, or of another dtype or order.
xt::xarray<float> load_npy_f32(const std::filesystem::path& path);

/// Loads a C-order .npy file of any rank holding numpy bool ('|b1') or uint8 ('|u1'); a nonzero
/// byte is true. For masks, e.g. a key-padding mask (B, S) with true = ignore that key.
/// @throws NpyError if the file is missing, not .npy, truncated, or of another dtype or order.
xt::xarray<bool> load_npy_bool(const std::filesystem::path& path);

/// Loads a little-endian int64, C-order .npy file of any rank (e.g. token positions).
/// @throws NpyError if the file is missing, not .npy, truncated, or of another dtype or order.
xt::xarray<std::int64_t> load_npy_i64(const std::filesystem::path& path);

/// What `path` names when it is neither a regular file nor missing, e.g. "a FIFO"; "" otherwise.
/// The readers above refuse such a path before opening it: reading a FIFO or a device would block
/// or never end.
std::string non_regular_kind(const std::filesystem::path& path);

/// The three readers above, on a file's bytes already in memory (the fuzz target's entry point);
/// `name` stands for the file in messages.
/// @throws NpyError as the readers do.
xt::xarray<float> decode_npy_f32(const std::string& bytes, const std::string& name);
xt::xarray<bool> decode_npy_bool(const std::string& bytes, const std::string& name);
xt::xarray<std::int64_t> decode_npy_i64(const std::string& bytes, const std::string& name);

/// Writes the floats at `data` as a float32, C-order .npy of `shape` to `out`, without copying
/// them (for workbench::write_files_atomically's writers).
void write_npy_f32(std::ostream& out, const float* data, const std::vector<std::size_t>& shape);

/// Writes `values` as float32 .npy, atomically (temporary file, then rename).
/// @throws NpyError if the file cannot be written.
void save_npy_f32(const std::filesystem::path& path, const xt::xarray<float>& values);

/// Copies a loaded array into a fixed-rank tensor.
/// @throws NpyError naming `what` and the shape if the rank is not N.
template <std::size_t N>
xt::xtensor<float, N> to_rank(const xt::xarray<float>& values, const std::string& what) {
  if (values.dimension() != N)
    throw NpyError(what + " has shape " + minimodel::shape_of(values) + " but must have " +
                   std::to_string(N) + " dimensions");
  return xt::xtensor<float, N>(values);
}

}  // namespace workbench
