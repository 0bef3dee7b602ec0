#include "util/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace workbench {

std::string ProcessStatus::describe() const {
  if (exited) return "exit status " + std::to_string(code);
  if (timed_out) return "its time limit";
  return "signal " + std::to_string(code) + " (" + strsignal(code) + ")";
}

namespace {

std::runtime_error cannot_run(const std::string& program, const std::string& step, int error) {
  return std::runtime_error("cannot run " + program + ": " + step + ": " + std::strerror(error));
}

// posix_spawn*'s functions return an error number instead of setting errno.
void check(int error, const std::string& program, const char* step) {
  if (error != 0) throw cannot_run(program, step, error);
}

ProcessStatus wait_for(pid_t pid, const std::string& program) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw cannot_run(program, "waitpid", errno);
  if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
  return {false, WTERMSIG(status)};
}

// Owns the posix_spawn attribute objects, so that every exit path destroys them.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  explicit SpawnSetup(const std::string& program) {
    check(posix_spawn_file_actions_init(&actions), program, "file actions");
    if (const int error = posix_spawnattr_init(&attributes)) {
      posix_spawn_file_actions_destroy(&actions);
      throw cannot_run(program, "attributes", error);
    }
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

pid_t spawn(const std::string& program, const std::vector<std::string>& args,
            const SpawnSetup& setup) {
  std::vector<std::string> storage = {program};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const bool search_path = program.find('/') == std::string::npos;
  const int error = (search_path ? posix_spawnp : posix_spawn)(
      &pid, program.c_str(), &setup.actions, &setup.attributes, argv.data(), environ);
  if (error != 0) throw cannot_run(program, "spawn", error);
  return pid;
}

// Hands complete lines of `pending` to `on_line`, keeping a partial last line for later.
void emit_lines(std::string& pending, const CaptureOptions& options) {
  for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
    if (options.on_line) options.on_line(pending.substr(0, end));
    pending.erase(0, end + 1);
  }
}

}  // namespace

ProcessStatus run_process(const std::filesystem::path& program,
                          const std::vector<std::string>& args) {
  const SpawnSetup setup(program.string());
  return wait_for(spawn(program.string(), args, setup), program.string());
}

CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args,
                         const CaptureOptions& options) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw cannot_run(program, "pipe", errno);
  const bool limited = options.time_limit.count() > 0;
  pid_t pid = 0;
  try {
    SpawnSetup setup(program);
    check(posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0), program,
          "stdin");
    check(posix_spawn_file_actions_adddup2(&setup.actions, pipe_fds[1], 1), program, "stdout");
    if (options.capture_stderr)
      check(posix_spawn_file_actions_adddup2(&setup.actions, pipe_fds[1], 2), program, "stderr");
    if (!options.working_dir.empty())
      check(posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_dir.c_str()),
            program, "working directory");
    if (limited) {  // its own process group, so a timeout kills whatever it started too
      check(posix_spawnattr_setflags(&setup.attributes, POSIX_SPAWN_SETPGROUP), program, "flags");
      check(posix_spawnattr_setpgroup(&setup.attributes, 0), program, "process group");
    }
    pid = spawn(program, args, setup);
  } catch (...) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw;
  }
  close(pipe_fds[1]);

  CapturedRun run;
  std::string pending;
  const auto deadline = std::chrono::steady_clock::now() + options.time_limit;
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    int wait_ms = -1;
    if (limited) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        kill(-pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd readable{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&readable, 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    run.output.append(buffer, static_cast<std::size_t>(n));
    pending.append(buffer, static_cast<std::size_t>(n));
    emit_lines(pending, options);
  }
  close(pipe_fds[0]);
  if (!pending.empty() && options.on_line) options.on_line(pending);
  run.status = wait_for(pid, program);
  run.status.timed_out = timed_out;
  return run;
}

std::filesystem::path executable_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

}  // namespace workbench
