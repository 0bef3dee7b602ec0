#pragma once
// Where the workbook command works (the repository and its build folder), how it prints, and how
// it builds: `cmake --build` as a child process, its progress streamed to stderr.
#include <chrono>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/registry.hpp"
#include "util/process.hpp"

namespace workbook {

/// Exit statuses of every verb; `workbook --help` documents them.
enum ExitStatus : int {
  kSuccess = 0,
  kNotDone = 1,      ///< a check failed, a test failed, the lab is not done
  kUsage = 2,        ///< a bad command line: an unknown lab, a missing confirmation
  kEnvironment = 3,  ///< the environment: no cmake or git, an unconfigured build folder
  kCrashed = 4,      ///< the learner's code crashed, a sanitizer stopped it, or it ran too long
};

/// The exit status a sanitizer gives the learner's programs that it stops (workbook sets it in
/// ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS for its children): not 1, a TODO stub's.
constexpr int kSanitizerExit = 86;

/// Whether a child that ran the learner's code crashed: killed by a signal (a time-out too), or
/// stopped by a sanitizer.
bool crashed(const workbench::ProcessStatus& status);

/// `usual`, unless the environment variable WORKBOOK_TIME_LIMIT gives a number of seconds: the time
/// a verb lets the learner's code run before stopping it.
std::chrono::seconds time_limit(std::chrono::seconds usual);

/// "stopped after 10 minutes, its time limit" for a time-out, "crashed with signal 11 (…)",
/// "was stopped by a sanitizer" or "exit status 2" otherwise.
std::string how_it_ended(const workbench::ProcessStatus& status, std::chrono::seconds limit);

/// A bad command line (exit status 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A problem with the environment rather than the learner's code (exit status 3).
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The repository and its build folder.
struct Workspace {
  std::filesystem::path repo;
  std::filesystem::path build;
  /// Relative to the repository when inside it, for short messages.
  std::string relative(const std::filesystem::path& path) const;
  std::filesystem::path bin(const std::string& program) const { return build / "bin" / program; }
};

/// One command at a time on a build folder: BUILD/workbook.lock, locked with flock(2) for as long
/// as this object lives, with the holder's pid written in it. A second command waits for it, after
/// one line on stderr: "workbook: waiting for another workbook command on build/ (pid 123)…".
/// Without a build folder there is nothing to lock (the verb says what is missing).
class BuildLock {
 public:
  explicit BuildLock(const Workspace& ws);
  ~BuildLock();
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  int fd_ = -1;
};

/// The little the verbs remember (hint counters, Break it predictions), in
/// BUILD/workbook-state.json: in the build tree, never in the learner's sources. A missing or
/// damaged file reads as an empty object, so deleting it loses only that.
nlohmann::json load_state(const Workspace& ws);
void save_state(const Workspace& ws, const nlohmann::json& state);

/// Reads the state afresh, lets `change` edit its own keys, and writes it back atomically. The
/// way every verb writes it: a copy read earlier would erase what other verbs wrote meanwhile
/// (a hint shown while `break` builds).
void update_state(const Workspace& ws, const std::function<void(nlohmann::json& state)>& change);

/// What every verb gets: the workspace, the registry's labs, and how to print.
struct Context {
  Workspace ws;
  std::vector<Lab> labs;
  bool terminal = false;  ///< stdout is a terminal: colour and progress bars

  std::string green(const std::string& text) const { return paint("32", text); }
  std::string red(const std::string& text) const { return paint("31", text); }
  std::string yellow(const std::string& text) const { return paint("33", text); }
  std::string bold(const std::string& text) const { return paint("1", text); }

  /// The lab `number` names ("0", "00"). @throws UsageError "no lab 07: labs are 00–02".
  const Lab& require_lab(const std::string& number) const;

 private:
  std::string paint(const char* code, const std::string& text) const;
};

struct BuildResult {
  bool ok = false;
  std::string first_error;    ///< "src/…/scaled_dot_product.cpp:18:5: error: …" and its source
  std::filesystem::path log;  ///< the full output of the build, always kept
  /// The compiler's warnings, each once: "src/…:8:25: warning: …" (compiler_warnings).
  std::vector<std::string> warnings;
};

/// `cmake --build BUILD -j N --target …`, with each step shown on stderr as it happens and the
/// whole output kept in BUILD/workbook-build.log. N is the default build preset's "jobs" (in
/// CMakePresets.json), unless CMAKE_BUILD_PARALLEL_LEVEL says otherwise.
/// @throws EnvironmentError if BUILD is not configured or cmake cannot run.
BuildResult build_targets(const Workspace& ws, const std::vector<std::string>& targets);

/// The first compiler or linker error in a build's output, trimmed to a few lines. An error in a
/// file outside the repository (a template in a library's header) is followed by the line of the
/// repository it comes from: the innermost of its instantiation lines (g++'s "required from",
/// clang's "in instantiation of … requested here") in a repository file, "src/…:261:40: the error
/// above, in a file outside the repository, comes from this line".
std::string first_error(const std::string& build_output, const Workspace& ws);

/// Each compiler warning of a build's output, in order, once per place and option (g++ may print
/// one twice): "src/…/gpt.cpp:8:25: warning: narrowing conversion … [-Wnarrowing]", its path
/// relative to the repository when inside it, as the compiler wrote it otherwise.
std::vector<std::string> compiler_warnings(const std::string& build_output, const Workspace& ws);

/// A line of make's output as a progress step: "[ 45%] Building CXX object tests/CMakeFiles/
/// lab01_test_objects.dir/lab01_test.cpp.o" -> "[ 45%] compiling lab01_test.cpp"; "" for any
/// other line (and for any line over workbench::kMaxScannedLine characters).
std::string progress_of(const std::string& line);

/// How a tool run by run_tool ended.
struct ToolRun {
  bool ok = false;  ///< exit status 0
  std::string output;
};

/// Runs `tool` (cmake, ctest, git) from PATH with `args`, output captured.
/// @throws EnvironmentError if it cannot be started.
ToolRun run_tool(const std::string& tool, const std::vector<std::string>& args);

/// The same, capturing stdout alone: for content a tool prints (`git show REF:PATH`), which its
/// warnings must not join. Its stderr is ours, so the learner still sees them.
ToolRun run_tool_stdout(const std::string& tool, const std::vector<std::string>& args);

/// The commit whose learner files are the pristine stubs: origin/HEAD in a learner's clone (their
/// own commits may hold their work), HEAD where there is no origin (cmake/check_stubs.cmake
/// agrees).
std::string pristine_ref(const std::filesystem::path& repo);

}  // namespace workbook
