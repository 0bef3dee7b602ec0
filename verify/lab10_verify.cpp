// Lab 10 verify: trains the tiny attention-only transformer on the copying task (random tokens
// ending with a segment repeated once, the segment's length varying), then checks what it learned.
// Checks: the loss on the second copy falls far below log V while the random tokens' stays near
// it; the trained model predicts the second copy; a layer-0 head attends to the previous token and
// a layer-1 head to the token after the earlier occurrence of the current one (an induction head);
// the checkpoint reads back bit for bit. Measured, not checked: how much of a copy the model
// generates right from its own output, on sequences whose tokens before the copy are all distinct
// and on sequences where one occurs twice (workbench/generate/copy_accuracy.hpp).
// Writes loss_log.csv while it trains (progress on stderr: a bar, or a line every 5 %), the
// checkpoint folder, loss_curves.png, attention.png (every head before and after training) and
// head_scores.png.
#include <malloc.h>  // mallopt

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <xtensor/xsort.hpp>  // xt::argmax
#include <xtensor/xview.hpp>

#include "checkpoint/checkpoint.hpp"
#include "explore/page_data.hpp"
#include "figures/bar_chart.hpp"
#include "figures/heatmap.hpp"
#include "figures/line_plot.hpp"
#include "generate/copy_accuracy.hpp"
#include "lab_setup.hpp"
#include "minimodel/model/tiny_transformer.hpp"
#include "verify_frame/step_progress.hpp"

using minimodel::Matrix;
using minimodel::ModelConfig;
using minimodel::ModelParams;
using minimodel::ModelTape;
using minimodel::TokenBatch;

