#include "checkpoint/checkpoint.hpp"

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "minimodel/shapes.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbench {
namespace {

constexpr const char* kFormat = "minimodel checkpoint 1";
constexpr const char* kConfigFile = "config.json";

// A folder is a checkpoint when it holds a config.json; nothing else is ever renamed or removed.
bool is_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(dir / kConfigFile, ec);
}

// "runs/a/" names the folder "runs/a".
fs::path folder_of(const fs::path& dir) { return dir.has_filename() ? dir : dir.parent_path(); }

fs::path with_suffix(const fs::path& dir, const std::string& suffix) {
  return dir.parent_path() / (dir.filename().string() + suffix);
}

std::string shape_text(std::size_t rows, std::size_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

// Each tensor of `params` with its file name and the shape the config gives it, in tensors_of's
// order.
struct Expected {
  std::string name;
  std::size_t rows, cols;
  const char* what;  // the shape in words, for messages
};

std::vector<Expected> expected_shapes(const minimodel::ModelConfig& c) {
  const std::vector<std::string> names = tensor_names(c.n_layers);
  std::vector<Expected> shapes;
  shapes.push_back({names[0], c.vocab, c.d_model, "(vocab, d_model)"});
  shapes.push_back({names[1], c.max_len, c.d_model, "(max_len, d_model)"});
  for (std::size_t i = 2; i + 1 < names.size(); ++i)
    shapes.push_back({names[i], c.d_model, c.d_model, "(d_model, d_model)"});
  shapes.push_back({names.back(), c.d_model, c.vocab, "(d_model, vocab)"});
  return shapes;
}

// Empty if the sizes can make a model, else why not.
std::string config_problem(const minimodel::ModelConfig& c) {
  if (c.vocab == 0 || c.max_len == 0 || c.d_model == 0 || c.n_heads == 0 || c.n_layers == 0)
    return "vocab, max_len, d_model, n_heads and n_layers must all be positive";
  if (c.d_model % c.n_heads != 0)
    return "n_heads " + std::to_string(c.n_heads) + " does not divide d_model " +
           std::to_string(c.d_model);
  return "";
}

nlohmann::json config_json(const Checkpoint& checkpoint) {
  const minimodel::ModelConfig& c = checkpoint.config;
  return {{"format", kFormat},
          {"config",
           {{"vocab", c.vocab},
            {"max_len", c.max_len},
            {"d_model", c.d_model},
            {"n_heads", c.n_heads},
            {"n_layers", c.n_layers}}},
          {"tensors", tensor_names(c.n_layers)},
          {"training", checkpoint.training}};
}

// A whole number in config.json's "config" object, or an error naming the file and the key.
std::size_t size_field(const nlohmann::json& config, const char* key, const fs::path& file) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_number_unsigned())
    throw std::runtime_error(file.string() + ": \"config\" has no \"" + key +
                             "\" that is a whole number");
  return it->get<std::size_t>();
}

// Removes the sibling folder that save_checkpoint was writing into, whatever happens.
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

// Whether `name` is one TemporaryFolder(dir) makes, or its ".older" (save_checkpoint's step 4):
// dir's name, ".partial-", mkdtemp's six letters and digits, and perhaps ".older". Nothing else.
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

std::vector<std::string> tensor_names(std::size_t n_layers) {
  std::vector<std::string> names = {"embedding.npy", "positions.npy"};
  for (std::size_t l = 0; l < n_layers; ++l)
    for (const char* w : {"w_q", "w_k", "w_v", "w_o"})
      names.push_back("layer" + std::to_string(l) + "_" + w + ".npy");
  names.push_back("unembedding.npy");
  return names;
}

void save_checkpoint(const fs::path& dir_in, const Checkpoint& checkpoint) {
  // 1. The parameters must be the model the config describes.
  const minimodel::ModelConfig& config = checkpoint.config;
  if (const std::string problem = config_problem(config); !problem.empty())
    throw std::invalid_argument("save_checkpoint: " + problem);
  if (checkpoint.params.layers.size() != config.n_layers)
    throw std::invalid_argument("save_checkpoint: the config has n_layers " +
                                std::to_string(config.n_layers) + " but the parameters hold " +
                                std::to_string(checkpoint.params.layers.size()));
  const std::vector<const minimodel::Matrix<float>*> tensors =
      minimodel::tensors_of(checkpoint.params);
  const std::vector<Expected> expected = expected_shapes(config);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i]->shape(0) != expected[i].rows || tensors[i]->shape(1) != expected[i].cols)
      throw std::invalid_argument("save_checkpoint: " + expected[i].name + " is " +
                                  minimodel::shape_of(*tensors[i]) + " but the config makes " +
                                  expected[i].what + " = " +
                                  shape_text(expected[i].rows, expected[i].cols));

  // 2. Refuse, before writing anything, what would be replaced and is not a checkpoint: a link
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
                             ": it exists and is not a checkpoint (it has no " + kConfigFile +
                             "); choose another folder");
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

  // 3. Every file into a new sibling folder, which is removed if anything below fails. A save
  //    killed before its end leaves its folder behind (DIR.partial-XXXXXX, and .older beside it):
  //    those of earlier saves of this DIR go first, so kills do not pile up copies.
  remove_leftovers_of_killed_saves(dir);
  TemporaryFolder staging(dir);
  std::vector<std::pair<fs::path, FileWriter>> files;
  const std::string json = config_json(checkpoint).dump(2) + "\n";
  files.emplace_back(staging.path() / kConfigFile, [&json](std::ostream& out) {
    out.write(json.data(), std::streamsize(json.size()));
  });
  for (std::size_t i = 0; i < tensors.size(); ++i)
    files.emplace_back(staging.path() / expected[i].name, [tensor = tensors[i]](std::ostream& out) {
      write_npy_f32(out, tensor->data(), {tensor->shape(0), tensor->shape(1)});
    });
  write_files_atomically(files);

  // 4. Into place: the older .previous aside, dir to .previous, the new folder to dir, then the
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

