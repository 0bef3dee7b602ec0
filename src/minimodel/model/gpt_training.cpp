// Lab 13: a GPT that writes. Blocks B and C: AdamW, the learning-rate schedule, clipping by the
// global norm, random windows of a token stream, a training step, evaluation and bits per byte.
// Read labs/13-gpt.md first. The API is in include/minimodel/model/gpt.hpp.
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "minimodel/model/gpt.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

AdamW::AdamW(const std::vector<ParamTensor<const float>>& params, AdamWOptions options)
    : options_(options) {
  // TODO(lab 13, Block B): one zero m and one zero v per tensor, each flat with its tensor's
  // size — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block B): one zero m and one zero v per tensor, each flat with its tensor's "
      "size — see labs/13-gpt.md");
}

void AdamW::step(const std::vector<ParamTensor<float>>& params,
                 const std::vector<ParamTensor<const float>>& grads, double lr) {
  // TODO(lab 13, Block B): check every tensor's size, count the step, then decay, both moments
  // and the bias-corrected update, as torch.optim.AdamW — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block B): check every tensor's size, count the step, then decay, both moments "
      "and the bias-corrected update, as torch.optim.AdamW — see labs/13-gpt.md");
}

double learning_rate(const LrSchedule& schedule, std::size_t step) {
  // TODO(lab 13, Block B): check the schedule, then linear warm-up, cosine decay to lr_min,
  // lr_min after — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block B): check the schedule, then linear warm-up, cosine decay to lr_min, "
      "lr_min after — see labs/13-gpt.md");
}

float clip_grad_norm(const std::vector<ParamTensor<float>>& grads, float max_norm) {
  // TODO(lab 13, Block B): the global L2 norm of every gradient; scale them all by max_norm /
  // (norm + 1e-6) if that is below 1; return the norm — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block B): the global L2 norm of every gradient; scale them all by max_norm / "
      "(norm + 1e-6) if that is below 1; return the norm — see labs/13-gpt.md");
}

GptBatch random_batch(const std::vector<TokenId>& stream, std::size_t batch, std::size_t length,
                      std::mt19937_64& rng) {
  // TODO(lab 13, Block C): check the sizes, then B windows of T + 1 tokens at random starts:
  // inputs their first T, targets their last T — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block C): check the sizes, then B windows of T + 1 tokens at random starts: "
      "inputs their first T, targets their last T — see labs/13-gpt.md");
}

StepStats train_step(GptParams<float>& params, GptParams<float>& grads, AdamW& adamw,
                     GptTape<float>& tape, const GptBatch& batch, const TrainOptions& options) {
  // TODO(lab 13, Block C): forward, loss, backward, clip, one AdamW step at the scheduled rate;
  // return the loss, the norm and the rate — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block C): forward, loss, backward, clip, one AdamW step at the scheduled rate; "
      "return the loss, the norm and the rate — see labs/13-gpt.md");
}

double bits_per_byte(double total_nats, std::size_t bytes) {
  // TODO(lab 13, Block C): nats to bits, per byte — see labs/13-gpt.md
  throw Todo("TODO(lab 13, Block C): nats to bits, per byte — see labs/13-gpt.md");
}

Evaluation evaluate(const GptParams<float>& params, const std::vector<TokenId>& stream,
                    std::size_t length, std::size_t batch, std::size_t max_windows,
                    const std::vector<std::size_t>& token_bytes, GptTape<float>& tape) {
  // TODO(lab 13, Block C): the mean loss over consecutive windows, a batch at a time, with the
  // bytes their targets decode to — see labs/13-gpt.md
  throw Todo(
      "TODO(lab 13, Block C): the mean loss over consecutive windows, a batch at a time, with the "
      "bytes their targets decode to — see labs/13-gpt.md");
}

}  // namespace minimodel
