#include "tensors/npy_io.hpp"

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xoperation.hpp>

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

// The three entries of a header's dict literal, as their text: 'descr' (a string), 'fortran_order'
// (True or False) and 'shape' (a tuple's inside, "2, 3"); nullopt where the dict has none.
struct HeaderDict {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::string> shape;
};

// Reads the dict literal by hand, without recursion: only its top-level keys count (a value may
// quote "'descr': '<i8'"), and other keys' values are skipped. numpy writes no escapes; a
// backslash in a string skips the character after it.
template <class Fail>
HeaderDict read_header_dict(const std::string& text, const Fail& fail) {
  std::size_t at = 0;
  const auto skip_space = [&] {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  };
  const auto next_is = [&](char c) {
    skip_space();
    return at < text.size() && text[at] == c;
  };
  const auto expect = [&](char c) {
    if (!next_is(c))
      throw fail(std::string("the header is not a dict literal: expected '") + c + "'");
    ++at;
  };
  const auto string_literal = [&] {  // 'text' or "text" -> text
    skip_space();
    if (at >= text.size() || (text[at] != '\'' && text[at] != '"'))
      throw fail("the header is not a dict literal: expected a quoted string");
    const char quote = text[at++];
    std::string value;
    for (; at < text.size() && text[at] != quote; ++at) {
      if (text[at] == '\\' && at + 1 < text.size()) ++at;
      value += text[at];
    }
    if (at >= text.size()) throw fail("the header has an unterminated string");
    ++at;
    return value;
  };
  const auto skip_value = [&] {  // up to the ',' or '}' that ends it, brackets and strings skipped
    std::size_t depth = 0;
    for (skip_space(); at < text.size(); ++at) {
      const char c = text[at];
      if (c == '\'' || c == '"') {
        string_literal();
        --at;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if ((c == ',' || c == '}') && depth == 0) {
        return;
      }
    }
  };

  HeaderDict dict;
  expect('{');
  while (!next_is('}')) {
    const std::string key = string_literal();
    expect(':');
    skip_space();
    const auto once = [&](bool seen) {
      if (seen) throw fail("the header names '" + key + "' twice");
    };
    if (key == "descr") {
      once(dict.descr.has_value());
      dict.descr = string_literal();
    } else if (key == "fortran_order") {
      once(dict.fortran_order.has_value());
      if (text.compare(at, 4, "True") == 0) {
        dict.fortran_order = true;
        at += 4;
      } else if (text.compare(at, 5, "False") == 0) {
        dict.fortran_order = false;
        at += 5;
      } else {
        throw fail("the header's 'fortran_order' is not True or False");
      }
    } else if (key == "shape") {
      once(dict.shape.has_value());
      expect('(');
      const std::size_t close = text.find(')', at);
      if (close == std::string::npos) throw fail("the header's 'shape' has no ')'");
      dict.shape = text.substr(at, close - at);
      at = close + 1;
    } else {
      skip_value();
    }
    if (next_is(',')) {
      ++at;
    } else if (!next_is('}')) {
      throw fail("the header is not a dict literal: expected ',' or '}' after '" + key + "'");
    }
  }
  ++at;
  skip_space();
  if (at != text.size()) throw fail("the header has text after its dict");
  return dict;
}

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
  const HeaderDict dict = read_header_dict(header, fail);
  if (!dict.descr) throw fail("the header has no 'descr'");
  parsed.descr = *dict.descr;
  if (!dict.fortran_order) throw fail("the header has no 'fortran_order'");
  if (*dict.fortran_order) throw fail("Fortran order is not supported; save it in C order");
  if (!dict.shape) throw fail("the header has no 'shape'");
  // "2, 3" or "3," or "": sizes of at most 19 digits, each between commas.
  std::size_t start = 0;
  while (start <= dict.shape->size()) {
    std::size_t end = dict.shape->find(',', start);
    if (end == std::string::npos) end = dict.shape->size();
    const std::string dim = trim(dict.shape->substr(start, end - start));
    start = end + 1;
    if (dim.empty()) continue;  // "(3,)"
    if (dim.size() > 19 || dim.find_first_not_of("0123456789") != std::string::npos)
      throw fail("shape entry '" + dim + "' is not a size");
    const unsigned long long value = std::stoull(dim);
    if (value > std::numeric_limits<std::size_t>::max())
      throw fail("shape entry " + dim + " is too large");
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
  if (!accepted)  // a dtype of 60,000 characters is cut: the message stays one line
    throw NpyError(name + ": not " + expected + " (dtype " +
                   (header.descr.size() > 40 ? header.descr.substr(0, 37) + "..." : header.descr) +
                   ")");
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
    case fs::file_type::fifo:
    case fs::file_type::character:
    case fs::file_type::block:
    case fs::file_type::socket:
      return file_type_name(status.type());
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
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the header says '<f4'");
  // Format 1.0, as NumPy writes it: magic, version, the header's length (2 bytes, little-endian),
  // then a Python dict literal padded with spaces to a multiple of 64 bytes and ended by '\n'.
  std::size_t count = 1;
  std::string dims;
  for (const std::size_t dim : shape) {
    count *= dim;
    dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
  }
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t preamble = 10;  // magic (6), version (2), header length (2)
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  if (header.size() > 0xFFFF)
    throw NpyError("a shape of " + std::to_string(shape.size()) +
                   " dimensions does not fit a .npy 1.0 header");
  const char length[2] = {static_cast<char>(header.size() & 0xFF),
                          static_cast<char>(header.size() >> 8)};
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(length, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(count * sizeof(float)));
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
