#pragma once
// The one way the tools run another program: posix_spawn, with the child's output either passed
// through (run_process) or captured, and optionally streamed line by line and time-limited
// (run_captured). No shell is involved, so arguments need no quoting.
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace workbench {

/// How a child process ended.
struct ProcessStatus {
  bool exited = false;     ///< false: it was killed by a signal (it crashed, or timed out)
  int code = 0;            ///< exit status if exited, signal number otherwise
  bool timed_out = false;  ///< killed by run_captured because it ran past its time limit
  bool ok() const { return exited && code == 0; }
  std::string describe() const;  ///< "exit status 2", "signal 11 (Segmentation fault)", …
};

/// Runs `program` with `args`, sharing this process's stdin, stdout and stderr, and waits.
/// @throws std::runtime_error if it cannot be started.
ProcessStatus run_process(const std::filesystem::path& program,
                          const std::vector<std::string>& args);

/// A finished child process and everything it wrote to stdout and stderr, interleaved.
struct CapturedRun {
  ProcessStatus status;
  std::string output;
};

struct CaptureOptions {
  /// Called with each complete line of output as it arrives (without its '\n').
  std::function<void(const std::string& line)> on_line;
  /// Zero: no limit. Otherwise the child (and its process group) is killed after this long.
  std::chrono::seconds time_limit{0};
  /// Where the child runs; empty: this process's working directory.
  std::filesystem::path working_dir;
  /// false: stdout alone is captured, and the child's stderr is this process's (a warning of
  /// git's then never ends up in the content it prints on stdout).
  bool capture_stderr = true;
};

/// Runs `program` with `args`, stdin from /dev/null, stdout and stderr captured into one string
/// (stdout alone without options.capture_stderr), and waits. A `program` without a '/' is searched
/// on PATH, as a shell would (cmake, ctest, git).
/// @throws std::runtime_error if it cannot be started.
CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args,
                         const CaptureOptions& options = {});

/// The folder of the running executable (build/bin), where its sibling programs are.
std::filesystem::path executable_dir();

}  // namespace workbench
