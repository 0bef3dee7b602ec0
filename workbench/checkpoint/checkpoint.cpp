#include "checkpoint/checkpoint.hpp"

#include <stdexcept>
#include <utility>

#include "checkpoint/checkpoint_folder.hpp"
#include "minimodel/shapes.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;

namespace workbench {
namespace {

constexpr const char* kFormat = "minimodel checkpoint 1";
constexpr const char* kConfigFile = kCheckpointConfigFile;

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

}  // namespace

std::vector<std::string> tensor_names(std::size_t n_layers) {
  std::vector<std::string> names = {"embedding.npy", "positions.npy"};
  for (std::size_t l = 0; l < n_layers; ++l)
    for (const char* w : {"w_q", "w_k", "w_v", "w_o"})
      names.push_back("layer" + std::to_string(l) + "_" + w + ".npy");
  names.push_back("unembedding.npy");
  return names;
}

void save_checkpoint(const fs::path& dir, const Checkpoint& checkpoint) {
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

  // 2. config.json and one .npy per tensor, all or nothing, the older checkpoint kept.
  std::vector<std::pair<std::string, FileWriter>> files;
  const std::string json = config_json(checkpoint).dump(2) + "\n";
  files.emplace_back(kConfigFile, [&json](std::ostream& out) {
    out.write(json.data(), std::streamsize(json.size()));
  });
  for (std::size_t i = 0; i < tensors.size(); ++i)
    files.emplace_back(expected[i].name, [tensor = tensors[i]](std::ostream& out) {
      write_npy_f32(out, tensor->data(), {tensor->shape(0), tensor->shape(1)});
    });
  write_checkpoint_folder(dir, files);
}

Checkpoint load_checkpoint(const fs::path& dir) {
  const fs::path config_file = dir / kConfigFile;
  const nlohmann::json json = read_checkpoint_config(dir, kFormat);
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
