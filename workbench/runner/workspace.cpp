#include "runner/workspace.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "util/files.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// The one job count: the default build preset's, which `cmake --build --preset default` uses too.
int build_jobs(const Workspace& ws) {
  if (const char* level = std::getenv("CMAKE_BUILD_PARALLEL_LEVEL"); level && std::atoi(level) > 0)
    return std::atoi(level);
  try {
    const auto presets = nlohmann::json::parse(workbench::read_file(ws.repo / "CMakePresets.json"));
    for (const auto& preset : presets.at("buildPresets"))
      if (preset.at("name") == "default") return preset.at("jobs").get<int>();
  } catch (const std::exception& e) {
    throw EnvironmentError(
        "CMakePresets.json has no readable build preset \"default\" with "
        "\"jobs\": " +
        std::string(e.what()));
  }
  throw EnvironmentError("CMakePresets.json has no build preset \"default\"");
}

}  // namespace

std::string progress_of(const std::string& line) {
  static const std::regex compiling(
      R"(^(\[ *\d+%\]) Building CXX object .*?([^/]+)\.dir/(.+)\.o$)");
  static const std::regex linking(R"(^(\[ *\d+%\]) Linking CXX (executable|static library) (.+)$)");
  std::smatch m;
  if (!workbench::scannable(line)) return "";  // a long compiler message, not make's progress
  if (std::regex_match(line, m, compiling)) return m[1].str() + " compiling " + m[3].str();
  if (std::regex_match(line, m, linking)) return m[1].str() + " linking " + m[3].str();
  return "";
}

std::string Workspace::relative(const fs::path& path) const {
  const fs::path rel = path.lexically_normal().lexically_relative(repo.lexically_normal());
  if (rel.empty() || rel.native().rfind("..", 0) == 0) return path.string();
  return rel.string();
}

std::string Context::paint(const char* code, const std::string& text) const {
  return terminal ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
}

const Lab& Context::require_lab(const std::string& number) const {
  const auto normal = normalise_lab_number(number);
  const Lab* lab = normal ? find_lab(labs, *normal) : nullptr;
  if (!lab) throw UsageError("no lab " + normal.value_or(number) + ": labs are " + lab_range(labs));
  return *lab;
}

namespace {

ToolRun run_tool_with(const std::string& tool, const std::vector<std::string>& args,
                      const workbench::CaptureOptions& options) {
  try {
    const workbench::CapturedRun run = workbench::run_captured(tool, args, options);
    return {run.status.ok(), run.output};
  } catch (const std::exception& e) {
    throw EnvironmentError(std::string(e.what()) + " (is " + tool + " installed and on PATH?)");
  }
}

}  // namespace

ToolRun run_tool(const std::string& tool, const std::vector<std::string>& args) {
  return run_tool_with(tool, args, {});
}

ToolRun run_tool_stdout(const std::string& tool, const std::vector<std::string>& args) {
  workbench::CaptureOptions options;
  options.capture_stderr = false;
  return run_tool_with(tool, args, options);
}

std::string pristine_ref(const fs::path& repo) {
  const ToolRun run =
      run_tool("git", {"-C", repo.string(), "rev-parse", "--verify", "--quiet", "origin/HEAD"});
  return run.ok ? "origin/HEAD" : "HEAD";
}

namespace {

// A compiler's source excerpt under its error: "   12 |   return x;" or "      |          ^".
bool is_source_line(const std::string& line) {
  std::size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos) return false;
  while (at < line.size() && std::isdigit(static_cast<unsigned char>(line[at]))) ++at;
  while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
  return at < line.size() && line[at] == '|';
}

// The part of `line` a regex may scan: one template error's line can run to 100,000 characters
// (workbench::kMaxScannedLine).
std::string::const_iterator head_end(const std::string& line) {
  return line.begin() +
         static_cast<std::ptrdiff_t>(std::min(line.size(), workbench::kMaxScannedLine));
}

bool search_head(const std::string& line, std::smatch& m, const std::regex& pattern) {
  return std::regex_search(line.begin(), head_end(line), m, pattern,
                           std::regex_constants::match_continuous);
}

bool in_repository(const std::string& file, const Workspace& ws) {
  return fs::path(ws.relative(fs::path(file))).is_relative();
}

