#pragma once
// Small text helpers shared by every tool: one trim, one line splitter, one number format.
#include <string>
#include <vector>

namespace workbench {

/// `text` without leading and trailing whitespace (space, tab, CR, LF, FF, VT).
std::string trim(const std::string& text);

/// The lines of `text`, without their '\n' (and without a trailing '\r').
std::vector<std::string> split_lines(const std::string& text);

/// True if `text` begins with `prefix`.
bool starts_with(const std::string& text, const std::string& prefix);

/// "1.00e-05": how the verify programs and `workbook diff` print differences and tolerances.
std::string scientific(double value);

/// The current UTC time in `strftime_format`, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string utc_now(const char* strftime_format);

}  // namespace workbench
