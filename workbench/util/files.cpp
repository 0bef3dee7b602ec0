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

void write_file_atomically(const fs::path& path, const std::string& content) {
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
  // mkstemp makes the file 0600; give it the mode an ordinary new file would have.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (ok && ::fchmod(fd, 0666 & ~mask) != 0) reason = std::strerror(errno);
  if (::close(fd) != 0 && reason.empty()) reason = std::strerror(errno);  // e.g. a full disk
  ok = ok && reason.empty();
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error(where + (ec ? ec.message() : reason));
  }
}

}  // namespace workbench