namespace {

// The run: about half a minute on 2 cores at -O3. The induction circuit forms near step 750 (the
// "phase change" of the loss curve), so 1500 steps leave it twice that time, should another
// BLAS or compiler round differently; an unoptimised build trains the same run, some 30 times
// slower, and says so.
const ModelConfig kModel = {64, 32, 64, 4, 2};  // V, max_len, d_model, heads, layers
constexpr std::size_t kLength = 32, kBatch = 32, kSteps = 1500;
constexpr float kLearningRate = 3e-3f;
#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
#else
constexpr bool kOptimised = false;
#endif
constexpr std::size_t kLogEvery = 10;        // steps per point of the loss log and curves
constexpr std::size_t kFinalSteps = 50;      // the final losses: the mean over these last steps
constexpr std::size_t kScoreSequences = 64;  // the held-out sequences of checks 3-5
// A head "is" a previous-token or an induction head when its mean weight on that one key exceeds
// 0.5: more than all other keys together. Random heads over T = 32 keys give ~1/16 on average.
constexpr double kHeadThreshold = 0.5;
// Before the circuit forms, the second copy's loss sits at log V, the loss of a uniform guess; the
// reference ends near 0.3, and a fifth of log V (0.83) separates the two. The random tokens cannot
// be predicted: their loss stays near log V, and a model that memorised its batches would fall
// below 0.9 log V. Greedy predictions of the second copy: the reference gets 91% right.
constexpr double kCopiedFraction = 0.2, kRandomFraction = 0.9, kAccuracy = 0.8;
// Greedy copying, measured: this many held-out sequences of each segment length and each kind.
constexpr std::size_t kCopyingPerKind = 6;

// The mean loss of a batch's predictions whose target is a random token (before the second copy)
// and of those whose target is a copy (in the second copy, after its first token, which nothing
// announces).
std::pair<double, double> split_losses(const Matrix<float>& losses,
                                       const minimodel::CopyBatch& batch) {
  double random = 0.0, copied = 0.0;
  std::size_t n_random = 0, n_copied = 0;
  for (std::size_t b = 0; b < batch.tokens.size(); ++b)
    for (std::size_t t = 0; t < losses.shape(1); ++t) {
      const std::size_t target = t + 1, second = kLength - batch.segment[b];
      if (target < second) random += losses(b, t), ++n_random;
      if (target > second) copied += losses(b, t), ++n_copied;
    }
  return {random / double(n_random), copied / double(n_copied)};
}

// The attention weights (T, T) of every head, [layer][head], for sequence b of the tape.
std::vector<std::vector<Matrix<float>>> heads_of(const ModelTape<float>& tape, std::size_t b) {
  std::vector<std::vector<Matrix<float>>> heads;
  for (const minimodel::BlockTape<float>& block : tape.blocks[b]) {
    heads.emplace_back();
    for (const minimodel::AttentionTape<float>& head : block.mha.heads)
      heads.back().push_back(head.probs);
  }
  return heads;
}

// The induction key of each query of a copying sequence whose segment has n tokens: the token
// after the earlier occurrence of the current one, t − n + 1, for t in the second copy but its
// last token (the task knows it; free text has workbench::induction_keys).
std::vector<std::optional<std::size_t>> copy_induction_keys(std::size_t n) {
  std::vector<std::optional<std::size_t>> keys(kLength);
  for (std::size_t t = kLength - n; t + 1 < kLength; ++t) keys[t] = t - n + 1;
  return keys;
}

// Mean weight on the previous token (key t − 1, for t >= 1) and on the induction key, per
// [layer][head], over the batch: workbench::score_head of each sequence, averaged.
struct HeadScores {
  std::vector<std::vector<double>> previous, induction;
};
HeadScores head_scores(const ModelTape<float>& tape, const minimodel::CopyBatch& batch) {
  const std::size_t layers = tape.blocks[0].size(), n_heads = tape.blocks[0][0].mha.heads.size();
  HeadScores scores{std::vector<std::vector<double>>(layers, std::vector<double>(n_heads)),
                    std::vector<std::vector<double>>(layers, std::vector<double>(n_heads))};
  const double sequences = double(tape.batch.size());
  for (std::size_t b = 0; b < tape.batch.size(); ++b) {
    const auto heads = heads_of(tape, b);
    const auto keys = copy_induction_keys(batch.segment[b]);
    for (std::size_t l = 0; l < layers; ++l)
      for (std::size_t h = 0; h < n_heads; ++h) {
        const workbench::HeadScore score = workbench::score_head(heads[l][h], keys);
        scores.previous[l][h] += *score.previous_token / sequences;
        scores.induction[l][h] += *score.induction / sequences;
      }
  }
  return scores;
}

// The attention explorer's page of sequence 0 of a held-out batch (`workbook explore 10`): every
// head, scored on that sequence with the task's induction keys, and the model's top 5 next tokens.
workbench::PageData explorer_page(const ModelTape<float>& tape, const xt::xtensor<float, 3>& logits,
                                  const minimodel::CopyBatch& batch) {
  workbench::PageData page;
  const std::size_t n = batch.segment[0];
  page.title = "Lab 10's trained model on a held-out sequence: a segment of " + std::to_string(n) +
               " tokens repeated at the end";
  page.notes.push_back("induction score: the weight on key t - " + std::to_string(n - 1) +
                       " from each query t of the second copy (the task's copied position)");
  for (const std::size_t token : batch.tokens[0]) page.tokens.push_back(std::to_string(token));
  page.weights = heads_of(tape, 0);
  const auto keys = copy_induction_keys(n);
  for (std::size_t l = 0; l < page.weights.size(); ++l)
    for (std::size_t h = 0; h < page.weights[l].size(); ++h) {
      page.scores.push_back(workbench::score_head(page.weights[l][h], keys));
      page.scores.back().layer = l;
      page.scores.back().head = h;
    }
  try {
    for (std::size_t t = 0; t < logits.shape(1); ++t)
      page.predictions.push_back(workbench::top_predictions(
          xt::view(logits, 0, t), 5, [](std::size_t id) { return std::to_string(id); }));
  } catch (const std::invalid_argument& e) {  // a logit that is not finite: the checks say more
    page.predictions.clear();
    page.notes.push_back(std::string("no next-token predictions: ") + e.what());
  }
  return page;
}

std::string fixed(double value, int decimals = 3) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string percent(const workbench::CopyScore& score) {
  return std::to_string(score.right) + " of " + std::to_string(score.tokens) + " tokens right (" +
         fixed(100.0 * score.accuracy(), 1) + "%) in " + std::to_string(score.sequences) +
         " sequences";
}

nlohmann::json as_json(const workbench::CopyScore& score) {
  return {{"sequences", score.sequences},
          {"tokens", score.tokens},
          {"right", score.right},
          {"accuracy", score.accuracy()}};
}

// Prints and records both accuracies, how many first errors follow a token that occurs twice before
// the second copy, and one such error in full. The manifest also gets each kind's tokens right per
// segment length and every first error.
void report_copying(workbench::VerifyRun& run, const minimodel::CopyBatch& sequences,
                    const workbench::CopyAccuracy& copied) {
  std::size_t after_repeat = 0;
  const workbench::CopyError* example = nullptr;
  nlohmann::json errors = nlohmann::json::array();
  for (const workbench::CopyError& error : copied.errors) {
    if (error.earlier.size() >= 2) {
      ++after_repeat;
      if (!example) example = &error;
    }
    errors.push_back({{"sequence", error.sequence},
                      {"segment", sequences.segment[error.sequence]},
                      {"position", error.position},
                      {"expected", error.expected},
                      {"generated", error.generated},
                      {"matched", error.matched},
                      {"matched_before_the_copy_at", error.earlier}});
  }
  nlohmann::json by_segment = nlohmann::json::array();
  for (std::size_t n = kLength / 4; n <= kLength / 2; ++n) {
    workbench::CopyScore distinct, repeated;
    for (std::size_t b = 0; b < sequences.tokens.size(); ++b)
      if (sequences.segment[b] == n) {
        workbench::CopyScore& kind =
            workbench::distinct_before_copy(sequences.tokens[b], n) ? distinct : repeated;
        ++kind.sequences, kind.tokens += n - 1, kind.right += copied.right[b];
      }
    by_segment.push_back({{"segment", n},
                          {"distinct_before_copy", as_json(distinct)},
                          {"repeated_before_copy", as_json(repeated)}});
  }
  run.print("Greedy copying (measured, not checked): " + std::to_string(sequences.tokens.size()) +
            " more held-out sequences, " + std::to_string(kCopyingPerKind) +
            " of each segment length and kind, each given up to the first token of its second "
            "copy; the model continues it from its own output, as workbook generate does.");
  run.print("  tokens before the second copy all distinct:  " + percent(copied.distinct));
  run.print("  a token occurring twice before the copy:     " + percent(copied.repeated));
  run.print("  " + std::to_string(copied.errors.size()) +
            " sequences have an error; at the first, " + std::to_string(after_repeat) +
            " follow a token that occurs two or more times before the second copy.");
  if (example) {
    const std::vector<std::size_t>& tokens = sequences.tokens[example->sequence];
    const std::size_t second = tokens.size() - sequences.segment[example->sequence];
    std::string line = "  For example:";
    for (std::size_t t = 0; t < tokens.size(); ++t)
      line += std::string(t == second ? " |" : "") + " " + std::to_string(tokens[t]);
    run.print(line + "  (| marks the second copy)");
    std::string where;
    for (const std::size_t j : example->earlier)
      where += (where.empty() ? "" : ", ") + std::to_string(j) + " (then " +
               std::to_string(tokens[j + 1]) + ")";
    run.print("  At position " + std::to_string(example->position) + " the copy has " +
              std::to_string(example->expected) + " but the model wrote " +
              std::to_string(example->generated) + ". The token before it, " +
              std::to_string(example->matched) + ", stands before the second copy at " + where +
              ".");
  }
  run.print("  (manifest.json: greedy_copying, by segment length and with every first error)");
  run.measure("greedy_copying", {{"distinct_before_copy", as_json(copied.distinct)},
                                 {"repeated_before_copy", as_json(copied.repeated)},
                                 {"sequences_with_an_error", copied.errors.size()},
                                 {"first_error_after_a_repeated_token", after_repeat},
                                 {"by_segment", by_segment},
                                 {"first_errors", errors}});
}

}  // namespace

