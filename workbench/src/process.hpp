#pragma once
// Running another program of the workbook as a child process, with its output passed through.
#include <filesystem>
#include <string>
#include <vector>

namespace workbench {

/// How a child process ended.
struct ProcessStatus {
  bool exited = false;  ///< false: it was killed by a signal (it crashed)
  int code = 0;         ///< exit status if exited, signal number otherwise
  std::string describe() const;  ///< "exit status 2" or "signal 11 (Segmentation fault)"
};

/// Runs `program` with `args`, sharing this process's stdin, stdout and stderr, and waits.
/// @throws std::runtime_error if it cannot be started.
ProcessStatus run_process(const std::filesystem::path& program, const std::vector<std::string>& args);

/// The folder of the running executable (build/bin), where its sibling programs are.
std::filesystem::path executable_dir();

}  // namespace workbench