// One step of a template's instantiation chain, "file:line:col": g++'s "file:line:col:   required
// from …" (or "required by substitution of …", "recursively required from …", "in ‘constexpr’
// expansion of …"), clang's "file:line:col: note: in instantiation of … requested here".
// `in_repo` is set to whether the file is in the repository; nullopt for any other line.
std::optional<std::string> instantiation_step(const std::string& line, const Workspace& ws,
                                              bool& in_repo) {
  static const std::regex step(R"(^(.+?):(\d+):(\d+):()"
                               R"(   (recursively )?required (from|by) |)"
                               R"(   in .{1,3}constexpr.{1,3} expansion of |)"
                               R"( note: in instantiation of ))");
  std::smatch m;
  if (!search_head(line, m, step)) return std::nullopt;
  in_repo = in_repository(m[1].str(), ws);
  return ws.relative(fs::path(m[1].str())) + ":" + m[2].str() + ":" + m[3].str();
}

// The lines g++ prints above an error in a template: "file: In instantiation of ‘…’:", its steps,
// and "file:line:col:   [ skipping 4 instantiation contexts, …]".
bool in_gxx_chain(const std::string& line, const Workspace& ws) {
  static const std::regex header(R"(^(.+?): In (instantiation|substitution) of |)"
                                 R"(^(.+?):(\d+):(\d+):   \[ skipping \d+ instantiation contexts)");
  std::smatch m;
  bool in_repo = false;
  return search_head(line, m, header) || instantiation_step(line, ws, in_repo).has_value();
}

// Where the error on line `at` of `lines`, in a file outside the repository, comes from: the
// innermost step of its instantiation chain in a repository file. g++ prints the chain above the
// error, innermost first; clang prints it below, innermost first, and may leave out the steps
// before a deferred instantiation: then the first such step of a later error of the same
// compilation (up to make's next step) names the line. "" if none does.
std::string repository_origin(const std::vector<std::string>& lines, std::size_t at,
                              const Workspace& ws) {
  std::string innermost;
  for (std::size_t i = at; i > 0 && in_gxx_chain(lines[i - 1], ws); --i) {
    bool in_repo = false;
    const auto step = instantiation_step(lines[i - 1], ws, in_repo);
    if (step && in_repo) innermost = *step;  // the last one seen going up is the innermost
  }
  if (!innermost.empty()) return innermost;
  for (std::size_t i = at + 1; i < lines.size() && progress_of(lines[i]).empty(); ++i) {
    bool in_repo = false;
    const auto step = instantiation_step(lines[i], ws, in_repo);
    if (step && in_repo) return *step;
  }
  return "";
}

}  // namespace

std::string first_error(const std::string& build_output, const Workspace& ws) {
  // "file:line:col: error: message". Only the line's head goes through the regex.
  static const std::regex error(R"(^(.+?):(\d+):(\d+:)? (fatal error|error): )");
  const std::vector<std::string> lines = workbench::split_lines(build_output);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::smatch m;
    if (!search_head(line, m, error)) continue;
    std::string text = ws.relative(fs::path(m[1].str())) + ":" + m[2].str() + ":" + m[3].str() +
                       " " + m[4].str() + ": " + line.substr(static_cast<std::size_t>(m.length(0)));
    for (std::size_t j = i + 1; j < lines.size() && j <= i + 3 && is_source_line(lines[j]); ++j)
      text += "\n" + lines[j];
    if (!in_repository(m[1].str(), ws))
      if (const std::string origin = repository_origin(lines, i, ws); !origin.empty())
        text += "\n" + origin +
                ": the error above, in a file outside the repository, comes from this line";
    return text;
  }
  for (const auto& line : lines)  // the linker's messages carry no line number
    if (line.find("undefined reference") != std::string::npos ||
        line.find("error:") != std::string::npos)
      return workbench::trim(line);
  std::string tail;
  for (std::size_t i = lines.size() > 10 ? lines.size() - 10 : 0; i < lines.size(); ++i)
    tail += lines[i] + "\n";
  return workbench::trim(tail);
}

std::vector<std::string> compiler_warnings(const std::string& build_output, const Workspace& ws) {
  static const std::regex warning(R"(^(.+?):(\d+):(\d+): warning: )");
  std::vector<std::string> warnings;
  std::set<std::string> seen;
  for (const std::string& line : workbench::split_lines(build_output)) {
    std::smatch m;
    if (!search_head(line, m, warning)) continue;
    const std::string where =
        ws.relative(fs::path(m[1].str())) + ":" + m[2].str() + ":" + m[3].str() + ": warning: ";
    const std::string message = line.substr(static_cast<std::size_t>(m.length(0)));
    // Once per place and option: g++ may say the same twice in other words ("narrowing
    // conversion of ‘(std::size_t)T’ …", then "… of ‘T’ …").
    const auto option = message.rfind(" [-W");
    const std::string key =
        where +
        (option == std::string::npos || message.back() != ']' ? message : message.substr(option));
    if (seen.insert(key).second) warnings.push_back(where + message);
  }
  return warnings;
}

