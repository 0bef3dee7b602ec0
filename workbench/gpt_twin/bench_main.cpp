// gpt-bench: the C++ side of scripts/bench_gpt.py, maintainers only. Times the reference's
// training step of lab 13's default model (forward, loss, backward, clipping, AdamW) and its
// sampling with and without the KV cache, after a warm-up, as the median of --repetitions, with
// the process's CPU time against wall time; writes the model, the batch and the prompt into
// --dump for PyTorch's side (gpt_twin.py's format) and prints the timings as JSON (--json) or text.
// The tokens are uniform random ids: a step's cost does not depend on them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>  // OpenBLAS's own: openblas_get_num_threads, openblas_get_corename
#include <CLI/CLI.hpp>
#include <xtensor/xnpy.hpp>

#include "gpt_twin/twin_data.hpp"
#include "minimodel/model/gpt.hpp"

namespace {

namespace fs = std::filesystem;

struct Options {
  fs::path dump;
  std::size_t repetitions = 10;
  int threads = 1;
  bool json = false, quick = false, train_only = false;
};

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of `repetitions` calls after `warmup` calls, and CPU / wall over all of them.
nlohmann::json timed(const std::function<void()>& call, std::size_t repetitions, std::size_t warmup,
                     int threads, double tokens_per_call) {
  const double cpu_start = cpu_seconds(), wall_start = wall_seconds();
  for (std::size_t i = 0; i < warmup; ++i) call();
  std::vector<double> times, cpu_times;
  for (std::size_t i = 0; i < repetitions; ++i) {
    const double start = wall_seconds(), cpu_before = cpu_seconds();
    call();
    times.push_back(wall_seconds() - start);
    cpu_times.push_back(cpu_seconds() - cpu_before);
  }
  const double cpu = cpu_seconds() - cpu_start, wall = wall_seconds() - wall_start;
  const auto median_of = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  };
  const double median = median_of(times);
  const double ratio = cpu / (wall * threads);
  return {{"median_ms", median * 1e3},
          {"median_cpu_ms", median_of(cpu_times) * 1e3},
          {"tokens_per_s", tokens_per_call / median},
          {"cpu_wall",
           {{"cpu_s", cpu},
            {"wall_s", wall},
            {"threads", threads},
            {"ratio", ratio},
            {"ok", ratio >= 0.85 && ratio <= 1.15}}}};
}

// Sampling with and without the KV cache, into result["sampling"].
void time_sampling(const minimodel::GptParams<float>& params,
                   const std::vector<minimodel::TokenId>& prompt, std::size_t new_tokens,
                   const Options& options, nlohmann::json& result) {
  using namespace minimodel;
  const std::size_t prompt_length = prompt.size();
  const GptConfig& config = params.config;
  // Greedy sampling, so that the two ways must give the same tokens.
  SamplingOptions greedy;
  greedy.temperature = 0;
  std::vector<TokenId> with_cache, without_cache;
  const auto cached = [&] {
    std::mt19937_64 sampler(7);
    with_cache = generate(params, prompt, new_tokens, greedy, sampler);
  };
  GptTape<float> sample_tape;
  const auto uncached = [&] {
    std::vector<TokenId> text = prompt;
    without_cache.clear();
    for (std::size_t i = 0; i < new_tokens; ++i) {
      BatchTokens tokens({1, text.size()});
      std::copy(text.begin(), text.end(), tokens.begin());
      const auto& logits = gpt_forward(params, tokens, sample_tape);  // (1, t, V)
      const float* last = logits.data() + (text.size() - 1) * config.vocab;
      const TokenId next = TokenId(std::max_element(last, last + config.vocab) - last);
      text.push_back(next);
      without_cache.push_back(next);
    }
  };
  result["sampling"] = {{"prompt", prompt_length}, {"new_tokens", new_tokens}};
  result["sampling"]["cached"] =
      timed(cached, options.repetitions, 1, options.threads, double(new_tokens));
  result["sampling"]["uncached"] =
      timed(uncached, std::max<std::size_t>(1, options.repetitions / 2), 1, options.threads,
            double(new_tokens));
  result["sampling"]["cached_equals_uncached"] = with_cache == without_cache;
}

