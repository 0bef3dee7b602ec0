#pragma once
// The tokenizer a lab 13 checkpoint was trained with, as the engines of `workbook generate` and
// `workbook evaluate` read it: lab 12's BPE, in the implementation the engine links.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>

#include "checkpoint/gpt_checkpoint.hpp"
#include "minimodel/tokenizer/bpe.hpp"

namespace workbench {

/// An encoder of the checkpoint's own vocab.json, merges.txt and special tokens.
/// @throws std::invalid_argument naming `dir` if they do not load.
inline minimodel::BpeEncoder checkpoint_encoder(const GptCheckpoint& checkpoint,
                                                const std::filesystem::path& dir) {
  minimodel::Bpe bpe;
  try {
    bpe = minimodel::bpe_from_files(checkpoint.vocab_json, checkpoint.merges_txt,
                                    checkpoint.special_tokens);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        "--checkpoint " + dir.string() +
        ": its tokenizer (vocab.json, merges.txt) does not load: " + e.what());
  }
  return minimodel::BpeEncoder(std::move(bpe));
}

}  // namespace workbench
