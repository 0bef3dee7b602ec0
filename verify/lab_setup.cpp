#include "lab_setup.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

#include <xtensor/xview.hpp>

namespace lab_setup {

const std::vector<std::string>& toy_vocabulary() {
  static const std::vector<std::string> vocabulary = {
      "<bos>", "<pad>", "I", "you", "he", "she", "we", "they", "work", "play", "rest", ",", "."};
  return vocabulary;
}

const std::vector<std::string>& toy_sentence() {
  static const std::vector<std::string> sentence = {"<bos>", "I",    "work", ",",
                                                    "you",   "work", ",",    "he"};
  return sentence;
}

xt::xtensor<float, 2> normal_rows(std::size_t rows, std::size_t d, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  xt::xtensor<float, 2> values({rows, d});
  for (float& value : values) value = normal(generator);
  return values;
}

xt::xtensor<float, 2> embed_tokens(const std::vector<std::string>& tokens, std::size_t d_model,
                                   std::uint64_t seed) {
  const auto& vocabulary = toy_vocabulary();
  const xt::xtensor<float, 2> table = normal_rows(vocabulary.size(), d_model, seed);

  xt::xtensor<float, 2> embedded({tokens.size(), d_model});
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const auto id = std::find(vocabulary.begin(), vocabulary.end(), tokens[t]) - vocabulary.begin();
    if (id == static_cast<std::ptrdiff_t>(vocabulary.size()))
      throw std::invalid_argument("embed_tokens: \"" + tokens[t] +
                                  "\" is not in the toy vocabulary");
    xt::view(embedded, t) = xt::view(table, id);
  }
  return embedded;
}

nlohmann::json toy_config(const nlohmann::json& extra, std::size_t d_model, std::size_t n_heads) {
  nlohmann::json config = {{"d_model", d_model},
                           {"n_heads", n_heads},
                           {"tokens", toy_sentence()},
                           {"embedding_seed", kSeed},
                           {"weight_seed", kSeed + 1}};
  config.update(extra);
  return config;
}

}  // namespace lab_setup
