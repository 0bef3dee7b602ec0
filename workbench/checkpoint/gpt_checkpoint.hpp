#pragma once
// A GPT of lab 13 on disk, with everything a run needs to continue exactly as if never stopped:
// one folder holding
//   config.json          the format, the model's sizes, the tensors in order, the optimiser's
//                        settings and step, the schedule, the batch shape, the seed and the batch
//                        generator's std::mt19937_64 state, the tokenizer's special tokens, and
//                        free-form facts about the run (losses, time, corpus) under "run"
//   vocab.json, merges.txt, special_tokens.json   lab 12's tokenizer, copied in, so that the
//                        folder is self-contained (`workbook tokenize` reads it as a tokenizer too)
//   <name>.npy           one per parameter, named by minimodel::parameter_tensors ("wte",
//                        "h0.attn.w_q", …, "ln_f.bias"), shaped as the parameter
//   adam_m.<name>.npy, adam_v.<name>.npy   AdamW's two moments, shaped as their parameter
// written all or nothing, the checkpoint it replaces kept as DIR.previous (checkpoint_folder.hpp).
// Only lab 13's header is needed, never an implementation.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minimodel/model/gpt.hpp"

namespace workbench {

/// What config.json's "format" says of a lab 13 checkpoint.
inline constexpr const char* kGptCheckpointFormat = "minimodel gpt checkpoint 1";

/// A training run of lab 13, frozen between two steps.
struct GptCheckpoint {
  minimodel::GptParams<float> params;  ///< the model; params.config gives its sizes
  // The optimiser: its settings, the steps it has taken, and its moments (one flat vector per
  // tensor of parameter_tensors, each of that tensor's size; both empty for a model that was never
  // trained, step 0).
  minimodel::AdamWOptions adamw;
  std::size_t step = 0;
  std::vector<minimodel::Vector<float>> adam_m, adam_v;
  // The training settings (the schedule, clipping), the batch shape and the batches' generator.
  minimodel::TrainOptions train;
  std::size_t batch = 0, length = 0;  ///< B windows of T (+ 1) tokens a step
  std::uint64_t seed = 0;             ///< what the initialisation and the generator started from
  std::mt19937_64 rng;                ///< the batch generator, as it is before the next step
  // The tokenizer: the texts of lab 12's files, and its special tokens.
  std::string vocab_json, merges_txt;
  std::vector<std::string> special_tokens;
  nlohmann::json run = nlohmann::json::object();  ///< facts about the run, kept under "run"
};

/// Writes `checkpoint` into the folder `dir`, all or nothing (write_checkpoint_folder): `dir` is a
/// whole checkpoint or absent, never half of one, and a checkpoint it held becomes DIR.previous.
/// @throws std::invalid_argument if a tensor or moment is not shaped as params.config says, the
///         moments are not both empty at step 0 or both one per tensor, or the tokenizer's texts
///         are empty; std::runtime_error naming the path if the folder cannot be written.
void save_gpt_checkpoint(const std::filesystem::path& dir, const GptCheckpoint& checkpoint);

/// Reads the checkpoint in `dir`, checking that every part agrees with config.json.
/// @throws std::runtime_error with one message naming the file and what is wrong: a missing or
///         malformed file, another format (lab 10's checkpoint is named as such), a size that
///         cannot make a model, a tensor list not in parameter_tensors' order, a tensor or moment
///         of another shape than config.json makes it (both shapes named), a generator state that
///         does not parse, or a vocab.json whose size is not the model's vocab.
GptCheckpoint load_gpt_checkpoint(const std::filesystem::path& dir);

/// Whether `dir`/config.json says it is a lab 13 checkpoint (false for anything unreadable: the
/// loader then says why). `workbook generate` picks its engine by it.
bool is_gpt_checkpoint(const std::filesystem::path& dir);

}  // namespace workbench
