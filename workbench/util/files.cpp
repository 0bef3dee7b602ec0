#include "util/files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace workbench {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// Writes `content` to a new temporary beside `path` (a unique name, so no other file is touched),
// with the mode an ordinary new file would have. Returns its name.
std::string write_temporary(const fs::path& path, const std::string& content) {
  const std::string where = "cannot write " + path.string() + ": ";
  std::error_code ec;
  if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw std::runtime_error(where + "cannot create its folder (" + ec.message() + ")");
  }
  std::string tmp = path.string() + ".XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error(where + std::strerror(errno));
  bool ok = true;
  for (std::size_t written = 0; ok && written < content.size();) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n > 0)
      written += static_cast<std::size_t>(n);
    else
      ok = n < 0 && errno == EINTR;
  }
  std::string reason = ok ? "" : std::strerror(errno);
  const mode_t mask = ::umask(0);  // mkstemp makes the file 0600
  ::umask(mask);
  if (ok && ::fchmod(fd, 0666 & ~mask) != 0) reason = std::strerror(errno);
  if (::close(fd) != 0 && reason.empty()) reason = std::strerror(errno);  // e.g. a full disk
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
  for (const auto& [path, content] : files)  // the one thing that makes a rename below fail
    if (fs::is_directory(path))
      throw std::runtime_error("cannot write " + path.string() + ": it is a folder");
  std::vector<std::string> temporaries;
  auto remove_temporaries = [&] {
    std::error_code ignored;
    for (const std::string& tmp : temporaries) fs::remove(tmp, ignored);
  };
  try {
    for (const auto& [path, content] : files) temporaries.push_back(write_temporary(path, content));
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
