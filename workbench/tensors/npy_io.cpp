#include "tensors/npy_io.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include "util/files.hpp"
#include "util/text.hpp"

namespace workbench {
namespace {

// A .npy file's header, parsed here with unsigned bytes and every size checked against the file,
// before anything is allocated. (xtensor's own parser reads the header length through a signed
// char and trusts the shape.) Format: "\x93NUMPY", version, header length (2 bytes in version 1,
// 4 in versions 2 and 3, little-endian), then a Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct NpyHeader {
  std::string descr;  // "<f4", "<i8", "|b1", "|u1"
  std::vector<std::size_t> shape;
  std::size_t data_offset = 0;  // where the array's bytes start
};

NpyHeader parse_header(const std::string& bytes, const std::string& name) {
  const auto fail = [&](const std::string& why) { return NpyError(name + ": " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw fail("not a .npy file (no \\x93NUMPY magic)");
  const auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i]));
  };
  const std::size_t major = byte(6);
  std::size_t length = 0, prefix = 0;
  if (major == 1) {
    length = byte(8) | byte(9) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw fail("file is truncated");
    length = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    prefix = 12;
  } else {
    throw fail("unknown .npy version " + std::to_string(major));
  }
  if (length > bytes.size() - prefix)
    throw fail("file is truncated: its header claims " + std::to_string(length) + " bytes, but " +
               std::to_string(bytes.size() - prefix) + " follow");
  const std::string header = bytes.substr(prefix, length);

  NpyHeader parsed;
  parsed.data_offset = prefix + length;
  std::smatch m;
  static const std::regex descr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex fortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descr)) throw fail("the header has no 'descr'");
  parsed.descr = m[1];
  if (!std::regex_search(header, m, fortran)) throw fail("the header has no 'fortran_order'");
  if (m[1] == "True") throw fail("Fortran order is not supported; save it in C order");
  if (!std::regex_search(header, m, shape)) throw fail("the header has no 'shape'");
  static const std::regex dimension(R"(^\s*(\d{1,19})\s*$)");
  std::stringstream dims(m[1].str());
  for (std::string dim; std::getline(dims, dim, ',');) {
    if (dim.find_first_not_of(" \t") == std::string::npos) continue;  // "(3,)"
    std::smatch d;
    if (!std::regex_match(dim, d, dimension))
      throw fail("shape entry '" + trim(dim) + "' is not a size");
    const unsigned long long value = std::stoull(d[1]);
    if (value > std::numeric_limits<std::size_t>::max())
      throw fail("shape entry " + d[1].str() + " is too large");
    parsed.shape.push_back(static_cast<std::size_t>(value));
  }
  return parsed;
}

// Checks that the shape's bytes fit the file (no overflow on the way) and returns the count. The
// product of the nonzero sizes must fit a signed index too: xtensor computes its strides from it,
// even for an empty array such as (0, 2^32, 2^32), whose strides would overflow.
std::size_t element_count(const NpyHeader& header, std::size_t item_size, std::size_t file_size,
                          const std::string& name) {
  std::ptrdiff_t extent = 1;  // the product of the nonzero sizes
  bool empty = false;
  for (const std::size_t dim : header.shape) {
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (dim > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) ||
        __builtin_mul_overflow(extent, static_cast<std::ptrdiff_t>(dim), &extent))
      throw NpyError(name + ": its shape's element count overflows");
  }
  const std::size_t count = empty ? 0 : static_cast<std::size_t>(extent);
  std::size_t needed = 0;
  const bool overflows = __builtin_mul_overflow(count, item_size, &needed);
  if (overflows || needed > file_size - header.data_offset)
    throw NpyError(name + ": file is truncated: its shape needs " +
                   (overflows ? std::string("more than 2^64") : std::to_string(needed)) +
                   " bytes of data, but " + std::to_string(file_size - header.data_offset) +
                   " follow");
  return count;
}

// Decodes `bytes` as a C-order array of T whose dtype is one of `typestrings`; otherwise throws
// NpyError naming `name` and `expected`. Every byte count is checked before allocating.
template <class T>
xt::xarray<T> decode_npy(const std::string& bytes, const std::string& name,
                         const std::string& expected,
                         std::initializer_list<const char*> typestrings) {
  const NpyHeader header = parse_header(bytes, name);
  bool accepted = false;
  for (const char* typestring : typestrings) accepted |= header.descr == typestring;
  if (!accepted) throw NpyError(name + ": not " + expected + " (dtype " + header.descr + ")");
  const std::size_t count = element_count(header, sizeof(T), bytes.size(), name);
  xt::xarray<T> values = xt::xarray<T>::from_shape(header.shape);
  if (count) std::memcpy(values.data(), bytes.data() + header.data_offset, count * sizeof(T));
  return values;
}

std::string read_npy_file(const std::filesystem::path& path) {
  if (const std::string kind = non_regular_kind(path); !kind.empty())
    throw NpyError(path.string() + " is " + kind + ", not a regular .npy file");
  try {
    return read_file(path);
  } catch (const std::exception&) {
    throw NpyError(path.string() + ": cannot open file");
  }
}

}  // namespace

std::string non_regular_kind(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows a symlink to its file
  switch (status.type()) {
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "";  // regular, missing or not stat-able: opening it says what is wrong
  }
}

xt::xarray<float> decode_npy_f32(const std::string& bytes, const std::string& name) {
  return decode_npy<float>(bytes, name, "a float32 C-order .npy file", {"<f4"});
}

xt::xarray<std::int64_t> decode_npy_i64(const std::string& bytes, const std::string& name) {
  return decode_npy<std::int64_t>(bytes, name, "an int64 C-order .npy file", {"<i8"});
}

xt::xarray<bool> decode_npy_bool(const std::string& bytes, const std::string& name) {
  // Both dtypes are one byte: read them as uint8, so a byte other than 0 or 1 is simply true.
  const auto values =
      decode_npy<std::uint8_t>(bytes, name, "a bool or uint8 C-order .npy file", {"|b1", "|u1"});
  return xt::not_equal(values, std::uint8_t{0});
}

xt::xarray<float> load_npy_f32(const std::filesystem::path& path) {
  return decode_npy_f32(read_npy_file(path), path.string());
}

xt::xarray<std::int64_t> load_npy_i64(const std::filesystem::path& path) {
  return decode_npy_i64(read_npy_file(path), path.string());
}

xt::xarray<bool> load_npy_bool(const std::filesystem::path& path) {
  return decode_npy_bool(read_npy_file(path), path.string());
}

void write_npy_f32(std::ostream& out, const float* data, const std::vector<std::size_t>& shape) {
  std::size_t count = 1;
  for (const std::size_t dim : shape) count *= dim;
  // xtensor's public dump_npy writes to a file of its own (without checking the write) or to a
  // string (a copy); its stream writer does neither, and an adaptor is not copied.
  xt::detail::dump_npy_stream(out, xt::adapt(data, count, xt::no_ownership(), shape));
}

void save_npy_f32(const std::filesystem::path& path, const xt::xarray<float>& values) {
  const std::vector<std::size_t> shape(values.shape().begin(), values.shape().end());
  try {
    write_files_atomically(
        {{path, [&](std::ostream& out) { write_npy_f32(out, values.data(), shape); }}});
  } catch (const std::exception& e) {
    throw NpyError(e.what());
  }
}

}  // namespace workbench
