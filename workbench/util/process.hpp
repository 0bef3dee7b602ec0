#pragma once
// The one way the tools run another program: posix_spawn, with the child's output either passed
// through (run_process) or captured, bounded, and optionally streamed line by line and
// time-limited (run_captured). No shell is involved, so arguments need no quoting.
//
// Every child runs in a process group of its own, which is killed when the child is done with (so
// nothing it started outlives it), on a time-out, and, once kill_children_on_signals() is called,
// when this process gets SIGINT, SIGTERM or SIGHUP.
#include <chrono>
#include <cstddef>
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
  /// CapturedRun::output keeps this many bytes of the start and of the end of the output; what lies
  /// between is replaced by one line "… N bytes dropped …".
  std::size_t keep_bytes = std::size_t{1} << 20;
  /// A line longer than this is cut to this many bytes, then " … (N bytes cut)", before on_line.
  std::size_t max_line = std::size_t{64} << 10;
};

/// Runs `program` with `args`, stdin from /dev/null, stdout and stderr captured into one string
/// (stdout alone without options.capture_stderr), and waits, until the time limit if there is one,
/// even after the child closed its output. A `program` without a '/' is searched on PATH, as a
/// shell would (cmake, ctest, git).
/// @throws std::runtime_error if it cannot be started (or a stop was requested, see below).
CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args,
                         const CaptureOptions& options = {});

/// Installs handlers of SIGINT, SIGTERM and SIGHUP that kill the process group of every running
/// child, then end this process with the signal, as if there were no handler; and kills them at
/// exit() too. The workbook command calls it first.
void kill_children_on_signals();

/// Kills the process group of every running child, and makes every later run_process or
/// run_captured throw instead of starting one: for a signal handler that stops the program
/// (async-signal-safe).
void stop_children();

/// The folder of the running executable (build/bin), where its sibling programs are.
std::filesystem::path executable_dir();

}  // namespace workbench
