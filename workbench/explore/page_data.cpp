#include "explore/page_data.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include <xtensor/xview.hpp>

#include "explore/explorer_template.hpp"
#include "util/files.hpp"

namespace workbench {

namespace {

std::string shape_text(const xt::xtensor<float, 2>& m) {
  return "(" + std::to_string(m.shape(0)) + ", " + std::to_string(m.shape(1)) + ")";
}

// What the page shows: 4 decimals, printed as such (0.1234, not 0.12340000000000001).
double rounded(double value) { return std::round(value * 1e4) / 1e4; }

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(rounded(*value)) : nlohmann::json(nullptr);
}

std::optional<double> optional_of(const nlohmann::json& value) {
  if (value.is_null()) return std::nullopt;
  return value.get<double>();
}

}  // namespace

std::vector<std::optional<std::size_t>> induction_keys(const std::vector<std::size_t>& ids) {
  std::vector<std::optional<std::size_t>> keys(ids.size());
  for (std::size_t t = 3; t < ids.size(); ++t)
    for (std::size_t j = t - 3; j >= 1; --j)  // the latest earlier occurrence first; key <= t - 2
      if (ids[j] == ids[t] && ids[j - 1] == ids[t - 1]) {
        keys[t] = j + 1;
        break;
      }
  return keys;
}

HeadScore score_head(const xt::xtensor<float, 2>& p,
                     const std::vector<std::optional<std::size_t>>& induction) {
  const std::size_t T = p.shape(0);
  if (p.shape(1) != T || induction.size() != T)
    throw std::invalid_argument("score_head: the weights are " + shape_text(p) + " but there are " +
                                std::to_string(induction.size()) + " induction keys");
  HeadScore score;
  double previous = 0.0, first = 0.0, copied = 0.0;
  std::size_t copies = 0;
  for (std::size_t t = 0; t < T; ++t) {
    if (t >= 1) previous += p(t, t - 1), first += p(t, 0);
    if (!induction[t]) continue;
    if (*induction[t] >= T)
      throw std::invalid_argument("score_head: query " + std::to_string(t) +
                                  "'s induction key is " + std::to_string(*induction[t]) +
                                  " but the weights are " + shape_text(p));
    copied += p(t, *induction[t]);
    ++copies;
  }
  if (T >= 2) {
    score.previous_token = previous / double(T - 1);
    score.first_token = first / double(T - 1);
  }
  if (copies > 0) score.induction = copied / double(copies);
  return score;
}

std::vector<HeadScore> score_heads(const std::vector<std::vector<xt::xtensor<float, 2>>>& weights,
                                   const std::vector<std::size_t>& ids) {
  const auto keys = induction_keys(ids);
  std::vector<HeadScore> scores;
  for (std::size_t l = 0; l < weights.size(); ++l)
    for (std::size_t h = 0; h < weights[l].size(); ++h) {
      HeadScore score = score_head(weights[l][h], keys);
      score.layer = l;
      score.head = h;
      scores.push_back(score);
    }
  return scores;
}

std::vector<std::size_t> ids_of(const std::vector<std::string>& tokens) {
  std::map<std::string, std::size_t> seen;
  std::vector<std::size_t> ids;
  for (const std::string& token : tokens)
    ids.push_back(seen.emplace(token, seen.size()).first->second);
  return ids;
}

