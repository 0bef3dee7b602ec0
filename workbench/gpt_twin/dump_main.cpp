// gpt-twin-dump: the C++ side of lab 13's PyTorch twin (scripts/gpt_twin.py), maintainers only.
// Initialises the lab's model with the reference, saves it, trains it --steps steps with the
// reference's train_step on random windows of the KJV's training tokens, and writes what the twin
// needs to replay the run: the batches, the per-step losses, gradient norms and learning rates,
// the gradients and parameters of the first --adamw-steps steps, the final parameters and their
// validation loss on fixed windows of the held-out split. The folder's format: gpt_twin.py's
// dump_folder.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <xtensor/xnpy.hpp>

#include "gpt_twin/twin_data.hpp"
#include "minimodel/model/gpt.hpp"
#include "util/source_tree.hpp"

namespace {

namespace fs = std::filesystem;

struct Options {
  fs::path out, tokenizer;
  std::size_t steps = 20, adamw_steps = 0, val_windows = 64, warmup = 0, max_steps = 0;
  double lr_max = 2e-3;  // the verify program's
  int threads = 1;
  std::uint64_t seed = 1337;
  bool quick = false, streams = false;
};

int run(const Options& options) {
  using namespace minimodel;
  gpt_twin::set_threads(options.threads);
  const gpt_twin::RunShape shape = gpt_twin::run_shape(options.quick);
  GptConfig config = shape.config;  // its vocabulary: the tokenizer's, below
  const std::size_t batch_size = shape.batch_size, context = config.max_len;
  const gpt_twin::KjvTokens tokens =
      gpt_twin::kjv_tokens(options.tokenizer, options.quick ? 300000 : 0);
  config.vocab = tokens.token_bytes.size();

  TrainOptions train;
  train.schedule.lr_max = options.lr_max;
  train.schedule.lr_min = options.lr_max / 10;
  // By default the run sees the whole schedule: a tenth warm-up, then the cosine to its end.
  train.schedule.max_steps =
      options.max_steps ? options.max_steps : std::max<std::size_t>(options.steps, 2);
  train.schedule.warmup =
      options.warmup ? options.warmup : std::max<std::size_t>(1, train.schedule.max_steps / 10);
  const AdamWOptions adamw_options;

  GptParams<float> params = init_gpt(config, options.seed);
  GptParams<float> grads = zero_gpt<float>(config);
  AdamW adamw(parameter_tensors(std::as_const(params)), adamw_options);
  GptTape<float> tape;
  fs::create_directories(options.out / "adamw");
  gpt_twin::save_tensors(options.out / "init", params);

  std::mt19937_64 rng(options.seed + 1);
  std::vector<std::vector<TokenId>> windows;
  std::vector<float> losses, norms, lrs;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t step = 0; step < options.steps; ++step) {
    const GptBatch batch = random_batch(tokens.train, batch_size, context, rng);
    for (auto& window : gpt_twin::batch_windows(batch)) windows.push_back(std::move(window));
    const StepStats stats = train_step(params, grads, adamw, tape, batch, train);
    losses.push_back(stats.loss);
    norms.push_back(stats.grad_norm);
    lrs.push_back(float(stats.lr));
    if (step < options.adamw_steps) {
      // The gradients AdamW was given (clipped in place by train_step) and its result.
      for (const auto& [prefix, source] : {std::pair{"grad", &grads}, std::pair{"param", &params}})
        for (const auto& tensor : parameter_tensors(std::as_const(*source))) {
          const std::vector<float> flat(tensor.data, tensor.data + tensor.size());
          gpt_twin::save_floats(
              options.out / "adamw" /
                  (prefix + std::to_string(step + 1) + "." + tensor.name + ".npy"),
              flat);
        }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gpt_twin::save_tensors(options.out / "final", params);

  // Validation: consecutive windows of the held-out split, the same the twin evaluates.
  const Evaluation evaluation = evaluate(params, tokens.validation, context, batch_size,
                                         options.val_windows, tokens.token_bytes, tape);
  std::vector<std::vector<TokenId>> val_windows;
  for (std::size_t w = 0; w < options.val_windows && (w + 1) * context < tokens.validation.size();
       ++w)
    val_windows.emplace_back(tokens.validation.begin() + std::ptrdiff_t(w * context),
                             tokens.validation.begin() + std::ptrdiff_t(w * context + context + 1));

  xt::xtensor<std::int32_t, 3> batches({options.steps, batch_size, context + 1});
  for (std::size_t i = 0; i < windows.size(); ++i)
    for (std::size_t j = 0; j <= context; ++j)
      batches(i / batch_size, i % batch_size, j) = windows[i][j];
  xt::dump_npy((options.out / "tokens.npy").string(), batches);
  gpt_twin::save_windows(options.out / "val_tokens.npy", val_windows);
  gpt_twin::save_floats(options.out / "losses.npy", losses);
  gpt_twin::save_floats(options.out / "grad_norms.npy", norms);
  gpt_twin::save_floats(options.out / "lrs.npy", lrs);
  if (options.streams) {
    gpt_twin::save_stream(options.out / "train_stream.npy", tokens.train);
    gpt_twin::save_stream(options.out / "val_stream.npy", tokens.validation);
    std::vector<TokenId> ids(tokens.token_bytes.begin(), tokens.token_bytes.end());
    gpt_twin::save_stream(options.out / "token_bytes.npy", ids);
  }
  nlohmann::json run_json =
      gpt_twin::describe_run(params, batch_size, context, train, adamw_options);
  run_json["steps"] = options.steps;
  run_json["adamw_steps"] = std::min(options.adamw_steps, options.steps);
  run_json["seed"] = options.seed;
  run_json["threads"] = options.threads;
  run_json["seconds"] = seconds;
  run_json["val_loss"] = evaluation.loss;
  run_json["val_bits_per_byte"] = evaluation.bits_per_byte;
  run_json["val_windows"] = val_windows.size();
  run_json["train_tokens"] = tokens.train.size();
  run_json["val_tokens"] = tokens.validation.size();
  std::ofstream(options.out / "run.json") << run_json.dump(2) << "\n";
  std::printf(
      "gpt-twin-dump: %zu steps in %.1f s, last loss %.4f, validation %.4f nats on %zu "
      "windows; wrote %s\n",
      options.steps, seconds, options.steps ? double(losses.back()) : 0.0, evaluation.loss,
      val_windows.size(), options.out.string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  options.tokenizer = workbench::source_dir() / "build" / "gpt_twin_tokenizer";
  CLI::App app{"Lab 13's model trained by the reference, written for scripts/gpt_twin.py"};
  app.add_option("--out", options.out, "the folder to write")->required();
  app.add_option("--steps", options.steps, "training steps");
  app.add_option("--adamw-steps", options.adamw_steps,
                 "write the gradients and parameters of this many first steps");
  app.add_option("--val-windows", options.val_windows, "validation windows");
  app.add_option("--warmup", options.warmup, "warm-up steps (default: a tenth of max-steps)");
  app.add_option("--max-steps", options.max_steps, "the schedule's end (default: --steps)");
  app.add_option("--lr-max", options.lr_max, "the peak learning rate");
  app.add_option("--threads", options.threads, "OpenBLAS threads");
  app.add_option("--seed", options.seed, "the seed of the initialisation (batches: seed + 1)");
  app.add_option("--tokenizer", options.tokenizer,
                 "vocab.json and merges.txt, trained and written there when missing");
  app.add_flag("--quick", options.quick, "a small model on the first 300 kB of the corpus");
  app.add_flag("--streams", options.streams, "also write the token streams and token bytes");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt-twin-dump: %s\n", error.what());
    return 1;
  }
}
