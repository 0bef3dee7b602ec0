#include "explore/gpt_page.hpp"

#include <stdexcept>

#include "explore/explore_engine.hpp"  // kTopPredictions

namespace workbench {

void fill_gpt_page(const minimodel::GptParams<float>& params,
                   const std::vector<minimodel::TokenId>& ids,
                   const std::function<std::string(std::size_t)>& text_of, PageData& page) {
  // 1. Each head's weights (T, T) from the forward over the whole text.
  minimodel::BatchTokens batch({1, ids.size()});
  for (std::size_t t = 0; t < ids.size(); ++t) batch(0, t) = ids[t];
  minimodel::GptTape<float> tape;
  minimodel::gpt_forward(params, batch, tape);
  page.weights = minimodel::attention_maps(tape, 0);
  // 2. What follows each position, through the KV cache, as `workbook generate` feeds a prompt.
  minimodel::GptKVCache cache = minimodel::make_kv_cache(params.config);
  page.predictions.clear();
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const minimodel::Vector<float> logits = minimodel::gpt_decode_step(params, ids[t], cache);
    try {
      page.predictions.push_back(top_predictions(logits, kTopPredictions, text_of));
    } catch (const std::invalid_argument& e) {
      throw std::range_error("at position " + std::to_string(t) + ", " + e.what());
    }
  }
  // 3. Scores on the text's token ids.
  page.scores = score_heads(page.weights, std::vector<std::size_t>(ids.begin(), ids.end()));
}

}  // namespace workbench
