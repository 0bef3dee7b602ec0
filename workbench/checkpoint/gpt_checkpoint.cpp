#include "checkpoint/gpt_checkpoint.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "checkpoint/checkpoint_folder.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;

namespace workbench {
namespace {

constexpr const char* kLab10Format = "minimodel checkpoint 1";  // checkpoint.cpp's
constexpr const char* kVocabFile = "vocab.json";
constexpr const char* kMergesFile = "merges.txt";
constexpr const char* kSpecialTokensFile = "special_tokens.json";  // as `workbook tokenize`'s

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string rng_text(const std::mt19937_64& rng) {
  std::ostringstream text;
  text << rng;
  return text.str();
}

nlohmann::json config_json(const GptCheckpoint& c) {
  const minimodel::GptConfig& m = c.params.config;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& tensor : minimodel::parameter_tensors(c.params)) names.push_back(tensor.name);
  const minimodel::LrSchedule& s = c.train.schedule;
  return {{"format", kGptCheckpointFormat},
          {"model",
           {{"vocab", m.vocab},
            {"max_len", m.max_len},
            {"d_model", m.d_model},
            {"n_heads", m.n_heads},
            {"n_layers", m.n_layers}}},
          {"tensors", names},
          {"optimizer",
           {{"name", "AdamW"},
            {"beta1", c.adamw.beta1},
            {"beta2", c.adamw.beta2},
            {"eps", c.adamw.eps},
            {"weight_decay", c.adamw.weight_decay},
            {"step", c.step},
            {"moments", c.step > 0}}},
          {"schedule",
           {{"lr_max", s.lr_max},
            {"lr_min", s.lr_min},
            {"warmup", s.warmup},
            {"max_steps", s.max_steps}}},
          {"training",
           {{"batch", c.batch},
            {"length", c.length},
            {"max_grad_norm", c.train.max_grad_norm},
            {"seed", c.seed},
            {"rng", "std::mt19937_64"},
            {"rng_state", rng_text(c.rng)}}},
          {"tokenizer",
           {{"vocab", kVocabFile}, {"merges", kMergesFile}, {"special_tokens", c.special_tokens}}},
          {"run", c.run}};
}

// Reading config.json: each field by its path, or one message naming the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, fs::path file) : json_(json), file_(std::move(file)) {}

  const nlohmann::json& object(const char* key) const {
    const auto it = json_.find(key);
    if (it == json_.end() || !it->is_object())
      throw std::runtime_error(file_.string() + " has no \"" + key + "\" object");
    return *it;
  }
  std::size_t size(const char* section, const char* key) const {
    const nlohmann::json& field = find(section, key);
    if (!field.is_number_unsigned())
      throw std::runtime_error(where(section, key) + " is not a whole number");
    return field.get<std::size_t>();
  }
  double number(const char* section, const char* key) const {
    const nlohmann::json& field = find(section, key);
    if (!field.is_number()) throw std::runtime_error(where(section, key) + " is not a number");
    return field.get<double>();
  }
  std::string text(const char* section, const char* key) const {
    const nlohmann::json& field = find(section, key);
    if (!field.is_string()) throw std::runtime_error(where(section, key) + " is not a string");
    return field.get<std::string>();
  }
  const nlohmann::json& find(const char* section, const char* key) const {
    const nlohmann::json& parent = object(section);
    const auto it = parent.find(key);
    if (it == parent.end())
      throw std::runtime_error(file_.string() + ": \"" + section + "\" has no \"" + key + "\"");
    return *it;
  }
  std::string where(const char* section, const char* key) const {
    return file_.string() + ": \"" + section + "\".\"" + key + "\"";
  }

 private:
  const nlohmann::json& json_;
  fs::path file_;
};

// A tensor file of `dir`, its shape checked against `shape`.
xt::xarray<float> load_shaped(const fs::path& file, const std::vector<std::size_t>& shape,
                              const fs::path& config_file) {
  xt::xarray<float> values = load_npy_f32(file);
  const std::vector<std::size_t> got(values.shape().begin(), values.shape().end());
  if (got != shape)
    throw std::runtime_error(file.string() + " is " + shape_text(got) + " but " +
                             config_file.string() + " makes it " + shape_text(shape));
  return values;
}

}  // namespace