int main(int argc, char** argv) {
  // Every step allocates the same temporaries again. glibc would hand blocks over 128 KiB back to
  // the system when freed, and the next step would fault in fresh pages, which on a virtual machine
  // cost 40% of the run: keep freed memory in the heap instead. (The numbers stay bit for bit.)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const ModelConfig& model = kModel;
  const nlohmann::json config = {{"vocab", model.vocab},
                                 {"max_len", model.max_len},
                                 {"d_model", model.d_model},
                                 {"n_heads", model.n_heads},
                                 {"n_layers", model.n_layers},
                                 {"length", kLength},
                                 {"segment", {kLength / 4, kLength / 2}},
                                 {"batch", kBatch},
                                 {"steps", kSteps},
                                 {"learning_rate", kLearningRate},
                                 {"init_seed", lab_setup::kSeed},
                                 {"data_seed", lab_setup::kSeed + 1},
                                 {"held_out_seed", lab_setup::kSeed + 2},
                                 {"copying_seed", lab_setup::kSeed + 3},
                                 {"copying_per_kind", kCopyingPerKind}};
  return lab_setup::run(argc, argv, lab_setup::kSeed, config, [&](workbench::VerifyRun& run) {
    const double log_v = std::log(double(model.vocab));
    run.print("Training on the copying task: sequences of " + std::to_string(kLength) +
              " tokens from a vocabulary of V = " + std::to_string(model.vocab) +
              ", ending with a segment of " + std::to_string(kLength / 4) + " to " +
              std::to_string(kLength / 2) + " tokens repeated once; d_model " +
              std::to_string(model.d_model) + ", " + std::to_string(model.n_layers) +
              " layers of " + std::to_string(model.n_heads) + " heads, batches of " +
              std::to_string(kBatch) + ", Adam at lr " + fixed(kLearningRate, 4) + ", " +
              std::to_string(kSteps) + " steps. log V = " + fixed(log_v) + ".");
    if (!kOptimised)
      run.print("An unoptimised build: the training takes some 30 times longer than at -O3.");

    ModelParams<float> params = minimodel::init_model(model, lab_setup::kSeed);
    const ModelParams<float> initial = params;
    // For `workbook diff 10`: the untrained model's logits and gradients on four held-out
    // sequences, which any correct implementation reproduces (the trained weights depend on the
    // order of every float sum over 1500 steps, and do not). float32 sums in another order differ
    // by ~1e-6 at these sizes: 1e-4 leaves room.
    {
      std::mt19937_64 probe_data(lab_setup::kSeed + 2);
      const minimodel::CopyBatch probe = minimodel::copy_task(4, kLength, model.vocab, probe_data);
      ModelTape<float> probe_tape;
      const xt::xtensor<float, 3> logits =
          minimodel::model_forward(initial, model.n_heads, probe.tokens, probe_tape);
      xt::xtensor<float, 3> d_logits;
      const Matrix<float> losses = minimodel::next_token_loss(logits, probe.tokens, d_logits);
      const ModelParams<float> grads =
          minimodel::model_backward(initial, model.n_heads, probe_tape, d_logits);
      // init_model is exact (InitModel.FollowsTheBlueprint compares with ==).
      run.record("init_model_embedding", initial.embedding, 0.0, "A");
      run.record("init_model_layer0_w_q", initial.layers[0].w_q, 0.0, "A");
      run.record("model_forward_logits", logits, 1e-4, "A");
      run.record("next_token_loss", losses, 1e-4, "A");
      run.record("next_token_loss_d_logits", d_logits, 1e-4, "A");
      run.record("model_backward_embedding", grads.embedding, 1e-4, "B");
      run.record("model_backward_positions", grads.positions, 1e-4, "B");
      run.record("model_backward_layer0_w_q", grads.layers[0].w_q, 1e-4, "B");
      run.record("model_backward_unembedding", grads.unembedding, 1e-4, "B");
      // Block C: two adam_update steps on a hand-made tensor (1e-6, AdamUpdate.MatchesTwoSteps…),
      // then two train_steps on a copy of the untrained model: the second's losses, after one
      // update (1e-4, as above).
      Matrix<float> param = {{0.5f, -1.0f, 2.0f}, {0.0f, 1.5f, -0.25f}};
      const Matrix<float> grad = {{0.3f, -2.0f, 1.0f}, {-0.5f, 0.1f, 4.0f}};
      Matrix<float> m = xt::zeros<float>(param.shape()), v = xt::zeros<float>(param.shape());
      for (std::size_t t = 1; t <= 2; ++t)
        minimodel::adam_update(param, grad, m, v, t, {0.1f, 0.9f, 0.999f, 1e-8f});
      run.record("adam_update_two_steps", param, 1e-6, "C");
      ModelParams<float> stepped = initial;
      minimodel::Adam probe_adam(stepped, {kLearningRate, 0.9f, 0.999f, 1e-8f});
      minimodel::train_step(stepped, model.n_heads, probe_adam, probe.tokens);
      run.record("train_step_losses_after_one_step",
                 minimodel::train_step(stepped, model.n_heads, probe_adam, probe.tokens), 1e-4,
                 "C");
    }
    if (run.comparing()) return;  // workbook diff: what follows is the training
    minimodel::Adam adam(params, {kLearningRate, 0.9f, 0.999f, 1e-8f});
    std::mt19937_64 data(lab_setup::kSeed + 1);

    // The loss log, written as training goes (tail -f it), and the progress on stderr.
    const std::filesystem::path log_path = run.artifact("loss_log.csv");
    std::ofstream log(log_path);
    log << "step,random_tokens_loss,second_copy_loss,seconds\n";
    workbench::StepProgress progress(kSteps);
    std::vector<double> curve_steps, curve_random, curve_copied;
    double window_random = 0.0, window_copied = 0.0, final_random = 0.0, final_copied = 0.0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t step = 1; step <= kSteps; ++step) {
      const minimodel::CopyBatch batch = minimodel::copy_task(kBatch, kLength, model.vocab, data);
      const auto [random, copied] =
          split_losses(minimodel::train_step(params, model.n_heads, adam, batch.tokens), batch);
      window_random += random / kLogEvery;
      window_copied += copied / kLogEvery;
      if (step > kSteps - kFinalSteps) {
        final_random += random / kFinalSteps;
        final_copied += copied / kFinalSteps;
      }
      if (step % kLogEvery == 0) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        log << step << ',' << window_random << ',' << window_copied << ',' << seconds << '\n'
            << std::flush;
        curve_steps.push_back(double(step));
        curve_random.push_back(window_random);
        curve_copied.push_back(window_copied);
        char losses[64];
        std::snprintf(losses, sizeof losses, "random %.3f  second copy %.3f", window_random,
                      window_copied);
        progress.update(step, losses);
        window_random = window_copied = 0.0;
      }
    }
    progress.finish();
    log.close();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.measure("training_seconds", seconds);
    run.print("Trained in " + fixed(seconds, 1) + " s (measured, not checked); the loss every " +
              std::to_string(kLogEvery) + " steps is in loss_log.csv.");

    // ---- The losses ----
    run.print("Checks 1-3. The mean loss over the last " + std::to_string(kFinalSteps) +
              " training batches; greedy predictions of the second copies of 64 new sequences.");
    run.check("the second copy's loss is below a fifth of log V",
              final_copied < kCopiedFraction * log_v, final_copied,
              "second copy " + fixed(final_copied) + " < " + fixed(kCopiedFraction * log_v));
    run.check("the random tokens' loss stays near log V (nothing can predict them)",
              final_random > kRandomFraction * log_v, final_random,
              "random tokens " + fixed(final_random) + " > " + fixed(kRandomFraction * log_v));
    std::mt19937_64 held_out(lab_setup::kSeed + 2);
    const minimodel::CopyBatch test =
        minimodel::copy_task(kScoreSequences, kLength, model.vocab, held_out);
    ModelTape<float> tape;
    const xt::xtensor<float, 3> logits =
        minimodel::model_forward(params, model.n_heads, test.tokens, tape);
    std::size_t right = 0, predictions = 0;
    for (std::size_t b = 0; b < test.tokens.size(); ++b)
      for (std::size_t t = kLength - test.segment[b]; t + 1 < kLength; ++t, ++predictions)
        right += std::size_t(xt::argmax(xt::view(logits, b, t))() == test.tokens[b][t + 1]);
    const double accuracy = double(right) / double(predictions);
    run.check("greedy predictions of the second copy are right at least 80% of the time",
              accuracy >= kAccuracy, accuracy,
              std::to_string(right) + " of " + std::to_string(predictions) + " right");

    // ---- Greedy copying, by kind of sequence (measured, not checked) ----
    // Check 3 gives the model the true tokens before each prediction; here it continues the copy
    // from its own output, as `workbook generate` does, on sequences of both kinds.
    std::mt19937_64 copying_data(lab_setup::kSeed + 3);
    const minimodel::CopyBatch copying =
        workbench::balanced_copy_sequences(kCopyingPerKind, kLength, model.vocab, copying_data);
    const workbench::CopyAccuracy copied =
        workbench::copy_accuracy(copying, [&](const std::vector<std::size_t>& context) {
          ModelTape<float> context_tape;
          const xt::xtensor<float, 3> next =
              minimodel::model_forward(params, model.n_heads, {context}, context_tape);
          return std::size_t(xt::argmax(xt::view(next, 0, context.size() - 1))());
        });
    report_copying(run, copying, copied);

    // ---- The heads ----
    const HeadScores trained = head_scores(tape, test);
    workbench::save_page_data(run.artifact("explore.json"), explorer_page(tape, logits, test));
    ModelTape<float> initial_tape;
    minimodel::model_forward(initial, model.n_heads, test.tokens, initial_tape);
    const HeadScores random = head_scores(initial_tape, test);
    run.print(
        "Checks 4-5. Each head's mean weight on the previous token (key t - 1) and, in the "
        "second copy, on the token after the earlier occurrence of the current one (key "
        "t - n + 1), over the 64 sequences:");
    run.print("  head     previous  induction   (before training: previous  induction)");
    nlohmann::json score_rows = nlohmann::json::array();
    std::vector<std::string> head_names;
    std::vector<double> previous_bars, induction_bars;
    for (std::size_t l = 0; l < model.n_layers; ++l)
      for (std::size_t h = 0; h < model.n_heads; ++h) {
        const std::string name = "L" + std::to_string(l) + " H" + std::to_string(h);
        run.print("  " + name + "    " + fixed(trained.previous[l][h]) + "      " +
                  fixed(trained.induction[l][h]) + "                      " +
                  fixed(random.previous[l][h]) + "      " + fixed(random.induction[l][h]));
        head_names.push_back(name);
        previous_bars.push_back(trained.previous[l][h]);
        induction_bars.push_back(trained.induction[l][h]);
        score_rows.push_back({{"layer", l},
                              {"head", h},
                              {"previous_token", trained.previous[l][h]},
                              {"induction", trained.induction[l][h]},
                              {"previous_token_before", random.previous[l][h]},
                              {"induction_before", random.induction[l][h]}});
      }
    run.measure("head_scores", score_rows);
    const auto best = [](const std::vector<double>& scores) {
      const auto at = std::max_element(scores.begin(), scores.end());
      return std::make_pair(std::size_t(at - scores.begin()), *at);
    };
    const auto [previous_head, previous_score] = best(trained.previous[0]);
    const auto [induction_head, induction_score] = best(trained.induction[model.n_layers - 1]);
    run.check("layer 0 has a previous-token head (mean weight on t - 1 above 0.5)",
              previous_score > kHeadThreshold, previous_score,
              "L0 H" + std::to_string(previous_head) + ": " + fixed(previous_score));
    run.check("the last layer has an induction head (mean weight on the copied position above 0.5)",
              induction_score > kHeadThreshold, induction_score,
              "L" + std::to_string(model.n_layers - 1) + " H" + std::to_string(induction_head) +
                  ": " + fixed(induction_score));

    // ---- The checkpoint ----
    const std::filesystem::path checkpoint_dir = log_path.parent_path() / "checkpoint";
    workbench::save_checkpoint(checkpoint_dir, {model,
                                                params,
                                                {{"steps", kSteps},
                                                 {"seconds", seconds},
                                                 {"random_tokens_loss", final_random},
                                                 {"second_copy_loss", final_copied},
                                                 {"run", config}}});
    const workbench::Checkpoint loaded = workbench::load_checkpoint(checkpoint_dir);
    bool same = loaded.config.vocab == model.vocab && loaded.config.n_layers == model.n_layers;
    const auto saved_tensors = minimodel::tensors_of(params);
    const auto read_tensors = minimodel::tensors_of(loaded.params);
    same = same && saved_tensors.size() == read_tensors.size();
    for (std::size_t i = 0; same && i < saved_tensors.size(); ++i)
      same = *saved_tensors[i] == *read_tensors[i];
    run.check("the checkpoint reads back bit for bit", same, double(saved_tensors.size()),
              std::to_string(saved_tensors.size()) + " tensors in " + checkpoint_dir.string());
    run.print("Continue a sequence with it: build/bin/workbook generate --checkpoint " +
              checkpoint_dir.string() + " --prompt \"…\"");

    // ---- Figures ----
    workbench::LinePlot curves;
    curves.title = "Lab 10: training loss (mean of every " + std::to_string(kLogEvery) +
                   " batches), V " + std::to_string(model.vocab) + ", T " + std::to_string(kLength);
    curves.x_label = "step";
    curves.y_label = "next-token cross-entropy (nats)";
    curves.series = {
        {curve_steps, curve_random, "random tokens"},
        {curve_steps, curve_copied, "second copy of the segment"},
        {{curve_steps.front(), curve_steps.back()}, {log_v, log_v}, "log V (a uniform guess)"}};
    workbench::render_line_plot(run.artifact("loss_curves.png"), curves);

    workbench::HeatmapFigure attention;
    attention.title = "Lab 10: every head on one test sequence (its last " +
                      std::to_string(test.segment[0]) + " tokens repeat the " +
                      std::to_string(test.segment[0]) + " before them), before and after training";
    const auto before = heads_of(initial_tape, 0), after = heads_of(tape, 0);
    xt::xtensor<bool, 2> future = xt::zeros<bool>({kLength, kLength});
    for (std::size_t i = 0; i < kLength; ++i)
      for (std::size_t j = i + 1; j < kLength; ++j) future(i, j) = true;
    for (const auto* heads : {&before, &after})
      for (std::size_t l = 0; l < model.n_layers; ++l)
        for (std::size_t h = 0; h < model.n_heads; ++h)
          attention.panels.push_back({(*heads)[l][h],
                                      std::string(heads == &before ? "random" : "trained") + " L" +
                                          std::to_string(l) + " H" + std::to_string(h),
                                      future});
    attention.grid_rows = 2 * model.n_layers;
    attention.grid_cols = model.n_heads;
    for (const std::size_t token : test.tokens[0])
      attention.row_labels.push_back(std::to_string(token));
    attention.col_labels = attention.row_labels;
    attention.excluded_label = "future (causal mask)";
    workbench::render_heatmaps(run.artifact("attention.png"), attention);

    workbench::BarChart bars;
    bars.title = "Lab 10: what each trained head attends to (64 test sequences)";
    bars.x_label = "head (layer, head)";
    bars.y_label = "mean attention weight";
    bars.categories = head_names;
    bars.series = {{previous_bars, "previous-token score (key t - 1)"},
                   {induction_bars, "induction score (key after the earlier occurrence)"}};
    bars.y_max = 1.0;
    workbench::render_bar_chart(run.artifact("head_scores.png"), bars);
  });
}
