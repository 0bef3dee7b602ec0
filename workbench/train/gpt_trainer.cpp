#include "train/gpt_trainer.hpp"

#include <unistd.h>  // isatty

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "util/files.hpp"
#include "verify_frame/step_progress.hpp"

namespace fs = std::filesystem;

namespace workbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// "2m05s", "43s": the time left on the progress line.
std::string minutes_text(double seconds) {
  const long whole = std::max(0L, long(seconds + 0.5));
  char text[32];
  if (whole >= 60)
    std::snprintf(text, sizeof text, "%ldm%02lds", whole / 60, whole % 60);
  else
    std::snprintf(text, sizeof text, "%lds", whole);
  return text;
}

GptRunSettings settings_of(const GptCheckpoint& c) {
  GptRunSettings settings;
  settings.model = c.params.config;
  settings.adamw = c.adamw;
  settings.train = c.train;
  settings.batch = c.batch;
  settings.length = c.length;
  settings.seed = c.seed;
  return settings;
}

}  // namespace

GptTrainer::GptTrainer(const GptRunSettings& settings, TokenizerFiles tokenizer)
    : settings_(settings),
      tokenizer_(std::move(tokenizer)),
      params_(minimodel::init_gpt(settings.model, settings.seed)),
      grads_(minimodel::zero_gpt<float>(settings.model)),
      adamw_(minimodel::parameter_tensors(std::as_const(params_)), settings.adamw),
      rng_(settings.seed + 1) {}

GptTrainer::GptTrainer(const GptCheckpoint& checkpoint)
    : settings_(settings_of(checkpoint)),
      tokenizer_{checkpoint.vocab_json, checkpoint.merges_txt, checkpoint.special_tokens},
      params_(checkpoint.params),
      grads_(minimodel::zero_gpt<float>(checkpoint.params.config)),
      adamw_(minimodel::parameter_tensors(std::as_const(params_)), checkpoint.adamw),
      rng_(checkpoint.rng) {
  if (checkpoint.step > 0) adamw_.restore(checkpoint.step, checkpoint.adam_m, checkpoint.adam_v);
}

minimodel::StepStats GptTrainer::step(const std::vector<minimodel::TokenId>& train) {
  const minimodel::GptBatch batch =
      minimodel::random_batch(train, settings_.batch, settings_.length, rng_);
  return minimodel::train_step(params_, grads_, adamw_, tape_, batch, settings_.train);
}

GptCheckpoint GptTrainer::checkpoint(const nlohmann::json& run) const {
  GptCheckpoint c;
  c.params = params_;
  c.adamw = settings_.adamw;
  c.step = adamw_.steps();
  if (c.step > 0) {
    c.adam_m = adamw_.m();
    c.adam_v = adamw_.v();
  }
  c.train = settings_.train;
  c.batch = settings_.batch;
  c.length = settings_.length;
  c.seed = settings_.seed;
  c.rng = rng_;
  c.vocab_json = tokenizer_.vocab_json;
  c.merges_txt = tokenizer_.merges_txt;
  c.special_tokens = tokenizer_.special_tokens;
  c.run = run;
  return c;
}

