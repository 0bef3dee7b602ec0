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

const char* file_type_name(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "of an unknown type";
  }
}

void check_replaceable(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);  // a link itself, not its target
  const fs::file_type type = status.type();
  if (type == fs::file_type::not_found || type == fs::file_type::regular) return;
  const std::string where = "cannot write " + path.string() + ": ";
  if (ec) throw std::runtime_error(where + ec.message());
  throw std::runtime_error(where + "it is " + file_type_name(type) +
                           ", not a regular file; only a regular file is replaced");
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
  // Before anything is written: a rename would replace a device, a FIFO or a link with a file
  // (as root, /dev/null itself), and fail on a folder after the others were renamed.
  for (const auto& [path, content] : files) check_replaceable(path);
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
