#include "util/text.hpp"

#include <chrono>
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
