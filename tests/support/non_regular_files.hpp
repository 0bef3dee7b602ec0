#pragma once
// Paths that exist and are not regular files, which no writer of the workbook may replace.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace minimodel::testing {

/// Makes in `dir` a FIFO, a dangling link, a link to `target` and, as root only (mknod), a
/// character device standing in for /dev/null; `with_folder` adds a folder. Each path comes with
/// the words of its refusal ("it is a FIFO").
inline std::vector<std::pair<std::filesystem::path, std::string>> make_non_regular_files(
    const std::filesystem::path& dir, const std::filesystem::path& target, bool with_folder) {
  namespace fs = std::filesystem;
  std::vector<std::pair<fs::path, std::string>> made = {{dir / "fifo", "it is a FIFO"},
                                                        {dir / "dangling", "it is a symbolic link"},
                                                        {dir / "link", "it is a symbolic link"}};
  EXPECT_EQ(mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  fs::create_symlink(target, dir / "link");
  if (with_folder) {
    fs::create_directory(dir / "folder");
    made.emplace_back(dir / "folder", "it is a directory");
  }
  if (mknod((dir / "device").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    made.emplace_back(dir / "device", "it is a character device");
  return made;
}

}  // namespace minimodel::testing
