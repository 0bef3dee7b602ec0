#pragma once
// Small text helpers shared by every tool: one trim, one line splitter, one number format, and
// the bounds on what the tools scan with a std::regex or parse as JSON.
#include <cstddef>
#include <string>
#include <vector>

namespace workbench {

/// `text` without leading and trailing whitespace (space, tab, CR, LF, FF, VT).
std::string trim(const std::string& text);

/// The lines of `text`, without their '\n' (and without a trailing '\r').
std::vector<std::string> split_lines(const std::string& text);

/// True if `text` begins with `prefix`.
bool starts_with(const std::string& text, const std::string& prefix);

/// The longest line the tools match with a std::regex. libstdc++'s matcher recurses once per
/// character it consumes, so a line of about 25,000 characters (one long template error, a test's
/// output) overflows the stack. Every pattern the tools look for fits in this many characters; a
/// longer line is simply not a match. Text from builds, tests, programs and files is unbounded.
inline constexpr std::size_t kMaxScannedLine = 1000;

/// True if `line` is short enough to match with a std::regex (kMaxScannedLine).
inline bool scannable(const std::string& line) { return line.size() <= kMaxScannedLine; }

/// The deepest nesting of arrays and objects the tools parse as JSON. Their files nest a few
/// levels; nlohmann's copy and comparison recurse per level, so 500,000 levels overflow the stack.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// True if `json` nests arrays and objects more than kMaxJsonDepth deep. A scan without recursion
/// that skips strings (and their escapes); it says nothing else about whether `json` is valid.
bool json_too_deep(const std::string& json);

/// Whether `bytes` is valid UTF-8; if not, `where` gets the offset of the first invalid byte.
bool valid_utf8(const std::string& bytes, std::size_t* where = nullptr);

/// How displayable() shows whitespace: as it is (the explorer's page, which marks it itself), or
/// visible (the figures and the printouts: a space as "␣", a newline as "↵").
enum class Whitespace { as_is, visible };

/// A token's bytes as text anything can show, the one way every tool shows a token: valid UTF-8
/// as it is, each byte of an invalid sequence as "\xNN" (a BPE token may hold half a character,
/// and which bytes it holds is the point), so that the result is always valid UTF-8 (and JSON).
std::string displayable(const std::string& bytes, Whitespace whitespace = Whitespace::as_is);

/// `value` as printf's `pattern` ("%.3f", "%.1e") prints it: the verify programs' numbers.
std::string format_number(const char* pattern, double value);

/// "1.00e-05": how the verify programs and `workbook diff` print differences and tolerances.
std::string scientific(double value);

/// "1.01 s", "14.6 ms", "0.0146 ms": a duration to 3 significant digits, in ms below a second.
std::string seconds_text(double seconds);

/// The current UTC time in `strftime_format`, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string utc_now(const char* strftime_format);

}  // namespace workbench
