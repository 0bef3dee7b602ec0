#pragma once
// Lab 13's training driver: a run of train_step on random windows of a token stream, with
// evaluation every so often, a progress line per step on stderr, a CSV log of every step, and a
// checkpoint (with the optimiser's moments and the batch generator's state) from which a run
// continues bit for bit. Linked with an implementation of lab 13 (the learner's or the
// reference's); used by lab 13's verify program and its tests.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/gpt_checkpoint.hpp"
#include "minimodel/model/gpt.hpp"

namespace workbench {

/// What a run is: the model, the optimiser, the schedule and clipping, the batch shape, the seed.
struct GptRunSettings {
  minimodel::GptConfig model;
  minimodel::AdamWOptions adamw;
  minimodel::TrainOptions train;
  std::size_t batch = 16, length = 128;  ///< B windows of T (+ 1) tokens a step
  std::uint64_t seed = 0;  ///< init_gpt(model, seed); the batches from std::mt19937_64(seed + 1)
};

/// The tokenizer a run trains with, carried into its checkpoints: the texts of lab 12's files.
struct TokenizerFiles {
  std::string vocab_json, merges_txt;
  std::vector<std::string> special_tokens;
};

/// A model, its optimiser and its batch generator, one training step at a time.
class GptTrainer {
 public:
  /// A new run: init_gpt(settings.model, settings.seed), zero moments, batches from
  /// std::mt19937_64(settings.seed + 1).
  GptTrainer(const GptRunSettings& settings, TokenizerFiles tokenizer);

  /// The run a checkpoint froze, to continue exactly where it stopped.
  /// @throws std::invalid_argument if the checkpoint's moments do not fit its model.
  explicit GptTrainer(const GptCheckpoint& checkpoint);

  /// One step: random_batch(train, B, T, rng), then train_step. Returns what it measured.
  minimodel::StepStats step(const std::vector<minimodel::TokenId>& train);

  /// The run as a checkpoint, with `run` as its free-form facts.
  GptCheckpoint checkpoint(const nlohmann::json& run = nlohmann::json::object()) const;

  const minimodel::GptParams<float>& params() const { return params_; }
  const minimodel::AdamW& adamw() const { return adamw_; }
  const GptRunSettings& settings() const { return settings_; }
  const TokenizerFiles& tokenizer() const { return tokenizer_; }
  const std::mt19937_64& rng() const { return rng_; }
  std::size_t steps() const { return adamw_.steps(); }

 private:
  GptRunSettings settings_;
  TokenizerFiles tokenizer_;
  minimodel::GptParams<float> params_, grads_;
  minimodel::AdamW adamw_;
  minimodel::GptTape<float> tape_;
  std::mt19937_64 rng_;
};

/// One evaluation on held-out tokens, after `step` steps.
struct EvalPoint {
  std::size_t step = 0;
  minimodel::Evaluation eval;
};

/// One step as the log keeps it.
struct StepPoint {
  std::size_t step = 0;  ///< 1 for the first step of the run
  minimodel::StepStats stats;
  double tokens_per_second = 0;  ///< this step's B·T over its wall time
  double seconds = 0;            ///< wall time since this call of train_gpt began
};

/// How long to train and how often to evaluate.
struct TrainLoopOptions {
  std::size_t until_step = 0;      ///< stop when the trainer has taken this many steps in all
  double time_budget_seconds = 0;  ///< also stop before a step would end past it; 0: no limit
  std::size_t eval_every =
      0;  ///< evaluate after every this many steps (and at the end); 0: only at the end
  std::size_t eval_windows =
      64;  ///< at most this many windows of T + 1 validation tokens each time
  std::filesystem::path log_csv;  ///< every step and evaluation as a CSV line; empty: no log
  bool progress = true;           ///< a progress line per step on stderr
};

/// What a call of train_gpt did.
struct TrainLog {
  std::vector<StepPoint> steps;
  std::vector<EvalPoint> evals;
  double seconds = 0;            ///< wall time of the whole call, evaluations included
  double cpu_seconds = 0;        ///< the process's CPU time over the call
  bool stopped_by_time = false;  ///< the time budget ended it before until_step
};

/// Trains `trainer` until it has taken options.until_step steps, or the time budget would be
/// passed (a step is not started if the mean step time so far says it would end after it).
/// Evaluates on `validation` (evaluate with T of the run, B of the run, options.eval_windows)
/// after every options.eval_every steps and after the last one. Writes options.log_csv as it goes,
/// one line per step and per evaluation, flushed, with the header
///   step,loss,lr,grad_norm,tokens_per_s,seconds,val_loss,val_bits_per_byte
/// (a step's line leaves the two val columns empty, an evaluation's the four before seconds). A
/// trainer that has already taken steps (a resumed run) appends to an existing log, so that the
/// log of a run stopped and resumed is the log of one run. The progress line on stderr shows the
/// step, loss, learning rate, gradient norm, tokens per second and the time left: redrawn in place
/// on a terminal, a plain line every 5 % (or 10 s) otherwise. `on_eval`, if set, sees each
/// evaluation.
/// @throws std::runtime_error if the log cannot be written; std::invalid_argument as train_step.
TrainLog train_gpt(GptTrainer& trainer, const std::vector<minimodel::TokenId>& train,
                   const std::vector<minimodel::TokenId>& validation,
                   const std::vector<std::size_t>& token_bytes, const TrainLoopOptions& options,
                   const std::function<void(const EvalPoint&)>& on_eval = {});

}  // namespace workbench