void save_gpt_checkpoint(const fs::path& dir, const GptCheckpoint& checkpoint) {
  // 1. Everything must be the model config describes.
  const minimodel::GptParams<float> zeros = minimodel::zero_gpt<float>(checkpoint.params.config);
  const auto expected = minimodel::parameter_tensors(zeros);  // the shapes config makes
  const auto tensors = minimodel::parameter_tensors(checkpoint.params);
  if (tensors.size() != expected.size())
    throw std::invalid_argument("save_gpt_checkpoint: the parameters hold " +
                                std::to_string(tensors.size()) + " tensors but the config makes " +
                                std::to_string(expected.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].shape != expected[i].shape)
      throw std::invalid_argument("save_gpt_checkpoint: " + tensors[i].name + " is " +
                                  shape_text(tensors[i].shape) + " but the config makes it " +
                                  shape_text(expected[i].shape));
  const bool moments = !checkpoint.adam_m.empty() || !checkpoint.adam_v.empty();
  if (moments != (checkpoint.step > 0))
    throw std::invalid_argument(
        "save_gpt_checkpoint: step " + std::to_string(checkpoint.step) +
        (moments ? " but the optimiser has moments" : " but the optimiser has no moments"));
  if (moments) {
    if (checkpoint.adam_m.size() != tensors.size() || checkpoint.adam_v.size() != tensors.size())
      throw std::invalid_argument(
          "save_gpt_checkpoint: " + std::to_string(checkpoint.adam_m.size()) + " and " +
          std::to_string(checkpoint.adam_v.size()) + " moments for " +
          std::to_string(tensors.size()) + " tensors");
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (checkpoint.adam_m[i].size() != tensors[i].size() ||
          checkpoint.adam_v[i].size() != tensors[i].size())
        throw std::invalid_argument("save_gpt_checkpoint: the moments of " + tensors[i].name +
                                    " have " + std::to_string(checkpoint.adam_m[i].size()) +
                                    " and " + std::to_string(checkpoint.adam_v[i].size()) +
                                    " elements but the tensor " +
                                    std::to_string(tensors[i].size()));
  }
  if (checkpoint.vocab_json.empty() || checkpoint.merges_txt.empty())
    throw std::invalid_argument(
        "save_gpt_checkpoint: the tokenizer's vocab.json and merges.txt are empty");

  // 2. The files, all or nothing. The writers run inside write_checkpoint_folder, while
  //    `checkpoint` and these strings are alive.
  std::vector<std::pair<std::string, FileWriter>> files;
  const auto text_file = [&files](const std::string& name, const std::string& text) {
    files.emplace_back(
        name, [&text](std::ostream& out) { out.write(text.data(), std::streamsize(text.size())); });
  };
  const std::string json = config_json(checkpoint).dump(2) + "\n";
  const std::string specials = nlohmann::json(checkpoint.special_tokens).dump() + "\n";
  text_file(kCheckpointConfigFile, json);
  text_file(kVocabFile, checkpoint.vocab_json);
  text_file(kMergesFile, checkpoint.merges_txt);
  text_file(kSpecialTokensFile, specials);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    files.emplace_back(tensor.name + ".npy", [&tensor](std::ostream& out) {
      write_npy_f32(out, tensor.data, tensor.shape);
    });
    if (!moments) continue;
    files.emplace_back("adam_m." + tensor.name + ".npy",
                       [&tensor, &m = checkpoint.adam_m[i]](std::ostream& out) {
                         write_npy_f32(out, m.data(), tensor.shape);
                       });
    files.emplace_back("adam_v." + tensor.name + ".npy",
                       [&tensor, &v = checkpoint.adam_v[i]](std::ostream& out) {
                         write_npy_f32(out, v.data(), tensor.shape);
                       });
  }
  write_checkpoint_folder(dir, files);
}

