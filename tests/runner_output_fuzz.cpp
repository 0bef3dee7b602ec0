// libFuzzer target: the runner's scanners of what builds and tests print (first_error,
// compiler_warnings, progress_of, parse_failure and the scans of a test program's output) take any
// bytes without crashing or overflowing the stack (std::regex recursed once per character), and a
// failure's summary stays within its 240 characters.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/learner_tests.hpp"
#include "runner/registry.hpp"
#include "runner/workspace.hpp"
#include "util/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const workbook::Workspace ws{"/work/minimodel", "/work/minimodel/build"};
  workbook::first_error(text, ws);
  workbook::compiler_warnings(text, ws);
  for (const std::string& line : workbench::split_lines(text)) workbook::progress_of(line);
  if (workbook::parse_failure("Suite.Test", text).summary.size() > 240) __builtin_trap();
  workbook::last_test_started(text);
  workbook::sanitizer_finding(text, ws);
  workbook::todo_in(text);
  return 0;
}
