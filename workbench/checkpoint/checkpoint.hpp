#pragma once
// Saving and loading a trained model of lab 10: one folder per checkpoint, holding config.json
// (the model's sizes and what the training recorded) and one .npy per tensor, named as
// tensor_names() says. A checkpoint is written all or nothing, and never replaces another without
// keeping it.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minimodel/model/tiny_transformer.hpp"

namespace workbench {

/// A trained model: its sizes, its parameters, and free-form facts about the training run (steps,
/// seed, final losses, …), kept in config.json under "training".
struct Checkpoint {
  minimodel::ModelConfig config;
  minimodel::ModelParams<float> params;
  nlohmann::json training = nlohmann::json::object();
};

/// The .npy file names of a model with `n_layers` layers, in tensors_of's order: embedding.npy,
/// positions.npy, layer0_w_q.npy, layer0_w_k.npy, layer0_w_v.npy, layer0_w_o.npy, layer1_w_q.npy,
/// …, unembedding.npy.
std::vector<std::string> tensor_names(std::size_t n_layers);

/// Writes `checkpoint` into the folder `dir`: first into a new sibling folder, then renamed into
/// place, so that `dir` is a whole checkpoint or absent, never half of one. If `dir` already holds
/// a checkpoint (it has a config.json), it is first renamed to `dir` + ".previous", replacing an
/// older ".previous" checkpoint; a `dir` that exists and is not a checkpoint is never touched.
/// @throws std::invalid_argument if the parameters' shapes disagree with the config;
///         std::runtime_error naming the path if `dir` exists and is not a checkpoint, or a write
///         fails (nothing is left half written then).
void save_checkpoint(const std::filesystem::path& dir, const Checkpoint& checkpoint);

/// Reads the checkpoint in `dir`.
/// @throws std::runtime_error naming the file that is missing, unreadable or malformed, or the
///         tensor whose shape disagrees with config.json.
Checkpoint load_checkpoint(const std::filesystem::path& dir);

}  // namespace workbench
