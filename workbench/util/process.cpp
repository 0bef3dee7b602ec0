#include "util/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
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

// The process groups of the running children, for signal handlers: a fixed array of lock-free
// atomics, 0 for a free slot. The tools run one child at a time; a child beyond the last slot still
// runs, but only its own clean-up kills its group.
constexpr std::size_t kMaxGroups = 64;
std::atomic<pid_t> live_groups[kMaxGroups];
std::atomic<bool> stopping{false};
static_assert(std::atomic<pid_t>::is_always_lock_free, "signal handlers read the registry");

void kill_groups() {
  for (auto& group : live_groups)
    if (const pid_t pgid = group.load(); pgid > 0) kill(-pgid, SIGKILL);
}

void die_of(int signal) {
  kill_groups();
  ::signal(signal, SIG_DFL);
  raise(signal);  // delivered, with its default action, when this handler returns
}

// Signals that would end this process are held from just before a child is spawned until its
// group is in the registry, so that no child escapes a handler.
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t held;
    sigemptyset(&held);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&held, signal);
    pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  ~HeldSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  const sigset_t& previous() const { return previous_; }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t previous_;
};

// A spawned child, its process group in the registry until the child is reaped. Whatever way
// the owner leaves (an exception from on_line too), the group is killed and the child reaped.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {  // called with the signals held
    for (auto& group : live_groups) {
      pid_t free = 0;
      if (group.compare_exchange_strong(free, pid)) {
        slot_ = &group;
        break;
      }
    }
  }
  ~Child() {
    if (!reaped_) wait();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }

  // Whether the child has ended, without reaping it: its group id stays reserved until then.
  bool ended() const {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid_;
  }
  // Kills the child's group (whatever it left behind, or all of it), then reaps the child.
  ProcessStatus wait() {
    kill(-pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    if (slot_) slot_->store(0);
    if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
    return {false, WTERMSIG(status)};
  }
  // Waits for the child itself to end (a child sharing this terminal gets Ctrl-C from handlers),
  // then kills and reaps as wait() does.
  ProcessStatus wait_for_end() {
    siginfo_t info{};
    while (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    return wait();
  }

 private:
  pid_t pid_;
  std::atomic<pid_t>* slot_ = nullptr;
  bool reaped_ = false;
};

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

// Spawns `program` in a process group of its own, with the default action of the signals the
// handlers catch and this thread's usual signal mask. Called with the signals held.
pid_t spawn(const std::string& program, const std::vector<std::string>& args, SpawnSetup& setup,
            const HeldSignals& held) {
  if (stopping.load()) throw std::runtime_error("cannot run " + program + ": stopped by a signal");
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, signal);
  check(posix_spawnattr_setflags(&setup.attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                        POSIX_SPAWN_SETSIGDEF),
        program, "flags");
  check(posix_spawnattr_setpgroup(&setup.attributes, 0), program, "process group");
  check(posix_spawnattr_setsigmask(&setup.attributes, &held.previous()), program, "signal mask");
  check(posix_spawnattr_setsigdefault(&setup.attributes, &defaults), program, "signals");
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

// The output as it arrives: its first keep_bytes in `head`, its last ones in `tail` (up to twice
// as many, trimmed now and then), the bytes between them counted; and the line being read, cut at
// max_line, for on_line.
class Output {
 public:
  explicit Output(const CaptureOptions& options) : options_(options) {}

  void add(const char* data, std::size_t size) {
    const std::size_t to_head =
        std::min(size, options_.keep_bytes - std::min(options_.keep_bytes, head_.size()));
    head_.append(data, to_head);
    if (to_head < size) {
      tail_.append(data + to_head, size - to_head);
      if (tail_.size() > 2 * options_.keep_bytes) {
        const std::size_t drop = tail_.size() - options_.keep_bytes;
        tail_.erase(0, drop);
        dropped_ += drop;
      }
    }
    if (!options_.on_line) return;
    for (const char* end = data + size; data < end;) {
      const char* newline = static_cast<const char*>(std::memchr(data, '\n', end - data));
      const char* stop = newline ? newline : end;
      const std::size_t room = options_.max_line - std::min(options_.max_line, line_.size());
      const std::size_t piece = static_cast<std::size_t>(stop - data);
      line_.append(data, std::min(piece, room));
      cut_ += piece - std::min(piece, room);
      if (!newline) break;
      emit_line();
      data = newline + 1;
    }
  }

  // The output, with "… N bytes dropped …" where its middle was; hands on a last partial line.
  std::string finish() {
    if (!line_.empty() || cut_ > 0) emit_line();
    if (tail_.size() > options_.keep_bytes) {
      dropped_ += tail_.size() - options_.keep_bytes;
      tail_.erase(0, tail_.size() - options_.keep_bytes);
    }
    if (dropped_ == 0) return head_ + tail_;
    return head_ + "\n… " + std::to_string(dropped_) + " bytes dropped …\n" + tail_;
  }

 private:
  void emit_line() {
    if (cut_ > 0) line_ += " … (" + std::to_string(cut_) + " bytes cut)";
    options_.on_line(line_);
    line_.clear();
    cut_ = 0;
  }

  const CaptureOptions& options_;
  std::string head_, tail_, line_;
  std::size_t dropped_ = 0, cut_ = 0;
};

}  // namespace

void kill_children_on_signals() {
  struct sigaction action {};
  action.sa_handler = die_of;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
  std::atexit(kill_groups);
}

void stop_children() {
  stopping.store(true);
  kill_groups();
}

ProcessStatus run_process(const std::filesystem::path& program,
                          const std::vector<std::string>& args) {
  SpawnSetup setup(program.string());
  std::optional<Child> child;
  {
    const HeldSignals held;
    child.emplace(spawn(program.string(), args, setup, held));
  }
  return child->wait_for_end();
}

CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args,
                         const CaptureOptions& options) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw cannot_run(program, "pipe", errno);
  std::optional<Child> child;
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
    const HeldSignals held;
    child.emplace(spawn(program, args, setup, held));
  } catch (...) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw;
  }
  close(pipe_fds[1]);
  struct PipeEnd {  // closed on every way out
    int fd;
    ~PipeEnd() { close(fd); }
  } pipe_end{pipe_fds[0]};

  // Read until end-of-file and the child has ended, whichever comes last: a child may close its
  // output and go on running, and what it started may hold the output open after it ended (its
  // group is killed then). The time limit holds throughout.
  const bool limited = options.time_limit.count() > 0;
  const auto deadline = std::chrono::steady_clock::now() + options.time_limit;
  Output output(options);
  bool end_of_file = false, ended = false, timed_out = false;
  std::vector<char> buffer(64 << 10);
  while (!end_of_file || !ended) {
    int wait_ms = end_of_file ? 10 : 100;  // how often to look whether the child has ended
    if (limited) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(wait_ms, left.count()));
    }
    if (end_of_file) {
      poll(nullptr, 0, wait_ms);
    } else {
      pollfd readable{pipe_end.fd, POLLIN, 0};
      if (poll(&readable, 1, wait_ms) > 0) {
        const ssize_t n = read(pipe_end.fd, buffer.data(), buffer.size());
        if (n > 0)
          output.add(buffer.data(), static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
          end_of_file = true;
      }
    }
    if (!ended && child->ended()) {
      ended = true;
      kill(-child->pid(), SIGKILL);  // what it left running, which may hold the output open
    }
  }
  CapturedRun run;
  run.status = child->wait();
  run.status.timed_out = timed_out;
  run.output = output.finish();
  return run;
}

std::filesystem::path executable_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

}  // namespace workbench
