#pragma once
// What the labs' verify programs share: the toy model's sizes and seeds, the 8-token sentence they
// attend over, and the verify frame run for the implementation the program is linked with.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xtensor.hpp>

#include "minimodel/implementation.hpp"
#include "tensors/compare.hpp"  // workbench::max_abs_diff
#include "util/source_tree.hpp"
#include "util/text.hpp"  // workbench::scientific
#include "verify_frame/verify_run.hpp"

namespace lab_setup {

inline constexpr std::size_t kDModel = 64;  // the toy model of labs 01, 02 and 04–06
inline constexpr std::size_t kHeads = 4;
inline constexpr std::uint64_t kSeed = 2024;  // embeddings; weights kSeed + 1, biases kSeed + 2

/// The tiny fixed vocabulary, in id order.
const std::vector<std::string>& toy_vocabulary();

/// The verify programs' sentence: <bos> I work , you work , he
const std::vector<std::string>& toy_sentence();

/// (rows, d) drawn from N(0, 1) with std::mt19937_64(seed), in row-major order: the verify
/// programs' random inputs.
xt::xtensor<float, 2> normal_rows(std::size_t rows, std::size_t d, std::uint64_t seed);

/// Looks each token up in a (vocabulary size, d_model) embedding table, normal_rows(vocabulary
/// size, d_model, seed): the same token always gets the same row. -> (tokens.size(), d_model)
/// @throws std::invalid_argument for a token outside the vocabulary.
xt::xtensor<float, 2> embed_tokens(const std::vector<std::string>& tokens,
                                   std::size_t d_model = kDModel, std::uint64_t seed = kSeed);

/// The manifest config of a model over the toy sentence: d_model, n_heads, tokens,
/// embedding_seed (kSeed) and weight_seed (kSeed + 1), plus the program's own settings `extra`.
nlohmann::json toy_config(const nlohmann::json& extra = nlohmann::json::object(),
                          std::size_t d_model = kDModel, std::size_t n_heads = kHeads);

#ifdef MINIMODEL_EXPERIMENT_DIR  // defined for each lab's verify program, not for lab_setup.cpp
/// workbench::run_verify for this lab and the implementation the program is linked with, so that
/// each verify program is only its seed, its settings and its checks. The experiment folder comes
/// from the registry (CMake defines MINIMODEL_EXPERIMENT_DIR, relative to the source tree, for each
/// lab's program): a learner's
/// artifacts go there, the reference's into its reference/ subfolder (a mutant's into mutant/,
/// though `workbook break` passes --out), so no other run ever overwrites a learner's file. A
/// `subfolder` goes below that folder: a lab's short runs, so that they never replace its real
/// one. Inline, because the implementation's name comes from the code the program links, not from
/// this library.
inline int run(int argc, char** argv, std::uint64_t seed, const nlohmann::json& config,
               const std::string& subfolder,
               const std::function<void(workbench::VerifyRun&)>& body) {
  const std::filesystem::path experiment = workbench::source_dir() / MINIMODEL_EXPERIMENT_DIR;
  const std::string impl = minimodel::implementation_name();
  const std::filesystem::path folder = impl == "learner" ? experiment : experiment / impl;
  return workbench::run_verify(argc, argv, {experiment.filename().string(), seed, config}, impl,
                               subfolder.empty() ? folder : folder / subfolder, body);
}

inline int run(int argc, char** argv, std::uint64_t seed, const nlohmann::json& config,
               const std::function<void(workbench::VerifyRun&)>& body) {
  return run(argc, argv, seed, config, "", body);
}

#endif

}  // namespace lab_setup