Checkpoint load_checkpoint(const fs::path& dir) {
  const fs::path config_file = dir / kConfigFile;
  if (!fs::is_directory(dir))
    throw std::runtime_error(dir.string() + " is not a folder; a checkpoint is a folder with " +
                             kConfigFile + " and one .npy per tensor");
  if (!fs::is_regular_file(config_file))
    throw std::runtime_error(config_file.string() + " is missing, so " + dir.string() +
                             " is not a checkpoint");
  nlohmann::json json;
  try {
    const std::string text = read_file(config_file);
    if (workbench::json_too_deep(text))  // nlohmann's copies and comparisons recurse per level
      throw std::runtime_error(config_file.string() + " nests arrays and objects more than " +
                               std::to_string(workbench::kMaxJsonDepth) +
                               " levels deep; it is not a checkpoint's config");
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(config_file.string() + " is not valid JSON: " + e.what());
  }
  if (!json.is_object() || json.value("format", nlohmann::json()) != kFormat)
    throw std::runtime_error(config_file.string() + " does not say \"format\": \"" + kFormat +
                             "\"");
  const auto config_it = json.find("config");
  if (config_it == json.end() || !config_it->is_object())
    throw std::runtime_error(config_file.string() + " has no \"config\" object");

  Checkpoint checkpoint;
  minimodel::ModelConfig& config = checkpoint.config;
  config.vocab = size_field(*config_it, "vocab", config_file);
  config.max_len = size_field(*config_it, "max_len", config_file);
  config.d_model = size_field(*config_it, "d_model", config_file);
  config.n_heads = size_field(*config_it, "n_heads", config_file);
  config.n_layers = size_field(*config_it, "n_layers", config_file);
  if (const std::string problem = config_problem(config); !problem.empty())
    throw std::runtime_error(config_file.string() + ": " + problem);
  // The list's length first: a typo of n_layers = 10^12 must not build 4·10^12 names to compare.
  const auto listed = json.find("tensors");
  const bool listed_ok = listed != json.end() && listed->is_array() && listed->size() >= 3 &&
                         (listed->size() - 3) % 4 == 0 &&
                         (listed->size() - 3) / 4 == config.n_layers &&
                         *listed == nlohmann::json(tensor_names(config.n_layers));
  if (!listed_ok)
    throw std::runtime_error(config_file.string() + ": \"tensors\" must list the files of " +
                             std::to_string(config.n_layers) +
                             " layers in this order: embedding.npy, positions.npy, "
                             "layer0_w_q.npy, layer0_w_k.npy, layer0_w_v.npy, layer0_w_o.npy, "
                             "layer1_w_q.npy, …, unembedding.npy");
  if (const auto training = json.find("training"); training != json.end()) {
    if (!training->is_object())
      throw std::runtime_error(config_file.string() + ": \"training\" is not an object");
    checkpoint.training = *training;
  }

  minimodel::ModelParams<float>& params = checkpoint.params;
  params.layers.resize(config.n_layers);
  const std::vector<minimodel::Matrix<float>*> tensors = minimodel::tensors_of(params);
  const std::vector<Expected> expected = expected_shapes(config);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const fs::path file = dir / expected[i].name;
    *tensors[i] = to_rank<2>(load_npy_f32(file), file.string());
    if (tensors[i]->shape(0) != expected[i].rows || tensors[i]->shape(1) != expected[i].cols)
      throw std::runtime_error(file.string() + " is " + minimodel::shape_of(*tensors[i]) + " but " +
                               config_file.string() + " makes it " + expected[i].what + " = " +
                               shape_text(expected[i].rows, expected[i].cols));
  }
  return checkpoint;
}

}  // namespace workbench