TrainLog train_gpt(GptTrainer& trainer, const std::vector<minimodel::TokenId>& train,
                   const std::vector<minimodel::TokenId>& validation,
                   const std::vector<std::size_t>& token_bytes, const TrainLoopOptions& options,
                   const std::function<void(const EvalPoint&)>& on_eval) {
  const GptRunSettings& settings = trainer.settings();
  const std::size_t first_step = trainer.steps();
  const std::size_t to_do = options.until_step > first_step ? options.until_step - first_step : 0;

  // The log: a new run starts it, a resumed run appends to the one it had.
  std::ofstream log;
  if (!options.log_csv.empty()) {
    check_replaceable(options.log_csv);
    const bool append = first_step > 0 && fs::exists(options.log_csv);
    if (options.log_csv.has_parent_path()) fs::create_directories(options.log_csv.parent_path());
    log.open(options.log_csv, append ? std::ios::app : std::ios::trunc);
    if (!log) throw std::runtime_error("cannot write the training log " + options.log_csv.string());
    if (!append) log << "step,loss,lr,grad_norm,tokens_per_s,seconds,val_loss,val_bits_per_byte\n";
  }
  const auto write_line = [&](const std::string& line) {
    if (!log.is_open()) return;
    log << line << '\n' << std::flush;
    if (!log) throw std::runtime_error("cannot write the training log " + options.log_csv.string());
  };

  TrainLog result;
  minimodel::GptTape<float> eval_tape;
  const Clock::time_point start = Clock::now();
  const std::clock_t cpu_start = std::clock();
  const auto evaluate_now = [&] {
    EvalPoint point{
        trainer.steps(),
        minimodel::evaluate(trainer.params(), validation, settings.length, settings.batch,
                            options.eval_windows, token_bytes, eval_tape)};
    result.evals.push_back(point);
    write_line(std::to_string(point.step) + ",,,,," +
               format("%.3f", seconds_between(start, Clock::now())) + "," +
               format("%.6f", point.eval.loss) + "," + format("%.6f", point.eval.bits_per_byte));
    if (on_eval) on_eval(point);
  };

  const bool terminal = options.progress && isatty(STDERR_FILENO) != 0;
  StepProgress progress(std::max<std::size_t>(to_do, 1));
  const double tokens_per_step = double(settings.batch * settings.length);
  double training_seconds = 0;  // steps only, evaluations excluded: the rate of a step
  for (std::size_t done = 0; done < to_do; ++done) {
    const double elapsed = seconds_between(start, Clock::now());
    const double mean_step = done > 0 ? training_seconds / double(done) : 0;
    if (options.time_budget_seconds > 0 && done > 0 &&
        elapsed + mean_step > options.time_budget_seconds) {
      result.stopped_by_time = true;
      break;
    }
    const Clock::time_point step_start = Clock::now();
    StepPoint point;
    point.stats = trainer.step(train);
    const Clock::time_point step_end = Clock::now();
    const double step_seconds = seconds_between(step_start, step_end);
    training_seconds += step_seconds;
    point.step = trainer.steps();
    point.tokens_per_second = tokens_per_step / std::max(step_seconds, 1e-9);
    point.seconds = seconds_between(start, step_end);
    result.steps.push_back(point);
    write_line(std::to_string(point.step) + "," + format("%.6f", point.stats.loss) + "," +
               format("%.6g", point.stats.lr) + "," + format("%.6f", point.stats.grad_norm) + "," +
               format("%.1f", point.tokens_per_second) + "," + format("%.3f", point.seconds) +
               ",,");
    if (options.progress) {
      // The time left: the steps left at the mean rate so far, or the budget's end if sooner.
      double left = double(to_do - done - 1) * training_seconds / double(done + 1);
      if (options.time_budget_seconds > 0)
        left = std::min(left, options.time_budget_seconds - point.seconds);
      std::string detail =
          "loss " + format("%.3f", point.stats.loss) + "  lr " + format("%.2e", point.stats.lr) +
          "  |g| " + format("%.2f", point.stats.grad_norm) + "  " +
          format("%.0f", double(done + 1) * tokens_per_step / training_seconds) + " tok/s";
      if (terminal) detail += "  ETA " + minutes_text(left);
      progress.update(done + 1, detail);
    }
    if (options.eval_every > 0 && point.step % options.eval_every == 0 && done + 1 < to_do)
      evaluate_now();
  }
  if (options.progress) progress.finish();
  if (result.evals.empty() || result.evals.back().step != trainer.steps()) evaluate_now();
  result.seconds = seconds_between(start, Clock::now());
  result.cpu_seconds = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return result;
}

}  // namespace workbench