BuildResult build_targets(const Workspace& ws, const std::vector<std::string>& targets) {
  if (!fs::exists(ws.build / "CMakeCache.txt"))
    throw EnvironmentError(ws.build.string() + " is not a configured build folder; from " +
                           ws.repo.string() +
                           " run `cmake --preset default` (or pass --build-dir)");
  std::vector<std::string> args = {"--build", ws.build.string(), "-j",
                                   std::to_string(build_jobs(ws)), "--target"};
  args.insert(args.end(), targets.begin(), targets.end());

  // Progress goes to stderr, so that stdout stays what the verb prints (grade --json).
  const bool overwrite = isatty(STDERR_FILENO);
  bool shown = false;
  workbench::CaptureOptions options;
  options.on_line = [&](const std::string& line) {
    const std::string step = progress_of(line);
    if (step.empty()) return;
    std::cerr << (overwrite ? "\r\033[K" : "") << "build " << step << (overwrite ? "" : "\n")
              << std::flush;
    shown = true;
  };
  auto build = [&] {
    try {
      return workbench::run_captured("cmake", args, options);
    } catch (const std::exception& e) {
      throw EnvironmentError(std::string(e.what()) + " (is cmake installed and on PATH?)");
    }
  };
  workbench::CapturedRun run = build();
  // After labs/labs.json changed, make resolves the target names in its old Makefile and stops
  // with "No rule" before cmake gets to regenerate it. Regenerate, then build once more.
  if (!run.status.ok() && run.output.find("No rule to make target") != std::string::npos) {
    const workbench::CapturedRun regenerate =
        workbench::run_captured("cmake", {"-S", ws.repo.string(), "-B", ws.build.string()});
    run.output += regenerate.output;
    if (!regenerate.status.ok()) {
      run.status = regenerate.status;
    } else {
      const workbench::CapturedRun retry = build();
      run = {retry.status, run.output + retry.output};
    }
  }
  if (shown && overwrite) std::cerr << "\r\033[K" << std::flush;

  BuildResult result;
  result.log = ws.build / "workbook-build.log";
  workbench::write_file_atomically(result.log, run.output);
  result.ok = run.status.ok();
  if (!result.ok) result.first_error = first_error(run.output, ws);
  result.warnings = compiler_warnings(run.output, ws);
  return result;
}

bool crashed(const workbench::ProcessStatus& status) {
  return !status.exited || status.code == kSanitizerExit;
}

std::chrono::seconds time_limit(std::chrono::seconds usual) {
  const char* given = std::getenv("WORKBOOK_TIME_LIMIT");
  return given && std::atoi(given) > 0 ? std::chrono::seconds(std::atoi(given)) : usual;
}

std::string how_it_ended(const workbench::ProcessStatus& status, std::chrono::seconds limit) {
  if (status.timed_out) {
    const long long n = limit.count() % 60 == 0 ? limit.count() / 60 : limit.count();
    return "was stopped after " + std::to_string(n) + (limit.count() % 60 == 0 ? " min" : " s") +
           ", its time limit";
  }
  if (status.exited && status.code == kSanitizerExit) return "was stopped by a sanitizer";
  if (!status.exited) return "crashed with " + status.describe();
  return "ended with " + status.describe();
}

BuildLock::BuildLock(const Workspace& ws) {
  std::error_code error;
  if (!fs::is_directory(ws.build, error)) return;
  const fs::path path = ws.build / "workbook.lock";
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;  // a read-only build folder: its verbs will say so
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    (void)!pread(fd_, holder, sizeof holder - 1, 0);
    std::cerr << "workbook: waiting for another workbook command on " << ws.relative(ws.build)
              << "/ (pid " << workbench::trim(holder) << ")…\n"
              << std::flush;
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) break;
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) == 0) (void)!pwrite(fd_, pid.data(), pid.size(), 0);
}

BuildLock::~BuildLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

nlohmann::json load_state(const Workspace& ws) {
  const fs::path path = ws.build / "workbook-state.json";
  if (!fs::exists(path)) return nlohmann::json::object();
  const std::string text = workbench::read_file(path);
  if (workbench::json_too_deep(text)) return nlohmann::json::object();  // damaged, as below
  const auto state = nlohmann::json::parse(text, nullptr, false);
  return state.is_object() ? state : nlohmann::json::object();
}

void save_state(const Workspace& ws, const nlohmann::json& state) {
  workbench::write_file_atomically(ws.build / "workbook-state.json", state.dump(2) + "\n");
}

void update_state(const Workspace& ws, const std::function<void(nlohmann::json& state)>& change) {
  nlohmann::json state = load_state(ws);
  change(state);
  save_state(ws, state);
}

}  // namespace workbook
