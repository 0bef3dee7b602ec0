// The engine behind `workbook explore --checkpoint` for lab 13's GPT (explore-gpt-learner,
// explore-gpt-reference), chosen by the workbook command when the checkpoint's config.json names
// lab 13's format. The text goes through the checkpoint's own tokenizer (lab 12); each head's
// weights come from gpt_forward (attention_maps), the next-token distributions from
// gpt_decode_step fed one token at a time, as `workbook generate` feeds its prompt (softmax of the
// logits it samples from, at temperature 1). Exit status: 0 done, 1 a TODO stub was reached, 2 bad
// input.
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/gpt_checkpoint.hpp"
#include "explore/explore_engine.hpp"
#include "explore/gpt_page.hpp"
#include "generate/generate_options.hpp"  // parse_prompt
#include "minimodel/implementation.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/tokenizer/bpe.hpp"

namespace {

using minimodel::TokenId;

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

std::vector<TokenId> tokens_of(const workbench::ExploreOptions& o, minimodel::BpeEncoder& encoder,
                               std::size_t vocab) {
  if (!o.has_text && !o.has_text_file && !o.has_tokens)
    reject("give the input: --text \"In the beginning\", --text-file FILE or --tokens \"ids\"");
  std::vector<TokenId> ids;
  if (o.has_tokens) {
    for (const std::size_t id : workbench::parse_prompt({o.tokens})) {
      if (id >= vocab)
        reject("--tokens holds token " + std::to_string(id) +
               " but the checkpoint's vocabulary is 0 to " + std::to_string(vocab - 1));
      ids.push_back(static_cast<TokenId>(id));
    }
    if (ids.empty()) reject("--tokens holds no token id; give e.g. --tokens \"3 17 4 9\"");
    return ids;
  }
  ids = encoder.encode(workbench::explore_text(o));
  if (ids.empty()) reject("the text makes no tokens");
  return ids;
}

int explore(const workbench::ExploreOptions& o) {
  // 1. The checkpoint, its tokenizer, and the text's tokens cut to the context.
  workbench::GptCheckpoint checkpoint;
  try {
    checkpoint = workbench::load_gpt_checkpoint(o.checkpoint);
  } catch (const std::runtime_error& e) {
    reject("--checkpoint: " + std::string(e.what()));
  }
  const minimodel::GptConfig& config = checkpoint.params.config;
  minimodel::Bpe bpe;
  try {
    bpe = minimodel::bpe_from_files(checkpoint.vocab_json, checkpoint.merges_txt,
                                    checkpoint.special_tokens);
  } catch (const std::invalid_argument& e) {
    reject("--checkpoint " + o.checkpoint.string() +
           ": its tokenizer (vocab.json, merges.txt) does not load: " + e.what());
  }
  minimodel::BpeEncoder encoder(std::move(bpe));
  std::vector<TokenId> ids = tokens_of(o, encoder, config.vocab);
  workbench::PageData page;
  page.title = "Lab 13's GPT, checkpoint " + o.checkpoint.string();
  page.notes.push_back(
      std::to_string(config.n_layers) + " layers × " + std::to_string(config.n_heads) +
      " heads, d_model " + std::to_string(config.d_model) + ", vocabulary " +
      std::to_string(config.vocab) + ", context " + std::to_string(config.max_len) +
      " tokens, trained " + std::to_string(checkpoint.step) + " steps; the " +
      minimodel::implementation_name() + " implementation");
  workbench::cut_to_context(ids, config.max_len, page);
  const auto text_of = [&encoder](std::size_t id) {
    return workbench::displayable(encoder.decode_bytes({static_cast<TokenId>(id)}));
  };
  for (const TokenId id : ids) page.tokens.push_back(text_of(std::size_t(id)));

  // 2. Each head's weights, the next tokens and the scores; then the page and its data, both or
  //    neither.
  try {
    workbench::fill_gpt_page(checkpoint.params, ids, text_of, page);
  } catch (const std::range_error& e) {
    reject("--checkpoint " + o.checkpoint.string() + ": " + e.what() +
           "; the training that wrote it diverged");
  }
  workbench::write_explorer_page(o, page);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  return workbench::explore_engine_main(
      argc, argv,
      "The attention explorer's page for a checkpoint of lab 13's GPT, with the " + impl +
          " implementation of labs 12 and 13. Normally run through `workbook explore`.",
      impl, explore);
}
