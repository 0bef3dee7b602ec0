#include "util/text.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <sstream>

namespace workbench {

std::string trim(const std::string& text) {
  static const char* const kWhitespace = " \t\r\n\f\v";
  const auto first = text.find_first_not_of(kWhitespace);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool json_too_deep(const std::string& json) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote or not
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

bool valid_utf8(const std::string& bytes, std::size_t* where) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    std::size_t length = 0;
    unsigned lowest = 0;  // the smallest code point of that length: no overlong forms
    unsigned code = 0;
    if (c < 0x80)
      length = 1, code = c;
    else if ((c & 0xE0) == 0xC0)
      length = 2, code = c & 0x1F, lowest = 0x80;
    else if ((c & 0xF0) == 0xE0)
      length = 3, code = c & 0x0F, lowest = 0x800;
    else if ((c & 0xF8) == 0xF0)
      length = 4, code = c & 0x07, lowest = 0x10000;
    bool ok = length > 0 && i + length <= n;
    for (std::size_t k = 1; ok && k < length; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    ok = ok && code >= lowest && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
    if (!ok) {
      if (where) *where = i;
      return false;
    }
    i += length;
  }
  return true;
}

std::string displayable(const std::string& bytes, Whitespace whitespace) {
  std::string valid;
  for (std::size_t i = 0; i < bytes.size();) {
    std::size_t bad = 0;
    const std::string rest = bytes.substr(i);
    if (valid_utf8(rest, &bad)) {
      valid += rest;
      break;
    }
    valid += rest.substr(0, bad);
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned char>(rest[bad]));
    valid += escaped;
    i += bad + 1;
  }
  if (whitespace == Whitespace::as_is) return valid;
  std::string text;
  for (const char c : valid) {
    if (c == ' ')
      text += "\xe2\x90\xa3";  // ␣
    else if (c == '\n')
      text += "\xe2\x86\xb5";  // ↵
    else
      text += c;
  }
  return text;
}

std::string format_number(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string scientific(double value) {
  std::ostringstream out;
  out << std::setprecision(2) << std::scientific << value;
  return out.str();
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  const double ms = seconds * 1000;
  if (seconds >= 1)
    out << std::setprecision(3) << seconds << " s";  // 1.01 s, 12.3 s, 456 s
  else if (ms >= 1)
    out << std::fixed << std::setprecision(ms >= 100 ? 0 : ms >= 10 ? 1 : 2) << ms << " ms";
  else
    out << std::setprecision(3) << ms << " ms";  // 0.0146 ms
  return out.str();
}

std::string utc_now(const char* strftime_format) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::ostringstream out;
  out << std::put_time(&utc, strftime_format);
  return out.str();
}

}  // namespace workbench
