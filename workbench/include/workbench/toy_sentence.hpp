#pragma once
// The 8-token sentence the verify programs of labs 01+ attend over, embedded with a seeded table.
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

namespace workbench {

/// The tiny fixed vocabulary, in id order.
const std::vector<std::string>& toy_vocabulary();

/// The verify programs' sentence: <bos> I work , you work , he
const std::vector<std::string>& toy_sentence();

/// Looks each token up in a (vocabulary size, d_model) embedding table drawn from N(0, 1) with
/// std::mt19937_64(seed): the same token always gets the same row. -> (tokens.size(), d_model)
/// @throws std::invalid_argument for a token outside the vocabulary.
xt::xtensor<float, 2> embed_tokens(const std::vector<std::string>& tokens, std::size_t d_model,
                                   std::uint64_t seed);

}  // namespace workbench
