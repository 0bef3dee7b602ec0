#include "checkpoint/checkpoint_folder.hpp"

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbench {
namespace {

// A folder is a checkpoint when it holds a config.json; nothing else is ever renamed or removed.
bool is_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(dir / kCheckpointConfigFile, ec);
}

// "runs/a/" names the folder "runs/a".
fs::path folder_of(const fs::path& dir) { return dir.has_filename() ? dir : dir.parent_path(); }

fs::path with_suffix(const fs::path& dir, const std::string& suffix) {
  return dir.parent_path() / (dir.filename().string() + suffix);
}

// Removes the sibling folder that write_checkpoint_folder was writing into, whatever happens.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(const fs::path& dir) {
    std::string pattern = with_suffix(dir, ".partial-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot write the checkpoint " + dir.string() +
                               ": cannot create a folder beside it (" +
                               std::error_code(errno, std::generic_category()).message() + ")");
    path_ = pattern;
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  ~TemporaryFolder() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }  // it has been renamed into place

 private:
  fs::path path_;
};

// Whether `name` is one TemporaryFolder(dir) makes, or its ".older" (step 4 below): dir's name,
// ".partial-", mkdtemp's six letters and digits, and perhaps ".older". Nothing else.
bool is_leftover_of(const fs::path& dir, const std::string& name) {
  const std::string prefix = dir.filename().string() + ".partial-";
  if (name.rfind(prefix, 0) != 0) return false;
  std::string rest = name.substr(prefix.size());
  if (rest.size() == 6 + std::string(".older").size() && rest.substr(6) == ".older") rest.resize(6);
  return rest.size() == 6 && std::all_of(rest.begin(), rest.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0;
         });
}

// Removes, best effort, the folders that earlier saves of `dir` left when they were killed. Two
// saves of one DIR at once are not supported (each would remove the other's folder), as they
// never were: both rename DIR. Only real folders are removed; a link of that name is left alone.
void remove_leftovers_of_killed_saves(const fs::path& dir) {
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::error_code ec, ignored;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec))
    if (is_leftover_of(dir, it->path().filename().string()) &&
        fs::is_directory(fs::symlink_status(it->path(), ignored)))
      leftovers.push_back(it->path());
  for (const fs::path& leftover : leftovers) fs::remove_all(leftover, ignored);
}

}  // namespace

void write_checkpoint_folder(const fs::path& dir_in,
                             const std::vector<std::pair<std::string, FileWriter>>& named_files) {
  // 1. Refuse, before writing anything, what would be replaced and is not a checkpoint: a link
  //    is refused rather than followed, like every writer's target (check_replaceable).
  const fs::path dir = folder_of(dir_in);
  const fs::path previous = with_suffix(dir, ".previous");
  std::error_code ec;
  for (const fs::path& path : {dir, previous})
    if (fs::is_symlink(fs::symlink_status(path, ec)))
      throw std::runtime_error("cannot write the checkpoint " + dir.string() + ": " +
                               path.string() + " is a symbolic link; name the folder itself");
  const bool replacing = fs::exists(fs::symlink_status(dir, ec));
  if (replacing && !is_checkpoint(dir))
    throw std::runtime_error("cannot write the checkpoint " + dir.string() +
                             ": it exists and is not a checkpoint (it has no " +
                             kCheckpointConfigFile + "); choose another folder");
  const bool had_previous = replacing && fs::exists(fs::symlink_status(previous, ec));
  if (had_previous && !is_checkpoint(previous))
    throw std::runtime_error("cannot keep the checkpoint " + dir.string() + " as " +
                             previous.string() + ": that exists and is not a checkpoint; move it " +
                             "away");
  if (dir.has_parent_path()) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec)
      throw std::runtime_error("cannot write the checkpoint " + dir.string() +
                               ": cannot create its folder (" + ec.message() + ")");
  }

  // 2. Every file into a new sibling folder, which is removed if anything below fails. A save
  //    killed before its end leaves its folder behind (DIR.partial-XXXXXX, and .older beside it):
  //    those of earlier saves of this DIR go first, so kills do not pile up copies.
  remove_leftovers_of_killed_saves(dir);
  TemporaryFolder staging(dir);
  std::vector<std::pair<fs::path, FileWriter>> files;
  for (const auto& [name, writer] : named_files) files.emplace_back(staging.path() / name, writer);
  write_files_atomically(files);

  // 3. Into place: the older .previous aside, dir to .previous, the new folder to dir, then the
  //    older .previous away. dir is a whole checkpoint at every moment, or absent for one rename.
  const auto fail = [&](const std::string& step, const std::error_code& error) {
    return std::runtime_error("cannot write the checkpoint " + dir.string() + ": " + step + " (" +
                              error.message() + ")");
  };
  fs::path older;  // the .previous being replaced, renamed aside until the new one is in place
  if (had_previous) {
    older = staging.path().string() + ".older";  // unique, as the staging folder's name is
    fs::rename(previous, older, ec);
    if (ec) throw fail("cannot move " + previous.string() + " aside", ec);
  }
  const auto restore_older = [&] {
    std::error_code ignored;
    if (!older.empty()) fs::rename(older, previous, ignored);
  };
  if (replacing) {
    fs::rename(dir, previous, ec);
    if (ec) {
      const std::error_code error = ec;
      restore_older();
      throw fail("cannot rename it to " + previous.string(), error);
    }
  }
  fs::rename(staging.path(), dir, ec);
  if (ec) {
    const std::error_code error = ec;
    std::error_code ignored;
    if (replacing) fs::rename(previous, dir, ignored);
    restore_older();
    throw fail("cannot rename " + staging.path().string() + " to it", error);
  }
  staging.release();
  if (!older.empty()) fs::remove_all(older, ec);  // best effort: the new checkpoint is in place
}

nlohmann::json read_checkpoint_config(const fs::path& dir, const std::string& format) {
  const fs::path config_file = dir / kCheckpointConfigFile;
  if (!fs::is_directory(dir))
    throw std::runtime_error(dir.string() + " is not a folder; a checkpoint is a folder with " +
                             kCheckpointConfigFile + " and one .npy per tensor");
  if (!fs::is_regular_file(config_file))
    throw std::runtime_error(config_file.string() + " is missing, so " + dir.string() +
                             " is not a checkpoint");
  nlohmann::json json;
  try {
    const std::string text = read_file(config_file);
    if (json_too_deep(text))  // nlohmann's copies and comparisons recurse per level
      throw std::runtime_error(config_file.string() + " nests arrays and objects more than " +
                               std::to_string(kMaxJsonDepth) +
                               " levels deep; it is not a checkpoint's config");
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(config_file.string() + " is not valid JSON: " + e.what());
  }
  if (!json.is_object() || json.value("format", nlohmann::json()) != format)
    throw std::runtime_error(config_file.string() + " does not say \"format\": \"" + format + "\"");
  return json;
}

}  // namespace workbench
