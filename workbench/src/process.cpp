#include "process.hpp"

#include <fcntl.h>
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
  return "signal " + std::to_string(code) + " (" + strsignal(code) + ")";
}

namespace {

std::vector<char*> argv_of(std::vector<std::string>& storage) {
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

ProcessStatus wait_for(pid_t pid, const std::string& program) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waiting for " + program + ": " + std::strerror(errno));
  if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
  return {false, WTERMSIG(status)};
}

}  // namespace

ProcessStatus run_process(const std::filesystem::path& program, const std::vector<std::string>& args) {
  std::vector<std::string> storage = {program.string()};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv = argv_of(storage);

  pid_t pid = 0;
  if (const int error = posix_spawn(&pid, storage[0].c_str(), nullptr, nullptr, argv.data(), environ))
    throw std::runtime_error("cannot run " + storage[0] + ": " + std::strerror(error));
  return wait_for(pid, storage[0]);
}

CapturedRun run_captured(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> storage = {program};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv = argv_of(storage);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot run " + program + ": pipe: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  pid_t pid = 0;
  const int error = program.find('/') == std::string::npos
                        ? posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ)
                        : posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (error) {
    close(pipe_fds[0]);
    throw std::runtime_error("cannot run " + program + ": " + std::strerror(error));
  }
  CapturedRun run;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) run.output.append(buffer, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(pipe_fds[0]);
  run.status = wait_for(pid, program);
  return run;
}

std::filesystem::path executable_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

}  // namespace workbench
