#pragma once
// What lab 13's maintainers' programs (gpt-twin-dump, gpt-bench) give scripts/gpt_twin.py and
// scripts/bench_gpt.py: the King James Bible as lab 12's tokens, and a model and its run written
// as .npy files and a run.json the PyTorch twin reads (the format: gpt_twin.py's dump_folder).
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minimodel/model/gpt.hpp"

namespace gpt_twin {

/// Lab 12's tokens of the corpus: the training and validation splits, and each token's length in
/// bytes (for bits per byte).
struct KjvTokens {
  std::vector<minimodel::TokenId> train, validation;
  std::vector<std::size_t> token_bytes;  ///< (V): token id -> bytes it decodes to
};

/// The corpus (workbench::kjv_corpus) encoded with the tokenizer in `tokenizer_dir` (vocab.json
/// and merges.txt, <|endoftext|> special). If the folder has none, trains lab 12's 2048-token
/// tokenizer on the training split (lab 12's verify program's, deterministic) and writes it there
/// for the next run. With max_bytes > 0 only the first max_bytes of each split are encoded.
/// @throws std::runtime_error if the corpus cannot be read or the tokenizer is malformed.
KjvTokens kjv_tokens(const std::filesystem::path& tokenizer_dir, std::size_t max_bytes);

/// Writes every tensor of `params` into `dir` (created) as `<name>.npy`, float32, by
/// parameter_tensors' names.
void save_tensors(const std::filesystem::path& dir, const minimodel::GptParams<float>& params);

/// Writes `values` as a 1-D float32 .npy.
void save_floats(const std::filesystem::path& path, const std::vector<float>& values);

/// Writes windows (count, T + 1) of token ids as int32 .npy.
void save_windows(const std::filesystem::path& path,
                  const std::vector<std::vector<minimodel::TokenId>>& windows);

/// Writes a token stream as a 1-D int32 .npy.
void save_stream(const std::filesystem::path& path, const std::vector<minimodel::TokenId>& tokens);

/// The windows (B, T + 1) of a batch: each row its inputs and the last target.
std::vector<std::vector<minimodel::TokenId>> batch_windows(const minimodel::GptBatch& batch);

/// run.json's common part: config, batch, context, optimizer, tensors and decayed names.
nlohmann::json describe_run(const minimodel::GptParams<float>& params, std::size_t batch,
                            std::size_t context, const minimodel::TrainOptions& train,
                            const minimodel::AdamWOptions& adamw);

/// The model and batch a run uses: the lab's default model and 16 sequences, or with quick a small
/// one (2 layers of width 32, 4 sequences of 32 tokens: seconds, for the tests). Each sequence is
/// config.max_len tokens long.
struct RunShape {
  minimodel::GptConfig config;
  std::size_t batch_size;
};
RunShape run_shape(bool quick);

/// Sets OpenBLAS's threads (the model's only threads).
void set_threads(int threads);

}  // namespace gpt_twin