int run(const Options& options) {
  using namespace minimodel;
  gpt_twin::set_threads(options.threads);
  const gpt_twin::RunShape shape = gpt_twin::run_shape(options.quick);
  const GptConfig& config = shape.config;
  const std::size_t batch_size = shape.batch_size, context = config.max_len;
  const std::size_t prompt_length = context / 8, new_tokens = context - prompt_length;
  TrainOptions train;
  const AdamWOptions adamw_options;
  GptParams<float> params = init_gpt(config, 1337);
  GptParams<float> grads = zero_gpt<float>(config);
  AdamW adamw(parameter_tensors(std::as_const(params)), adamw_options);
  GptTape<float> tape;

  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<TokenId> token(0, TokenId(config.vocab - 1));
  std::vector<TokenId> stream(batch_size * (context + 1));
  for (TokenId& id : stream) id = token(rng);
  GptBatch batch{BatchTokens({batch_size, context}), BatchTokens({batch_size, context})};
  for (std::size_t b = 0; b < batch_size; ++b)
    for (std::size_t t = 0; t < context; ++t) {
      batch.inputs(b, t) = stream[b * (context + 1) + t];
      batch.targets(b, t) = stream[b * (context + 1) + t + 1];
    }
  std::vector<TokenId> prompt(stream.begin(), stream.begin() + std::ptrdiff_t(prompt_length));

  if (!options.dump.empty()) {
    gpt_twin::save_tensors(options.dump / "init", params);
    xt::xtensor<std::int32_t, 3> tokens({1, batch_size, context + 1});
    std::copy(stream.begin(), stream.end(), tokens.begin());
    xt::dump_npy((options.dump / "tokens.npy").string(), tokens);
    gpt_twin::save_stream(options.dump / "prompt.npy", prompt);
    for (const char* name : {"losses", "grad_norms", "lrs"})
      gpt_twin::save_floats(options.dump / (std::string(name) + ".npy"), {0.0f});
    gpt_twin::save_windows(options.dump / "val_tokens.npy", {stream});
    nlohmann::json run_json =
        gpt_twin::describe_run(params, batch_size, context, train, adamw_options);
    run_json["sample_new_tokens"] = new_tokens;
    std::ofstream(options.dump / "run.json") << run_json.dump(2) << "\n";
  }

  nlohmann::json result = gpt_twin::describe_run(params, batch_size, context, train, adamw_options);
  result["threads"] = options.threads;
  result["openblas_threads"] = openblas_get_num_threads();
  result["openblas_core"] = openblas_get_corename();
  result["repetitions"] = options.repetitions;
  result["train_step"] =
      timed([&] { train_step(params, grads, adamw, tape, batch, train); }, options.repetitions, 2,
            options.threads, double(batch_size * context));

  if (!options.train_only) time_sampling(params, prompt, new_tokens, options, result);
  if (options.json) {
    std::printf("%s\n", result.dump(2).c_str());
  } else {
    std::printf("training step (%zu tokens): %.2f ms, %.0f tokens/s\n", batch_size * context,
                result["train_step"]["median_ms"].get<double>(),
                result["train_step"]["tokens_per_s"].get<double>());
    for (const char* kind : {"cached", "uncached"})
      if (result.contains("sampling"))
        std::printf("sampling %s: %.0f tokens/s\n", kind,
                    result["sampling"][kind]["tokens_per_s"].get<double>());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Lab 13's training step and sampling timed, for scripts/bench_gpt.py"};
  app.add_option("--dump", options.dump, "write the model, batch and prompt here for torch");
  app.add_option("--repetitions", options.repetitions, "timed calls (median)");
  app.add_option("--threads", options.threads, "OpenBLAS threads");
  app.add_flag("--json", options.json, "print the timings as JSON");
  app.add_flag("--quick", options.quick, "a small model: a smoke test");
  app.add_flag("--train-only", options.train_only,
               "time the training step alone (to profile it: perf record gpt-bench --train-only)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt-bench: %s\n", error.what());
    return 1;
  }
}
