// The engine behind `workbook explore --checkpoint`: built once per implementation
// (explore-learner, explore-reference). Runs a checkpoint of lab 10's model on the given tokens and
// writes the explorer's page: each head's weights from lab 10's model_forward, the next-token
// distributions as `workbook generate` computes them (lab 08's KV cache inside lab 04's block, one
// token at a time: greedy.hpp), each head's scores (page_data.hpp). Exit status: 0 done, 1 a TODO
// stub was reached, 2 bad input.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "explore/explore_engine.hpp"
#include "generate/generate_options.hpp"  // parse_prompt
#include "generate/greedy.hpp"
#include "minimodel/implementation.hpp"
#include "minimodel/model/tiny_transformer.hpp"
#include "util/files.hpp"

namespace {

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

std::vector<std::size_t> tokens_of(const workbench::ExploreOptions& o,
                                   const minimodel::ModelConfig& config) {
  if (!o.has_text && !o.has_text_file && !o.has_tokens)
    reject(
        "give the input: --tokens \"3 17 4 9 …\" (or --text / --text-file for a model with a "
        "tokenizer)");
  if (!o.has_tokens) {
    workbench::explore_text(o);  // a broken text is named first, whichever model
    reject("lab 10's checkpoint has no tokenizer: its tokens are the ids 0 to " +
           std::to_string(config.vocab - 1) + "; give them with --tokens \"3 17 4 9\"");
  }
  const std::vector<std::size_t> tokens = workbench::parse_prompt({o.tokens});
  if (tokens.empty()) reject("--tokens holds no token id; give e.g. --tokens \"3 17 4 9\"");
  for (const std::size_t token : tokens)
    if (token >= config.vocab)
      reject("--tokens holds token " + std::to_string(token) +
             " but the checkpoint's vocabulary is 0 to " + std::to_string(config.vocab - 1));
  return tokens;
}

int explore(const workbench::ExploreOptions& o) {
  // 1. The checkpoint and the tokens, cut to the model's context.
  workbench::Checkpoint checkpoint;
  try {
    checkpoint = workbench::load_checkpoint(o.checkpoint);
  } catch (const std::runtime_error& e) {
    const bool absent = !std::filesystem::is_regular_file(o.checkpoint / "config.json");
    reject("--checkpoint: " + std::string(e.what()) +
           (absent ? ". HINT: `workbook verify 10` trains one and prints where it is" : ""));
  }
  const minimodel::ModelConfig& config = checkpoint.config;
  std::vector<std::size_t> tokens = tokens_of(o, config);
  workbench::PageData page;
  page.title = "Lab 10's model, checkpoint " + o.checkpoint.string();
  page.notes.push_back(
      std::to_string(config.n_layers) + " layers × " + std::to_string(config.n_heads) +
      " heads, d_model " + std::to_string(config.d_model) + ", vocabulary " +
      std::to_string(config.vocab) + ", context " + std::to_string(config.max_len) +
      " tokens; the " + minimodel::implementation_name() + " implementation");
  workbench::cut_to_context(tokens, config.max_len, page);
  const std::size_t T = tokens.size();
  for (const std::size_t token : tokens) page.tokens.push_back(std::to_string(token));

  // 2. Each head's weights (T, T), from the model's forward over the whole sequence.
  minimodel::ModelTape<float> tape;
  minimodel::model_forward(checkpoint.params, config.n_heads, {tokens}, tape);
  for (const minimodel::BlockTape<float>& block : tape.blocks[0]) {
    page.weights.emplace_back();
    for (const minimodel::AttentionTape<float>& head : block.mha.heads) {
      for (const float w : head.probs)
        if (!std::isfinite(w))
          reject("--checkpoint " + o.checkpoint.string() +
                 ": the attention weights are not finite; the training that wrote it diverged");
      page.weights.back().push_back(head.probs);
    }
  }
  // 3. What follows each position, as `workbook generate` computes it: fed one token at a time.
  workbench::CachedModel model(config, checkpoint.params);
  for (std::size_t t = 0; t < T; ++t) {
    try {
      page.predictions.push_back(
          workbench::top_predictions(model.feed({tokens[t]}), workbench::kTopPredictions,
                                     [](std::size_t id) { return std::to_string(id); }));
    } catch (const std::exception& e) {  // Float32Overflow, or a logit that is not finite
      reject("--checkpoint " + o.checkpoint.string() + ": at position " + std::to_string(t) + ", " +
             e.what() + "; the training that wrote it diverged");
    }
  }
  // 4. Scores, then the page and its data, both or neither.
  page.scores = workbench::score_heads(page.weights, tokens);
  workbench::write_explorer_page(o, page);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  return workbench::explore_engine_main(
      argc, argv,
      "The attention explorer's page for a checkpoint of lab 10's model, with the " + impl +
          " implementation of labs 04, 08 and 10. Normally run through `workbook explore`.",
      impl, explore);
}