std::vector<Prediction> top_predictions(const xt::xtensor<float, 1>& logits, std::size_t k,
                                        const std::function<std::string(std::size_t)>& text_of) {
  const std::size_t V = logits.size();
  if (V == 0) throw std::invalid_argument("top_predictions: no logits");
  double largest = logits(0);
  for (std::size_t i = 0; i < V; ++i) {
    if (!std::isfinite(logits(i)))
      throw std::invalid_argument("top_predictions: logit " + std::to_string(i) + " is not finite");
    largest = std::max(largest, double(logits(i)));
  }
  // softmax in double, shifted by the largest logit
  std::vector<double> p(V);
  double sum = 0.0;
  for (std::size_t i = 0; i < V; ++i) sum += p[i] = std::exp(double(logits(i)) - largest);
  std::vector<std::size_t> order(V);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t top = std::min(k, V);
  std::partial_sort(
      order.begin(), order.begin() + std::ptrdiff_t(top), order.end(),
      [&](std::size_t a, std::size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::vector<Prediction> predictions;
  for (std::size_t r = 0; r < top; ++r)
    predictions.push_back({order[r], text_of(order[r]), p[order[r]] / sum});
  return predictions;
}

nlohmann::json page_json(const PageData& page) {
  const std::size_t T = page.tokens.size(), L = page.weights.size();
  if (T == 0) throw std::invalid_argument("page_json: no tokens");
  if (L == 0 || page.weights[0].empty())
    throw std::invalid_argument("page_json: no attention heads");
  const std::size_t H = page.weights[0].size();
  const std::size_t S = page.key_tokens.empty() ? T : page.key_tokens.size();
  nlohmann::json weights = nlohmann::json::array();
  for (std::size_t l = 0; l < L; ++l) {
    if (page.weights[l].size() != H)
      throw std::invalid_argument("page_json: layer 0 has " + std::to_string(H) +
                                  " heads but layer " + std::to_string(l) + " has " +
                                  std::to_string(page.weights[l].size()));
    nlohmann::json layer = nlohmann::json::array();
    for (std::size_t h = 0; h < H; ++h) {
      const xt::xtensor<float, 2>& p = page.weights[l][h];
      if (p.shape(0) != T || p.shape(1) != S)
        throw std::invalid_argument("page_json: head (" + std::to_string(l) + ", " +
                                    std::to_string(h) + ")'s weights are " + shape_text(p) +
                                    " but there are " + std::to_string(T) + " queries and " +
                                    std::to_string(S) + " keys");
      nlohmann::json rows = nlohmann::json::array();
      for (std::size_t t = 0; t < T; ++t) {
        nlohmann::json row = nlohmann::json::array();
        for (std::size_t s = 0; s < S; ++s) row.push_back(rounded(p(t, s)));
        rows.push_back(std::move(row));
      }
      layer.push_back(std::move(rows));
    }
    weights.push_back(std::move(layer));
  }
  if (page.scores.size() != L * H)
    throw std::invalid_argument("page_json: " + std::to_string(page.scores.size()) +
                                " head scores for " + std::to_string(L * H) + " heads");
  nlohmann::json scores = nlohmann::json::array();
  for (const HeadScore& s : page.scores)
    scores.push_back({{"layer", s.layer},
                      {"head", s.head},
                      {"previous_token", optional_json(s.previous_token)},
                      {"induction", optional_json(s.induction)},
                      {"first_token", optional_json(s.first_token)}});
  nlohmann::json predictions = nullptr;
  if (!page.predictions.empty()) {
    if (page.predictions.size() != T)
      throw std::invalid_argument("page_json: predictions for " +
                                  std::to_string(page.predictions.size()) + " positions but " +
                                  std::to_string(T) + " tokens");
    predictions = nlohmann::json::array();
    for (const std::vector<Prediction>& at : page.predictions) {
      nlohmann::json row = nlohmann::json::array();
      for (const Prediction& p : at)
        row.push_back({{"id", p.id}, {"text", p.text}, {"probability", rounded(p.probability)}});
      predictions.push_back(std::move(row));
    }
  }
  return {{"format", "minimodel-explore 1"},
          {"title", page.title},
          {"notes", page.notes},
          {"tokens", page.tokens},
          {"key_tokens",
           page.key_tokens.empty() ? nlohmann::json(nullptr) : nlohmann::json(page.key_tokens)},
          {"n_layers", L},
          {"n_heads", H},
          {"weights", std::move(weights)},
          {"scores", std::move(scores)},
          {"predictions", std::move(predictions)}};
}

PageData page_from_json(const nlohmann::json& json) {
  PageData page;
  try {
    if (json.at("format") != "minimodel-explore 1")
      throw std::runtime_error("its format is not \"minimodel-explore 1\"");
    page.title = json.at("title").get<std::string>();
    page.notes = json.at("notes").get<std::vector<std::string>>();
    page.tokens = json.at("tokens").get<std::vector<std::string>>();
    if (json.contains("key_tokens") && !json.at("key_tokens").is_null())
      page.key_tokens = json.at("key_tokens").get<std::vector<std::string>>();
    const std::size_t T = page.tokens.size();
    const std::size_t S = page.key_tokens.empty() ? T : page.key_tokens.size();
    for (const nlohmann::json& layer : json.at("weights")) {
      page.weights.emplace_back();
      for (const nlohmann::json& rows : layer) {
        xt::xtensor<float, 2> p = xt::zeros<float>({T, S});
        if (rows.size() != T) throw std::runtime_error("a head's weights do not have T rows");
        for (std::size_t t = 0; t < T; ++t) {
          if (rows[t].size() != S)
            throw std::runtime_error("a row of weights does not have S keys");
          for (std::size_t s = 0; s < S; ++s)  // null: a NaN or an infinity, as JSON has none
            p(t, s) = rows[t][s].is_null() ? std::nanf("") : rows[t][s].get<float>();
        }
        page.weights.back().push_back(std::move(p));
      }
    }
    for (const nlohmann::json& s : json.at("scores"))
      page.scores.push_back({s.at("layer").get<std::size_t>(), s.at("head").get<std::size_t>(),
                             optional_of(s.at("previous_token")), optional_of(s.at("induction")),
                             optional_of(s.at("first_token"))});
    if (!json.at("predictions").is_null())
      for (const nlohmann::json& at : json.at("predictions")) {
        page.predictions.emplace_back();
        for (const nlohmann::json& p : at)
          page.predictions.back().push_back({p.at("id").get<std::size_t>(),
                                             p.at("text").get<std::string>(),
                                             p.at("probability").get<double>()});
      }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not explorer page data: ") + e.what());
  }
  page_json(page);  // the same checks of shapes as a page built in C++
  return page;
}

std::string explorer_html(const PageData& page) {
  // Inside <script>, "</script>" or "<!--" in a token would end the block: JSON's \u003c is the
  // same character to JSON.parse.
  std::string data;
  for (const char c : page_json(page).dump()) {
    if (c == '<')
      data += "\\u003c";
    else
      data += c;
  }
  const std::string html = explorer_template();
  const std::string marker = "/*PAGE DATA*/";
  const std::size_t at = html.find(marker);
  if (at == std::string::npos)
    throw std::logic_error("explorer_html: the page template has no " + marker);
  return html.substr(0, at) + data + html.substr(at + marker.size());
}

PageData lab_page(const std::string& title, const std::vector<std::string>& tokens,
                  const std::vector<xt::xtensor<float, 4>>& layers) {
  PageData page;
  page.title = title;
  page.tokens = tokens;
  for (const xt::xtensor<float, 4>& layer : layers) {
    if (layer.shape(0) != 1)
      throw std::invalid_argument("lab_page: a layer's weights hold " +
                                  std::to_string(layer.shape(0)) + " sequences, not 1");
    page.weights.emplace_back();
    for (std::size_t h = 0; h < layer.shape(1); ++h)
      page.weights.back().push_back(xt::view(layer, 0, h));  // (T, T)
  }
  page.scores = score_heads(page.weights, ids_of(tokens));
  page_json(page);  // its checks of shapes, here rather than when it is saved
  return page;
}

PageData cross_attention_page(const std::string& title, const std::vector<std::string>& queries,
                              const std::vector<std::string>& keys,
                              const xt::xtensor<float, 4>& weights) {
  if (weights.shape(0) != 1)
    throw std::invalid_argument("cross_attention_page: the weights hold " +
                                std::to_string(weights.shape(0)) + " sequences, not 1");
  PageData page;
  page.title = title;
  page.tokens = queries;
  page.key_tokens = keys;
  page.notes.push_back(
      "cross-attention: the queries attend to another sequence's keys, so no "
      "head has a previous-token, induction or first-token score");
  page.weights.emplace_back();
  for (std::size_t h = 0; h < weights.shape(1); ++h) {
    page.weights[0].push_back(xt::view(weights, 0, h));  // (T, S)
    page.scores.push_back({0, h, std::nullopt, std::nullopt, std::nullopt});
  }
  page_json(page);  // its checks of shapes, here rather than when it is saved
  return page;
}

void save_page_data(const std::filesystem::path& path, const PageData& page) {
  write_file_atomically(path, page_json(page).dump() + "\n");
}

}  // namespace workbench
