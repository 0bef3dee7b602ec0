// The engine behind `workbook generate`: built once per implementation (generate-learner,
// generate-reference). Loads a checkpoint of lab 10's model and continues a prompt greedily, one
// token at a time through lab 08's KV cache (greedy.hpp). Exit status: 0 done, 1 a TODO stub was
// reached, 2 bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "generate/generate_options.hpp"
#include "generate/greedy.hpp"
#include "minimodel/implementation.hpp"
#include "util/engine_main.hpp"

namespace {

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

// A NaN or an infinity in a parameter (a training run that diverged) would make every logit NaN
// and every token 0: name the first one instead.
void check_finite(const workbench::Checkpoint& checkpoint, const std::filesystem::path& dir) {
  const std::vector<std::string> names = workbench::tensor_names(checkpoint.config.n_layers);
  const auto tensors = minimodel::tensors_of(checkpoint.params);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = *tensors[i];
    const auto bad =
        std::find_if(tensor.begin(), tensor.end(), [](float v) { return !std::isfinite(v); });
    if (bad == tensor.end()) continue;
    const auto at = static_cast<std::size_t>(bad - tensor.begin());
    std::ostringstream value;
    value << *bad;
    reject("--checkpoint " + dir.string() + ": " + names[i] + " holds " + value.str() + " at (" +
           std::to_string(at / tensor.shape(1)) + ", " + std::to_string(at % tensor.shape(1)) +
           "); the training that wrote it diverged");
  }
}

// "the largest |weight| is 1e+20, in layer0_w_q": where an overflow most likely starts.
std::string largest_weight(const workbench::Checkpoint& checkpoint) {
  const std::vector<std::string> names = workbench::tensor_names(checkpoint.config.n_layers);
  const auto tensors = minimodel::tensors_of(checkpoint.params);
  float largest = 0.0f;
  std::string where;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    for (const float v : *tensors[i])
      if (std::fabs(v) > largest) {
        largest = std::fabs(v);
        where = names[i];
      }
  std::ostringstream text;
  text << "the largest |weight| is " << std::setprecision(2) << largest << ", in " << where;
  return text.str();
}

std::string joined(const std::vector<std::size_t>& tokens) {
  std::string text;
  for (const std::size_t token : tokens) text += (text.empty() ? "" : " ") + std::to_string(token);
  return text;
}

int generate(const workbench::GenerateOptions& o) {
  // 1. The checkpoint, and a prompt and a length it can run.
  workbench::Checkpoint checkpoint;
  try {
    checkpoint = workbench::load_checkpoint(o.checkpoint);
  } catch (const std::runtime_error& e) {
    const bool absent = !std::filesystem::is_regular_file(o.checkpoint / "config.json");
    reject("--checkpoint: " + std::string(e.what()) +
           (absent ? ". HINT: `workbook verify 10` (or 13, for a GPT) trains one and prints "
                     "where it is"
                   : ""));
  }
  if (o.temperature || o.top_k || o.top_p || o.max_new || o.seed)
    reject("--temperature, --top-k, --top-p, --max-new and --seed sample from lab 13's GPT; " +
           o.checkpoint.string() + " is lab 10's model, decoded greedily: give --tokens N");
  check_finite(checkpoint, o.checkpoint);
  const minimodel::ModelConfig& config = checkpoint.config;
  const std::vector<std::size_t> prompt = workbench::parse_prompt(o.prompt);
  if (prompt.empty()) reject("--prompt holds no token id; give e.g. --prompt \"3 17 42\"");
  for (const std::size_t token : prompt)
    if (token >= config.vocab)
      reject("--prompt holds token " + std::to_string(token) +
             " but the checkpoint's vocabulary is 0 to " + std::to_string(config.vocab - 1));
  if (prompt.size() >= config.max_len)
    reject("--prompt has " + std::to_string(prompt.size()) +
           " tokens but the checkpoint's max_len is " + std::to_string(config.max_len) +
           ": give at most " + std::to_string(config.max_len - 1) + ", so that one can follow");
  const std::size_t room = config.max_len - prompt.size();
  if (o.tokens > room)
    reject("--tokens " + std::to_string(o.tokens) + " after a prompt of " +
           std::to_string(prompt.size()) + " tokens would pass the checkpoint's max_len " +
           std::to_string(config.max_len) + ": at most " + std::to_string(room));

  // 2. Decode, then print the prompt and its continuation as one block.
  std::vector<std::size_t> output;
  try {
    output = workbench::greedy_generate(config, checkpoint.params, prompt,
                                        o.tokens > 0 ? o.tokens : room);
  } catch (const workbench::Float32Overflow& e) {
    reject("--checkpoint " + o.checkpoint.string() + ": " + e.what() +
           ": its weights are finite but overflow float32 on the way (" +
           largest_weight(checkpoint) + "); the training that wrote it diverged");
  }
  std::cout << "prompt:  " << joined(prompt) << '\n' << "output:  " << joined(output) << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  CLI::App app{"Greedy generation from a checkpoint of lab 10's model with the " + impl +
               " implementation of labs 04 and 08. Normally run through `workbook generate`."};
  workbench::GenerateOptions options;
  workbench::add_generate_options(app, options);
  return workbench::engine_main(
      app, argc, argv,
      {"workbook generate", impl, "the checkpoint's model is too large for the memory available"},
      [&] { return generate(options); });
}