bool is_gpt_checkpoint(const fs::path& dir) {
  try {
    read_checkpoint_config(dir, kGptCheckpointFormat);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

GptCheckpoint load_gpt_checkpoint(const fs::path& dir) {
  const fs::path config_file = dir / kCheckpointConfigFile;
  nlohmann::json json;
  try {
    json = read_checkpoint_config(dir, kGptCheckpointFormat);
  } catch (const std::runtime_error&) {
    bool lab10 = false;  // a checkpoint, but of the other model: say so rather than "format"
    try {
      read_checkpoint_config(dir, kLab10Format);
      lab10 = true;
    } catch (const std::runtime_error&) {
    }
    if (lab10)
      throw std::runtime_error(dir.string() +
                               " is a checkpoint of lab 10's model, not of lab 13's GPT");
    throw;
  }
  const ConfigReader read(json, config_file);

  // 1. The model's sizes, and the tensors they make, in order.
  GptCheckpoint checkpoint;
  minimodel::GptConfig config;
  config.vocab = read.size("model", "vocab");
  config.max_len = read.size("model", "max_len");
  config.d_model = read.size("model", "d_model");
  config.n_heads = read.size("model", "n_heads");
  config.n_layers = read.size("model", "n_layers");
  // Sizes a typo could make huge are refused before anything is allocated.
  constexpr std::size_t kMaxSize = std::size_t{1} << 20;
  for (const std::size_t size :
       {config.vocab, config.max_len, config.d_model, config.n_heads, config.n_layers})
    if (size > kMaxSize)
      throw std::runtime_error(config_file.string() + ": \"model\" has a size above " +
                               std::to_string(kMaxSize) + ", " + std::to_string(size));
  const std::size_t d = config.d_model;
  const std::size_t parameters =
      (config.vocab + config.max_len) * d + config.n_layers * (12 * d * d + 13 * d) + 2 * d;
  if (parameters > (std::size_t{1} << 27))
    throw std::runtime_error(config_file.string() + ": \"model\" makes a model of " +
                             std::to_string(parameters) +
                             " parameters, more than the 134,217,728 any checkpoint of this "
                             "workbook holds");
  try {
    checkpoint.params = minimodel::zero_gpt<float>(config);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(config_file.string() + ": " + e.what());
  }
  const auto tensors = minimodel::parameter_tensors(checkpoint.params);
  nlohmann::json names = nlohmann::json::array();
  for (const auto& tensor : tensors) names.push_back(tensor.name);
  const auto listed = json.find("tensors");
  if (listed == json.end() || *listed != names)
    throw std::runtime_error(config_file.string() + ": \"tensors\" must list the " +
                             std::to_string(tensors.size()) + " tensors of " +
                             std::to_string(config.n_layers) +
                             " layers in this order: wte, wpe, h0.ln_1.gain, h0.ln_1.bias, "
                             "h0.attn.w_q, …, ln_f.gain, ln_f.bias");

  // 2. The optimiser, the schedule and the batches' settings.
  checkpoint.adamw.beta1 = read.number("optimizer", "beta1");
  checkpoint.adamw.beta2 = read.number("optimizer", "beta2");
  checkpoint.adamw.eps = read.number("optimizer", "eps");
  checkpoint.adamw.weight_decay = read.number("optimizer", "weight_decay");
  checkpoint.step = read.size("optimizer", "step");
  minimodel::LrSchedule& schedule = checkpoint.train.schedule;
  schedule.lr_max = read.number("schedule", "lr_max");
  schedule.lr_min = read.number("schedule", "lr_min");
  schedule.warmup = read.size("schedule", "warmup");
  schedule.max_steps = read.size("schedule", "max_steps");
  if (!(schedule.lr_min >= 0 && schedule.lr_min <= schedule.lr_max) ||
      schedule.warmup >= schedule.max_steps)
    throw std::runtime_error(config_file.string() +
                             ": \"schedule\" needs 0 <= lr_min <= lr_max and warmup < max_steps");
  checkpoint.train.max_grad_norm = float(read.number("training", "max_grad_norm"));
  checkpoint.batch = read.size("training", "batch");
  checkpoint.length = read.size("training", "length");
  if (checkpoint.length > config.max_len)
    throw std::runtime_error(read.where("training", "length") + " is " +
                             std::to_string(checkpoint.length) + " but the model's max_len is " +
                             std::to_string(config.max_len));
  if (!read.find("training", "seed").is_number_unsigned())
    throw std::runtime_error(read.where("training", "seed") + " is not a whole number");
  checkpoint.seed = read.find("training", "seed").get<std::uint64_t>();
  {
    std::istringstream state(read.text("training", "rng_state"));
    state >> checkpoint.rng;
    std::string rest;
    if (state.fail() || (state >> rest))
      throw std::runtime_error(read.where("training", "rng_state") +
                               " is not the state of a std::mt19937_64 (312 numbers)");
  }
  const nlohmann::json& specials = read.find("tokenizer", "special_tokens");
  if (!specials.is_array() ||
      !std::all_of(specials.begin(), specials.end(), [](const auto& s) { return s.is_string(); }))
    throw std::runtime_error(read.where("tokenizer", "special_tokens") +
                             " is not a list of strings");
  checkpoint.special_tokens = specials.get<std::vector<std::string>>();
  if (const auto run = json.find("run"); run != json.end()) {
    if (!run->is_object())
      throw std::runtime_error(config_file.string() + ": \"run\" is not an object");
    checkpoint.run = *run;
  }

  // 3. The tokenizer: its vocabulary must be the model's.
  checkpoint.vocab_json = read_file(dir / kVocabFile);
  checkpoint.merges_txt = read_file(dir / kMergesFile);
  std::size_t tokens = 0;
  try {
    const nlohmann::json vocab = nlohmann::json::parse(checkpoint.vocab_json);
    if (!vocab.is_object()) throw std::runtime_error("not an object");
    tokens = vocab.size();
  } catch (const std::exception& e) {
    throw std::runtime_error((dir / kVocabFile).string() +
                             " is not a vocab.json {token: id}: " + e.what());
  }
  if (tokens != config.vocab)
    throw std::runtime_error((dir / kVocabFile).string() + " holds " + std::to_string(tokens) +
                             " tokens but " + config_file.string() + " says vocab " +
                             std::to_string(config.vocab));

  // 4. The tensors, then the moments (present exactly when a step has been taken).
  for (const auto& tensor : tensors) {
    const xt::xarray<float> values =
        load_shaped(dir / (tensor.name + ".npy"), tensor.shape, config_file);
    std::copy(values.begin(), values.end(), tensor.data);
  }
  if (checkpoint.step > 0)
    for (const auto& tensor : tensors) {
      for (auto* moments : {&checkpoint.adam_m, &checkpoint.adam_v}) {
        const std::string prefix = moments == &checkpoint.adam_m ? "adam_m." : "adam_v.";
        const xt::xarray<float> values =
            load_shaped(dir / (prefix + tensor.name + ".npy"), tensor.shape, config_file);
        minimodel::Vector<float> flat = xt::zeros<float>({tensor.size()});
        std::copy(values.begin(), values.end(), flat.begin());
        moments->push_back(std::move(flat));
      }
    }
  return checkpoint;
}

}  // namespace workbench
