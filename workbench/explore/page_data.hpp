#pragma once
// The attention explorer's page (`workbook explore`): one self-contained HTML file holding one
// JSON block of page data, built here from what any model gives, independent of which model it
// was: the tokens as displayable text, every head's (T, S) weights (S = T but in cross-attention),
// each head's scores on this text and, where the model predicts tokens, the top 5 next tokens at
// each position. Lab 10's checkpoint (workbench/explore/explore_main.cpp) and the labs' verify
// programs (explore.json, rendered by `workbook explore NN`) fill the same PageData.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xtensor.hpp>

#include "util/text.hpp"  // displayable, valid_utf8: how every tool shows a token

namespace workbench {

/// One head's scores on the page's text: the mean weight its queries give one key each. A score
/// is empty when no query of the text has that key (no repeated span: no induction score).
struct HeadScore {
  std::size_t layer = 0, head = 0;
  std::optional<double> previous_token;  ///< key t − 1, over queries t >= 1
  std::optional<double> induction;    ///< the key induction_keys names, over queries that have one
  std::optional<double> first_token;  ///< key 0, over queries t >= 1
};

/// For each query t, the key an induction head attends to, if any: j + 1 for the latest j <= t − 3
/// with ids[j] = ids[t] and ids[j − 1] = ids[t − 1] (j >= 1), the token that followed the earlier
/// occurrence of a repeated span "ids[t − 1] ids[t]". Keys t and t − 1 never count: those are the
/// token itself and the previous-token pattern.
std::vector<std::optional<std::size_t>> induction_keys(const std::vector<std::size_t>& ids);

/// The scores of one head's weights `p` (T, T), a query per row. `induction` names each query's
/// induction key (induction_keys, or a task's own, as lab 10's copying task knows its segment).
/// @throws std::invalid_argument if p is not square or `induction` has not T entries, or names
///         a key >= T.
HeadScore score_head(const xt::xtensor<float, 2>& p,
                     const std::vector<std::optional<std::size_t>>& induction);

/// Token ids for text tokens: equal strings get equal ids, in order of first appearance.
std::vector<std::size_t> ids_of(const std::vector<std::string>& tokens);

/// One candidate next token.
struct Prediction {
  std::size_t id = 0;
  std::string text;  ///< displayable
  double probability = 0.0;
};

/// The `k` most probable tokens of the distribution softmax(logits), most probable first (a tie:
/// the lower id first), each named by `text_of(id)`.
/// @throws std::invalid_argument if logits is empty or holds a NaN or an infinity.
std::vector<Prediction> top_predictions(const xt::xtensor<float, 1>& logits, std::size_t k,
                                        const std::function<std::string(std::size_t)>& text_of);

/// What the page shows.
struct PageData {
  std::string title;               ///< e.g. "lab 10's checkpoint experiments/…/checkpoint"
  std::vector<std::string> notes;  ///< shown under the title: a truncation, the model's sizes
  std::vector<std::string>
      tokens;  ///< T, displayable: the queries (and the keys, if no key_tokens)
  /// S, displayable: cross-attention's keys, another sequence than the queries (lab 06's encoder);
  /// empty: the keys are the tokens (self-attention), S = T.
  std::vector<std::string> key_tokens;
  std::vector<std::vector<xt::xtensor<float, 2>>> weights;  ///< [layer][head], each (T, S)
  std::vector<HeadScore> scores;                     ///< one per head, as computed by the caller
  std::vector<std::vector<Prediction>> predictions;  ///< [t]: what follows token t; or empty
};

/// The page data as one JSON document (weights and probabilities rounded to 4 decimals, what the
/// page shows):
///   {"format": "minimodel-explore 1", "title", "notes", "tokens": [T],
///    "key_tokens": [S] or null (the keys are the tokens; a page without it reads as null),
///    "n_layers", "n_heads", "weights": [layer][head][query][key],
///    "scores": [{"layer", "head", "previous_token", "induction", "first_token"}] (null: none),
///    "predictions": [t][{"id", "text", "probability"}] or null}
/// @throws std::invalid_argument if the tokens are empty, a head's weights are not (T, S), the
///         layers hold different numbers of heads, the scores are not one per head, or there are
///         predictions but not T of them.
nlohmann::json page_json(const PageData& page);

/// The PageData of a page_json document (what `workbook explore NN` reads from a verify run).
/// @throws std::runtime_error naming what is missing or malformed.
PageData page_from_json(const nlohmann::json& json);

/// The whole HTML page: the explorer's CSS and JavaScript with the page data inline, no network.
std::string explorer_html(const PageData& page);

/// The scores of every head of `weights` ([layer][head] (T, T)) on tokens `ids`, with the
/// induction keys of induction_keys(ids): what a page of free text shows.
std::vector<HeadScore> score_heads(const std::vector<std::vector<xt::xtensor<float, 2>>>& weights,
                                   const std::vector<std::size_t>& ids);

/// The page of a lab's own run over text tokens (labs 01 and 02's sentence): `layers` holds each
/// layer's weights (1, H, T, T) of one sequence, each head scored by score_heads on
/// ids_of(tokens); no predictions. @throws std::invalid_argument as page_json.
PageData lab_page(const std::string& title, const std::vector<std::string>& tokens,
                  const std::vector<xt::xtensor<float, 4>>& layers);

/// The page of a lab's cross-attention (lab 06): `queries` (T) attend to `keys` (S), another
/// sequence; `weights` (1, H, T, S) of one sequence pair, one layer. No head scores (previous
/// token, induction and first token are properties of a text attending to itself: each is null)
/// and no predictions. @throws std::invalid_argument as page_json.
PageData cross_attention_page(const std::string& title, const std::vector<std::string>& queries,
                              const std::vector<std::string>& keys,
                              const xt::xtensor<float, 4>& weights);

/// Writes `page`'s JSON to `path` (a verify program's explore.json, which `workbook explore NN`
/// shows), atomically.
void save_page_data(const std::filesystem::path& path, const PageData& page);

}  // namespace workbench
