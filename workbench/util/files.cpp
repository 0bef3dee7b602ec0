#include "util/files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace workbench {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  // One buffer of the file's size: a stringstream would hold the bytes twice (its own buffer,
  // then the copy that str() returns), which counts for a large .npy input.
  std::string bytes(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw std::runtime_error("cannot read " + path.string());
  return bytes;
}

namespace {

// Writes a new temporary beside `path` with `write` (a unique name, so no other file is touched),
// with the mode an ordinary new file would have. Returns its name.
std::string write_temporary(const fs::path& path, const FileWriter& write) {
  const std::string where = "cannot write " + path.string() + ": ";
  std::error_code ec;
  if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw std::runtime_error(where + "cannot create its folder (" + ec.message() + ")");
  }
  std::string tmp = path.string() + ".XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error(where + std::strerror(errno));
  const mode_t mask = ::umask(0);  // mkstemp makes the file 0600
  ::umask(mask);
  std::string reason;
  if (::fchmod(fd, 0666 & ~mask) != 0) reason = std::strerror(errno);
  ::close(fd);
  if (reason.empty()) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    errno = 0;
    write(out);
    out.close();  // flushes: a full disk shows here
    if (out.fail()) reason = errno ? std::strerror(errno) : "the write failed";
  }
  if (!reason.empty()) {
    fs::remove(tmp, ec);
    throw std::runtime_error(where + reason);
  }
  return tmp;
}

}  // namespace

void write_file_atomically(const fs::path& path, const std::string& content) {
  write_files_atomically({{path, content}});
}

void write_files_atomically(const std::vector<std::pair<fs::path, std::string>>& files) {
  std::vector<std::pair<fs::path, FileWriter>> writers;
  for (const auto& [path, content] : files)
    writers.emplace_back(path, [&content = content](std::ostream& out) {
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
    });
  write_files_atomically(writers);
}

void write_files_atomically(const std::vector<std::pair<fs::path, FileWriter>>& files) {
  for (const auto& [path, content] : files)  // the one thing that makes a rename below fail
    if (fs::is_directory(path))
      throw std::runtime_error("cannot write " + path.string() + ": it is a folder");
  std::vector<std::string> temporaries;
  auto remove_temporaries = [&] {
    std::error_code ignored;
    for (const std::string& tmp : temporaries) fs::remove(tmp, ignored);
  };
  try {
    for (const auto& [path, write] : files) temporaries.push_back(write_temporary(path, write));
  } catch (...) {
    remove_temporaries();
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temporaries[i], files[i].first, ec);
    if (ec) {
      temporaries.erase(temporaries.begin(), temporaries.begin() + static_cast<std::ptrdiff_t>(i));
      remove_temporaries();
      throw std::runtime_error("cannot write " + files[i].first.string() + ": " + ec.message());
    }
  }
}

}  // namespace workbench
