#pragma once
// Lab 13's GPT on a text, as the attention explorer shows it: what `workbook explore --checkpoint`
// (explore_gpt_main.cpp) and lab 13's verify program (its explore.json) both put on the page.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "explore/page_data.hpp"
#include "minimodel/model/gpt.hpp"

namespace workbench {

/// Fills `page`'s weights, predictions and scores with the GPT `params` on `ids` (T <= max_len
/// tokens): each head's weights (T, T) from gpt_forward (attention_maps); at each position the
/// kTopPredictions most probable next tokens, named by `text_of`, from gpt_decode_step fed one
/// token at a time, as `workbook generate` feeds its prompt (softmax of the logits it samples
/// from, at temperature 1); each head scored by score_heads on the ids. The title, notes and
/// tokens are the caller's.
/// @throws std::range_error "at position t, …" if a position's logits are not finite (a diverged
///         training); what gpt_forward and gpt_decode_step throw.
void fill_gpt_page(const minimodel::GptParams<float>& params,
                   const std::vector<minimodel::TokenId>& ids,
                   const std::function<std::string(std::size_t)>& text_of, PageData& page);

}  // namespace workbench
