// The engine behind `workbook evaluate`: built once per implementation (evaluate-gpt-learner,
// evaluate-gpt-reference). Loads a checkpoint of lab 13's GPT, encodes the held-out books (lab
// 12's split, workbench/corpus) with the checkpoint's own tokenizer, and prints lab 13's evaluate
// on them: the loss in nats per token and bits per byte; with --ablate, the same again with those
// heads' rows of attn.w_o zeroed in a copy of the parameters, and the difference. Progress goes to
// stderr as windows are scored. Exit status: 0 done, 1 a TODO stub was reached, 2 bad input.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/gpt_checkpoint.hpp"
#include "corpus/kjv_corpus.hpp"
#include "generate/checkpoint_encoder.hpp"
#include "generate/evaluate_options.hpp"
#include "generate/head_ablation.hpp"
#include "minimodel/implementation.hpp"
#include "minimodel/model/gpt.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "util/engine_main.hpp"

namespace {

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What is scored: `windows` windows of T + 1 tokens of `stream`, `batch` at a time.
struct Scoring {
  const std::vector<minimodel::TokenId>& stream;
  std::size_t length, batch, windows;
  const std::vector<std::size_t>& token_bytes;
};

// lab 13's evaluate over the windows, run a few batches at a time so that progress can be shown
// (`done` is called with the windows scored so far). Each piece is evaluate on the windows it
// covers, whole batches but for the last; the pieces' nats and bytes add up to those of one call.
minimodel::Evaluation evaluate_in_pieces(const minimodel::GptParams<float>& params,
                                         const Scoring& s,
                                         const std::function<void(std::size_t)>& done) {
  const std::size_t piece = 8 * s.batch;  // windows a piece: a second or less in Release
  minimodel::GptTape<float> tape;
  double nats = 0;
  minimodel::Evaluation total;
  for (std::size_t first = 0; first < s.windows; first += piece) {
    const std::size_t count = std::min(piece, s.windows - first);
    const auto begin = s.stream.begin() + std::ptrdiff_t(first * s.length);
    const std::vector<minimodel::TokenId> part(begin, begin + std::ptrdiff_t(count * s.length + 1));
    const minimodel::Evaluation e =
        minimodel::evaluate(params, part, s.length, s.batch, count, s.token_bytes, tape);
    nats += e.loss * double(e.tokens);
    total.tokens += e.tokens;
    total.bytes += e.bytes;
    done(first + count);
  }
  total.loss = nats / double(total.tokens);
  total.bits_per_byte = minimodel::bits_per_byte(nats, total.bytes);
  return total;
}

// Progress on stderr once a pass has taken a second: rewritten in place on a terminal, else a line
// at each quarter.
class Progress {
 public:
  Progress(std::string what, std::size_t windows)
      : what_(std::move(what)), windows_(windows), terminal_(isatty(STDERR_FILENO) != 0) {}
  void operator()(std::size_t done) {
    if (seconds_since(start_) < 1.0) return;
    const std::size_t percent = 100 * done / windows_;
    if (terminal_) {
      std::fprintf(stderr, "\r  %s: %zu of %zu windows (%zu%%)", what_.c_str(), done, windows_,
                   percent);
      shown_ = true;
    } else if (percent / 25 > quarter_) {
      quarter_ = percent / 25;
      std::fprintf(stderr, "  %s: %zu of %zu windows (%zu%%), %.0f s\n", what_.c_str(), done,
                   windows_, percent, seconds_since(start_));
    }
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r\033[K");  // the line cleared for the results
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  std::string what_;
  std::size_t windows_;
  bool terminal_, shown_ = false;
  std::size_t quarter_ = 0;
  Clock::time_point start_ = Clock::now();
};

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

std::string result_line(const std::string& label, const minimodel::Evaluation& e) {
  return "  " + label + "loss " + format("%.6f", e.loss) + " nats per token, " +
         format("%.6f", e.bits_per_byte) + " bits per byte";
}

int evaluate(const workbench::EvaluateOptions& o) {
  // 1. The checkpoint, and the heads to ablate checked against it before anything long runs.
  workbench::GptCheckpoint checkpoint;
  try {
    checkpoint = workbench::load_gpt_checkpoint(o.checkpoint);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    reject("--checkpoint: " + what +
           (what.find("lab 10's model") != std::string::npos
                ? "; evaluate scores lab 13's GPT on the held-out books: give a checkpoint of lab "
                  "13 (`workbook verify 13` writes experiments/13-gpt/checkpoint)"
                : ""));
  }
  const minimodel::GptConfig& config = checkpoint.params.config;
  const std::vector<workbench::HeadRef> heads =
      o.ablate.empty() ? std::vector<workbench::HeadRef>{} : workbench::parse_heads(o.ablate);
  minimodel::GptParams<float> ablated = checkpoint.params;  // a copy: the folder is never written
  workbench::ablate_heads(ablated, heads);

  // 2. The held-out books in the checkpoint's tokens.
  minimodel::BpeEncoder encoder = workbench::checkpoint_encoder(checkpoint, o.checkpoint);
  std::vector<std::size_t> token_bytes(encoder.bpe().vocab.size());
  for (std::size_t id = 0; id < token_bytes.size(); ++id)
    token_bytes[id] = encoder.bpe().vocab[id].size();
  const std::string text = workbench::kjv_corpus().validation;
  const std::vector<minimodel::TokenId> ids = encoder.encode(text);

  // 3. Windows of the context the model was trained with, as many as asked for.
  const std::size_t length = checkpoint.length > 0 && checkpoint.length <= config.max_len
                                 ? checkpoint.length
                                 : config.max_len;
  const std::size_t batch = checkpoint.batch > 0 ? checkpoint.batch : 16;  // lab 13's default B
  if (ids.size() < length + 1)
    reject("the held-out books are " + std::to_string(ids.size()) +
           " tokens, fewer than one window of " + std::to_string(length + 1));
  const std::size_t available = (ids.size() - 1) / length;
  const std::size_t windows =
      std::min(o.windows.value_or(workbench::kDefaultEvaluateWindows), available);
  const Scoring scoring{ids, length, batch, windows, token_bytes};

  std::printf("Checkpoint %s: step %zu, %zu layers of %zu heads, %s implementation.\n",
              o.checkpoint.string().c_str(), checkpoint.step, config.n_layers, config.n_heads,
              minimodel::implementation_name());
  std::printf(
      "Held-out books (Ruth, Esther, Proverbs, Lamentations, Daniel, Mark, Romans, "
      "Revelation): %zu tokens; scoring %zu of their %zu windows of %zu + 1 tokens%s.\n",
      ids.size(), windows, available, length, windows < available ? " (--windows)" : " (all)");
  std::fflush(stdout);

  // 4. The model as trained, then with the heads ablated.
  const auto start = Clock::now();
  minimodel::Evaluation base;
  {
    Progress progress("unablated", windows);
    base = evaluate_in_pieces(checkpoint.params, scoring, std::ref(progress));
  }
  std::printf("%s\n", result_line(heads.empty() ? "" : "unablated:  ", base).c_str());
  std::fflush(stdout);
  if (!heads.empty()) {
    minimodel::Evaluation cut;
    {
      Progress progress("ablating " + workbench::head_names(heads), windows);
      cut = evaluate_in_pieces(ablated, scoring, std::ref(progress));
    }
    std::printf("%s\n", result_line("ablated:    ", cut).c_str());
    std::printf("  difference: %+.6f nats per token, %+.6f bits per byte (ablating %s)\n",
                cut.loss - base.loss, cut.bits_per_byte - base.bits_per_byte,
                workbench::head_names(heads).c_str());
  }
  std::printf("(%zu tokens scored, %zu bytes, in %.1f s)\n", base.tokens, base.bytes,
              seconds_since(start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  CLI::App app{
      "The validation loss of a checkpoint of lab 13's GPT, with heads ablated, with the " + impl +
      " implementation of labs 12 and 13. Normally run through `workbook evaluate`."};
  workbench::EvaluateOptions options;
  workbench::add_evaluate_options(app, options);
  return workbench::engine_main(
      app, argc, argv,
      {"workbook evaluate", impl, "the checkpoint's model is too large for the memory available"},
      [&] { return evaluate(options); });
}
