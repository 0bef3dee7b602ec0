// The engine behind `workbook generate` for a checkpoint of lab 13's GPT: built once per
// implementation (generate-gpt-learner, generate-gpt-reference). Encodes the prompt with the
// checkpoint's tokenizer (lab 12), samples through the KV cache (lab 13's generate) and prints the
// text as it comes, each piece flushed, never half of a UTF-8 character. Exit status: 0 done, 1 a
// TODO stub was reached, 2 bad input.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/gpt_checkpoint.hpp"
#include "generate/checkpoint_encoder.hpp"
#include "generate/generate_options.hpp"
#include "generate/utf8_stream.hpp"
#include "minimodel/implementation.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "util/engine_main.hpp"

namespace {

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

// A NaN or an infinity in a parameter (a run that diverged) would make every logit NaN: name the
// first one instead.
void check_finite(const minimodel::GptParams<float>& params, const std::filesystem::path& dir) {
  for (const auto& tensor : minimodel::parameter_tensors(params)) {
    const float* end = tensor.data + tensor.size();
    const float* bad = std::find_if(tensor.data, end, [](float v) { return !std::isfinite(v); });
    if (bad == end) continue;
    std::ostringstream value;
    value << *bad;
    reject("--checkpoint " + dir.string() + ": " + tensor.name + ".npy holds " + value.str() +
           " at flat index " + std::to_string(bad - tensor.data) +
           "; the training that wrote it diverged");
  }
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int generate(const workbench::GenerateOptions& o) {
  // 1. The knobs (their ranges checked as the command line was read), the checkpoint, its
  // tokenizer, and a prompt it can run.
  const workbench::GptSamplingDefaults d = workbench::kGptSamplingDefaults;
  if (o.tokens > 0)
    reject("--tokens counts lab 10's greedy tokens; for lab 13's GPT give --max-new N");
  minimodel::SamplingOptions sampling;
  sampling.temperature = float(o.temperature.value_or(d.temperature));
  sampling.top_k = o.top_k.value_or(d.top_k);
  sampling.top_p = float(o.top_p.value_or(d.top_p));
  const std::size_t max_new = o.max_new.value_or(d.max_new);
  const std::uint64_t seed = o.seed.value_or(d.seed);

  workbench::GptCheckpoint checkpoint;
  try {
    checkpoint = workbench::load_gpt_checkpoint(o.checkpoint);
  } catch (const std::runtime_error& e) {
    reject("--checkpoint: " + std::string(e.what()));
  }
  check_finite(checkpoint.params, o.checkpoint);
  const minimodel::GptConfig& config = checkpoint.params.config;
  if (sampling.top_k > config.vocab)
    reject("--top-k " + std::to_string(sampling.top_k) + " but the vocabulary has " +
           std::to_string(config.vocab) + " tokens: give at most that, or 0 for all");
  minimodel::BpeEncoder encoder = workbench::checkpoint_encoder(checkpoint, o.checkpoint);
  std::string prompt;
  for (const std::string& piece : o.prompt) prompt += (prompt.empty() ? "" : " ") + piece;
  const std::vector<minimodel::TokenId> ids = encoder.encode(prompt);
  if (ids.empty()) reject("--prompt is empty; give some text, e.g. --prompt \"In the beginning\"");
  if (ids.size() >= config.max_len)
    reject("--prompt is " + std::to_string(ids.size()) + " tokens but the model's context is " +
           std::to_string(config.max_len) + ": give at most " + std::to_string(config.max_len - 1) +
           ", so that one can follow");

  // 2. The prompt as given, then each token's text as it is drawn.
  print(prompt);
  workbench::Utf8Stream text;
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  std::vector<minimodel::TokenId> drawn;
  try {
    drawn = minimodel::generate(
        checkpoint.params, ids, max_new, sampling, rng,
        [&](minimodel::TokenId id) { print(text.push(encoder.decode_bytes({id}))); });
  } catch (...) {  // a TODO stub, or no memory: the text's line ends before the error's
    print("\n");
    throw;
  }
  print(text.finish() + "\n");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "(%zu prompt tokens, %zu generated in %.2f s: %.0f tokens/s; seed %llu)\n",
               ids.size(), drawn.size(), seconds, double(drawn.size()) / std::max(seconds, 1e-9),
               static_cast<unsigned long long>(seed));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  CLI::App app{"Sampling from a checkpoint of lab 13's GPT with the " + impl +
               " implementation of labs 12 and 13. Normally run through `workbook generate`."};
  workbench::GenerateOptions options;
  workbench::add_generate_options(app, options);
  return workbench::engine_main(
      app, argc, argv,
      {"workbook generate", impl, "the checkpoint's model is too large for the memory available"},
      [&] { return generate(options); });
}
