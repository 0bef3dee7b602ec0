// `workbook`: the learner's command. Verbs run the workbook's other programs as child processes,
// so this command never links the learner's code and keeps working while that code is broken.
// This file only wires the command line; each verb is in a file of its own beside it.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "attend/attend_options.hpp"
#include "explore/explore_options.hpp"
#include "generate/evaluate_options.hpp"
#include "generate/generate_options.hpp"
#include "runner/verbs.hpp"
#include "tokenize/tokenize_options.hpp"
#include "util/process.hpp"
#include "util/source_tree.hpp"

namespace {

using workbook::kEnvironment;
using workbook::kUsage;

// Builds the engine of `verb` for `impl` (attend-learner, …) in the build folder first, so that it
// runs the learner's latest code; build steps go to stderr as check's do. The reference's engine,
// which a learner never changes and every build preset builds, only when it is missing: a no-op
// build costs half a second, and the tests run the reference's engines dozens of times. Its path,
// or nullopt after one message.
// While it builds and the engine runs, `lock` holds the build folder.
std::optional<std::filesystem::path> built_engine(const workbook::Context& ctx,
                                                  const std::string& verb, const std::string& impl,
                                                  std::optional<workbook::BuildLock>& lock) {
  const std::string engine = verb + "-" + impl;
  if (impl == "reference" && std::filesystem::exists(ctx.ws.bin(engine))) return ctx.ws.bin(engine);
  lock.emplace(ctx.ws);
  const workbook::BuildResult build = workbook::build_targets(ctx.ws, {engine});
  if (build.ok) return ctx.ws.bin(engine);
  std::cerr << "workbook " << verb << ": " << engine << " does not build: " << build.first_error
            << "\nfull build output: " << ctx.ws.relative(build.log) << '\n';
  return std::nullopt;
}

// A crash of the learner's engine is their code's (4); of the reference's, the tools' (3).
// --impl of a verb that runs a lab's code: the reference solutions/ or the learner's src/.
void add_impl_option(CLI::App& command, std::string& impl, const std::string& help) {
  command.add_option("--impl", impl, help)
      ->check(CLI::IsMember({"reference", "learner"}))
      ->capture_default_str();
}

int crash_status(const std::string& impl) {
  return impl == "learner" ? workbook::kCrashed : kEnvironment;
}

// An engine's own exit status (0, 1 for a TODO stub, 2 for bad input), except a sanitizer's stop.
int engine_status(const std::string& impl, const workbench::ProcessStatus& status) {
  if (status.code != workbook::kSanitizerExit) return status.code;
  std::cerr << "a sanitizer stopped the " << impl << " implementation (its report is above)\n";
  return crash_status(impl);
}

// Every child the verbs start dies with this command (Ctrl-C, SIGTERM, a closed terminal), and a
// sanitizer that stops one exits kSanitizerExit, not 1, which means a TODO stub. A learner's own
// *SAN_OPTIONS come after, so that theirs win.
void prepare_children() {
  workbench::kill_children_on_signals();
  const std::string exit_code = "exitcode=" + std::to_string(workbook::kSanitizerExit);
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    const char* own = std::getenv(name);
    setenv(name, (own && *own ? exit_code + ":" + own : exit_code).c_str(), 1);
  }
}

// attend and generate: build `verb`-<impl> in the build folder, then run it with `args` (the
// options the engine and this command share). `after_crash` ends the crash line: what it means.
int run_engine(const workbook::Context& ctx, const std::string& verb, const std::string& impl,
               const std::vector<std::string>& args, const std::string& after_crash = "") {
  std::optional<workbook::BuildLock> lock;
  const auto engine = built_engine(ctx, verb, impl, lock);
  if (!engine) return workbook::kNotDone;
  const workbench::ProcessStatus status = workbench::run_process(*engine, args);
  if (!status.exited) {
    std::cerr << "workbook " << verb << ": the " << impl << " implementation crashed with "
              << status.describe() << after_crash << '\n';
    return crash_status(impl);
  }
  return engine_status(impl, status);
}

// The repository (compiled in, or --repo) and the build folder (the parent of this program's bin/,
// or --build-dir), with the labs of the repository's registry, labs/labs.json.
workbook::Context make_context(const std::string& repo, const std::string& build) {
  workbook::Context ctx;
  ctx.ws.repo =
      repo.empty() ? workbench::source_dir() : std::filesystem::absolute(repo).lexically_normal();
  ctx.ws.build = build.empty() ? workbench::executable_dir().parent_path()
                               : std::filesystem::absolute(build).lexically_normal();
  const char* term = std::getenv("TERM");
  ctx.terminal =
      isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") && !(term && std::string(term) == "dumb");
  ctx.labs = workbook::load_registry(ctx.ws.repo);
  // In a sanitizer build, the leaks that are known and not the learner's (fontconfig's caches,
  // OpenMPI's tables) are suppressed, as the debug test preset does; a learner's own
  // LSAN_OPTIONS suppressions win.
  const std::filesystem::path suppressions = ctx.ws.repo / "tests" / "lsan-suppressions.txt";
  const char* lsan = std::getenv("LSAN_OPTIONS");
  if (std::filesystem::exists(suppressions) &&
      std::string(lsan ? lsan : "").find("suppressions=") == std::string::npos)
    setenv(
        "LSAN_OPTIONS",
        ((lsan && *lsan ? std::string(lsan) + ":" : "") + "suppressions=" + suppressions.string())
            .c_str(),
        1);
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "workbook: the minimodel lab workbook's command.\n"
      "With no verb: the current lab (the first started and not done, else the first not done),\n"
      "its status and the one command to run next, at once: from\n"
      "each lab's last test run while its files are unchanged since, and from the stubs as handed\n"
      "out; only a lab with neither is built and tested. Status comes from running your tests\n"
      "(bin/test-labNN-learner), so it travels with your code.\n"
      "Exit status: 0 success; 1 a check or test failed, or the lab is not done; 2 bad usage (an\n"
      "unknown lab or option, a missing confirmation); 3 a broken environment (no cmake, ctest or\n"
      "git on PATH, an unconfigured build folder, an unreadable labs/labs.json); 4 your code\n"
      "crashed, was stopped by a sanitizer, or ran past its time limit (tests 2 min, verify and\n"
      "diff 10 min, bench 30 min; WORKBOOK_TIME_LIMIT=seconds overrides them).\n"
      "One command at a time builds in a build folder: a second one waits for the first\n"
      "(BUILD/workbook.lock). Ctrl-C stops every program a command started."};
  app.require_subcommand(0, 1);
  std::string repo, build;
  app.add_option("--repo", repo, "The repository (default: the one this program was built from)");
  app.add_option("--build-dir", build,
                 "The build folder (default: the parent of this program's bin/)");
  // One line a learner can act on, not CLI11's two.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "workbook: " + std::string(e.what()) + " (see workbook --help)\n";
  });

  std::string impl = "reference";
  workbench::AttendOptions options;
  CLI::App* attend_cmd = app.add_subcommand(
      "attend",
      "Run multi-head attention on .npy files: Y = MHA(X) with the given weights. With "
      "--impl learner it builds attend-learner first, so it runs your latest code.\n"
      "Exit status: 0 done; 1 the learner implementation reached a TODO stub or does not "
      "compile; 2 bad input, in which case nothing is written; 3 the reference crashed; 4 the "
      "learner implementation crashed or a sanitizer stopped it.");
  add_impl_option(*attend_cmd, impl,
                  "Which implementation runs: the reference solutions/ or your src/");
  workbench::add_attend_options(*attend_cmd, options);

  std::string generate_impl = "reference";
  workbench::GenerateOptions generate_options;
  CLI::App* generate_cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a trained model of lab 10 (a checkpoint folder): greedy decoding, "
      "each next token the argmax of the logits, one token at a time through lab 08's KV cache "
      "inside lab 04's pre-LN block. Prints the prompt and the continuation. With "
      "--impl learner it builds generate-learner first, so it runs your latest code.\n"
      "With a checkpoint of lab 13's GPT (`workbook verify 13` writes one), --prompt is text: "
      "encoded with the checkpoint's tokenizer, continued by sampling (--temperature, --top-k, "
      "--top-p, --seed) through the KV cache, and printed as it is produced (generate-gpt-<impl>, "
      "labs 12 and 13).\n"
      "Exit status: 0 done; 1 the learner implementation reached a TODO stub or does not "
      "compile; 2 bad input (a "
      "missing or invalid checkpoint, a token outside the vocabulary, a prompt that fills "
      "max_len); 3 the reference crashed; 4 the learner implementation crashed or a sanitizer "
      "stopped it.");
  add_impl_option(
      *generate_cmd, generate_impl,
      "Which implementation runs, the reference solutions/ or your src/: labs 04 and 08 "
      "for lab 10's checkpoints, labs 12 and 13 for lab 13's");
  workbench::add_generate_options(*generate_cmd, generate_options);

  std::string evaluate_impl = "reference";
  workbench::EvaluateOptions evaluate_options;
  CLI::App* evaluate_cmd = app.add_subcommand(
      "evaluate",
      "The validation loss of a checkpoint of lab 13's GPT (`workbook verify 13` writes one): "
      "lab 13's evaluate on the held-out books (those of `workbook corpus`'s kjv-validation.txt) "
      "encoded with the checkpoint's own tokenizer, in nats per token and bits per byte. With "
      "--ablate 3.2,0.2 the heads named are switched off, their rows of attn.w_o zeroed in memory "
      "(the checkpoint on disk is never written), and the loss is printed beside the unablated one "
      "with the difference: what the heads were worth. With --impl learner it builds "
      "evaluate-gpt-learner first, so it runs your latest code.\n"
      "Exit status: 0 done; 1 the learner implementation reached a TODO stub or does not "
      "compile; 2 bad input (a missing or invalid checkpoint, lab 10's checkpoint, a head or "
      "layer out of range); 3 the reference crashed; 4 the learner implementation crashed or a "
      "sanitizer stopped it.");
  add_impl_option(
      *evaluate_cmd, evaluate_impl,
      "Which implementation of labs 12 and 13 runs: the reference solutions/ or your src/");
  workbench::add_evaluate_options(*evaluate_cmd, evaluate_options);

  std::string tokenize_impl = "reference";
  workbench::TokenizeOptions tokenize_options;
  CLI::App* tokenize_cmd = app.add_subcommand(
      "tokenize",
      "Lab 12's byte-level BPE on your files: `train --input FILE --vocab-size N [--special "
      "TOKEN]... --out DIR` writes vocab.json and merges.txt in GPT-2's formats; `encode "
      "--tokenizer DIR` reads text on stdin and prints token ids; `decode --tokenizer DIR` the "
      "reverse. With --impl learner it builds tokenize-learner first, so it runs your latest "
      "code.\n"
      "Exit status: 0 done; 1 the learner implementation reached a TODO stub or does not compile; "
      "2 bad input; 3 the reference crashed; 4 the learner implementation crashed.");
  add_impl_option(*tokenize_cmd, tokenize_impl,
                  "Which implementation of lab 12 runs: the reference solutions/ or your src/");
  const workbench::TokenizeCommands tokenize_commands =
      workbench::add_tokenize_commands(*tokenize_cmd, tokenize_options);
  for (CLI::App* sub :
       {tokenize_commands.train, tokenize_commands.encode, tokenize_commands.decode})
    sub->fallthrough();  // --impl may come after train, encode or decode too

  CLI::App* list_cmd = app.add_subcommand(
      "list",
      "Every lab with its status (done, in progress, todo, build error, or "
      "locked: an earlier lab is not done; advice only) and how many labs are "
      "done, as a progress bar on a terminal. Builds every lab's tests once and "
      "runs them; a lab that does not compile leaves the others' status intact.");

  std::string lab;
  CLI::App* check_cmd =
      app.add_subcommand("check",
                         "Rebuild your code and run lab NN's tests (default: the first lab not "
                         "done). Prints each failing "
                         "check, expected vs got, and the block of the lab text to revisit.");
  check_cmd->add_option("NN", lab, "Lab number, e.g. 00");
  workbook::CheckOnly check_only;
  check_cmd->add_option("--block", check_only.block, "Run only this block's tests, e.g. B");
  check_cmd
      ->add_option("--test", check_only.test,
                   "Run only the tests whose name contains this, e.g. SplitHeads")
      ->excludes("--block");

  CLI::App* verify_cmd = app.add_subcommand(
      "verify",
      "Run lab NN's verify program; it prints its checks and where each artifact was written.");
  verify_cmd->add_option("NN", lab, "Lab number")->required();
  std::string verify_impl = "learner";
  add_impl_option(*verify_cmd, verify_impl,
                  "Whose code runs: yours (src/) or the reference (solutions/)");

  CLI::App* diff_cmd = app.add_subcommand(
      "diff",
      "Run your code and the reference on the same inputs of lab NN (its verify program) and print "
      "each "
      "output's shape, max abs diff and whether it is within the tolerance of the lab's tests.");
  diff_cmd->add_option("NN", lab, "Lab number")->required();

  bool restart = false;
  CLI::App* hint_cmd = app.add_subcommand(
      "hint",
      "The next of lab NN's hints (the \"### Hint N (Block X)\" of its text) for the block that "
      "failed first in your last run of its tests; call again for the next one. What was shown "
      "lives in BUILD/workbook-state.json.");
  hint_cmd->add_option("NN", lab, "Lab number")->required();
  hint_cmd->add_flag("--restart", restart, "Start again from hint 1");

  std::string mutant;
  bool no_predict = false;
  CLI::App* break_cmd = app.add_subcommand(
      "break",
      "Break lab NN on purpose: with no NAME, list its mutants (realistic bugs, each the reference "
      "with one change, from labs/mutants/). With NAME, say first which tests will fail and "
      "whether the verify program will notice (a [FAIL] check, or stopping with an error); then "
      "the reference with that bug is built in BUILD/mutants/, its tests and verify program run "
      "(a training's progress shows as it goes), and what failed is shown beside your "
      "prediction. Your files are never touched; predictions live in BUILD/workbook-state.json.");
  break_cmd->add_option("NN", lab, "Lab number")->required();
  break_cmd->add_option("NAME", mutant, "A mutant of the lab (see `workbook break NN`)");
  break_cmd->add_flag("--no-predict", no_predict, "Do not ask for a prediction (for scripts)");

  bool force = false;
  CLI::App* solution_cmd = app.add_subcommand(
      "solution", "Show lab NN's reference write-up and code, once your tests of that lab pass.");
  solution_cmd->add_option("NN", lab, "Lab number")->required();
  solution_cmd->add_flag("--force", force, "Show it even though your tests do not pass yet");

  bool yes = false;
  CLI::App* reset_cmd =
      app.add_subcommand("reset",
                         "Restore lab NN's stubs in your files, as committed upstream (git show "
                         "origin/HEAD:<file>, or "
                         "HEAD:<file> without an origin). Your version is first saved under "
                         ".workbook-backups/<UTC time>/, whose path is printed.");
  reset_cmd->add_option("NN", lab, "Lab number")->required();
  reset_cmd->add_flag("--yes", yes,
                      "Do not ask for confirmation (required when there is no terminal)");

  bool poll = false;
  CLI::App* watch_cmd = app.add_subcommand("watch",
                                           "Re-check the current lab each time one of your files "
                                           "is saved, until Ctrl-C (inotify; polling "
                                           "where inotify is missing).");
  watch_cmd->add_flag("--poll", poll,
                      "Poll modification times every second instead of using inotify");

  bool json = false;
  CLI::App* grade_cmd = app.add_subcommand("grade",
                                           "Each lab's passed/total tests and a score: what an "
                                           "autograder reads (--json). Always exits 0.");
  grade_cmd->add_flag(
      "--json", json,
      "One JSON document, in every case: {labs: [{lab, title, passed, total, status}], passed, "
      "total, score[, error]}");

  std::string corpus_out;
  CLI::App* corpus_cmd = app.add_subcommand(
      "corpus",
      "Lab 12's corpus: the King James Bible of Debian's bible-kjv package, one verse a line, each "
      "book followed by a line <|endoftext|>, split by book into kjv-train.txt and "
      "kjv-validation.txt (Ruth, Esther, Proverbs, Lamentations, Daniel, Mark, Romans, "
      "Revelation). Both files or neither are written.");
  corpus_cmd->add_option("--out", corpus_out, "The folder to write into (default: BUILD/corpus)");

  std::string explore_impl;  // default: reference for --checkpoint, learner for a lab's run
  workbench::ExploreOptions explore_options;
  bool serve = false;
  int port = 8000;
  CLI::App* explore_cmd = app.add_subcommand(
      "explore",
      "The attention explorer: one self-contained HTML page (no network) showing every head of a "
      "model on a text: the tokens, a layer x head grid of heatmaps, BertViz's head view from a "
      "pointed token (or to it), each head's previous-token, induction and first-token scores, "
      "and the model's top 5 next tokens. `explore --checkpoint DIR --tokens \"3 17 4 9\"` runs "
      "lab 10's checkpoint, `--text \"...\"` lab 13's (building explore-<impl> or "
      "explore-gpt-<impl> "
      "first, as generate does); `explore NN` shows "
      "lab NN's last verify run (of every lab whose verify program computes attention). Prints the "
      "page's "
      "path; --serve also serves it on 127.0.0.1 until Ctrl-C.\n"
      "Exit status: 0 done; 1 no verify run to show, a TODO stub, or code that does not "
      "compile; 2 bad input (a missing or broken checkpoint, empty or invalid text), nothing "
      "written then; 3 the port is in use or the reference crashed; 4 the learner "
      "implementation crashed.");
  explore_cmd->add_option("NN", lab, "A lab whose last verify run to show, e.g. 10");
  explore_cmd
      ->add_option("--impl", explore_impl,
                   "Whose code: the reference solutions/ or your src/ (default: reference with "
                   "--checkpoint, learner for a lab's run, as verify)")
      ->check(CLI::IsMember({"reference", "learner"}));
  workbench::add_explore_options(*explore_cmd, explore_options, false);
  explore_cmd->get_option("--checkpoint")->excludes("NN");
  explore_cmd->add_flag("--serve", serve,
                        "Serve the page at http://127.0.0.1:PORT/ until Ctrl-C (cpp-httplib)");
  explore_cmd->add_option("--port", port, "The port --serve listens on; 0: any free one, printed")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();

  workbook::BenchOptions bench_options;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench",
      "Time lab 01's attention layer and lab 07's efficient one (and the reference's tuned twin "
      "of it, lab07_tuned: workbench/fast_attention) on a suite of shapes (T, d_model, "
      "H) from (128, 512, 8) to "
      "(4096, 512, 8), causal and not, and print median ms, GF/s and the peak heap bytes a call "
      "allocates. Builds bench-reference and bench-learner first; a layer your code does not "
      "implement yet is listed as not run. Takes minutes; exits 1 if the reference did not run.");
  bench_cmd->add_option("--impl", bench_options.impl, "Whose layers are timed")
      ->check(CLI::IsMember({"reference", "learner", "both"}))
      ->capture_default_str();
  bench_cmd
      ->add_option("--threads", bench_options.threads, "OpenBLAS threads (default: one per core)")
      ->check(CLI::Range(1, 1024));
  bench_cmd
      ->add_option("--repetitions", bench_options.repetitions,
                   "Runs per benchmark; their median is reported (with 1: that run)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  bench_cmd->add_flag("--quick", bench_options.quick,
                      "Two tiny shapes only (a smoke test, not a measurement)");
  bench_cmd->add_flag("--json", bench_options.json,
                      "One JSON document: {machine, results: [{layer, implementation, T, d_model, "
                      "n_heads, causal, median_ms, median_cpu_ms, gflops_per_s, peak_extra_bytes | "
                      "error}]}");

  workbook::DevCheckOptions dev_check_options;
  CLI::App* dev_check_cmd = app.add_subcommand(
      "dev-check",
      "Maintainers (run by .ci/run on a pristine checkout): check the files against the lab "
      "registry labs/labs.json (each lab's text, stubs, reference, tests, verify program, "
      "write-ups "
      "and README lab map, named one per line), then build every lab and fail if a pristine stub "
      "passes "
      "or crashes, a reference test fails or a verify artifact is missing or invalid; last, build "
      "every mutant of labs/mutants/ and fail if no test catches one.");
  dev_check_cmd->add_option("--lab", dev_check_options.only_labs,
                            "Build and run the tests of these labs only (default: all)");
  dev_check_cmd->add_flag("--files-only", dev_check_options.files_only,
                          "Check the registry against the files only: no build, no tests");
  dev_check_cmd->add_flag("--tests-just-ran", dev_check_options.tests_just_ran,
                          "The stubs and reference tests have just passed in this build folder "
                          "(`ctest --preset test`, as .ci/run runs it): do not run them again");
  dev_check_cmd->add_flag("--write-lab-map", dev_check_options.write_lab_map,
                          "First write README.md's lab map from labs/labs.json");
  dev_check_cmd->add_flag("--skip-mutants", dev_check_options.skip_mutants,
                          "Check the catalogues of labs/mutants/ but do not build and run the "
                          "mutants (97 compiles: 3.5 minutes on 2 cores)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kUsage;
  }
  prepare_children();
  try {
    const workbook::Context ctx = make_context(repo, build);
    // evaluate, as attend and generate, holds the build folder only while its engine builds.
    if (*evaluate_cmd)
      return run_engine(ctx, "evaluate-gpt", evaluate_impl,
                        workbench::evaluate_arguments(evaluate_options));
    // The verbs that build in the build folder and run what they built hold it throughout; watch
    // for each of its checks, attend and generate only when they build. dev-check does not: the
    // ctest it runs starts workbook commands on the same build folder.
    std::optional<workbook::BuildLock> lock;
    if (!*attend_cmd && !*generate_cmd && !*watch_cmd && !*hint_cmd && !*reset_cmd &&
        !*dev_check_cmd && !*corpus_cmd && !*tokenize_cmd && !*explore_cmd)
      lock.emplace(ctx.ws);
    if (*attend_cmd)
      return run_engine(ctx, "attend", impl, workbench::attend_arguments(options),
                        "; nothing was written");
    if (*generate_cmd)  // lab 13's GPT engine for its checkpoints, lab 10's for anything else
      return run_engine(ctx,
                        workbench::names_gpt_checkpoint(generate_options.checkpoint)
                            ? "generate-gpt"
                            : "generate",
                        generate_impl, workbench::generate_arguments(generate_options));
    if (*tokenize_cmd)
      return run_engine(ctx, "tokenize", tokenize_impl,
                        workbench::tokenize_arguments(tokenize_commands, tokenize_options));
    if (*explore_cmd) {
      std::filesystem::path page = explore_options.out;
      int status = workbook::kUsage;
      if (!lab.empty()) {
        if (!explore_options.out.empty() || explore_options.has_text ||
            explore_options.has_text_file || explore_options.has_tokens)
          throw workbook::UsageError(
              "explore NN shows lab NN's verify run: --text, --text-file, --tokens and --out go "
              "with --checkpoint");
        status =
            workbook::explore_lab(ctx, lab, explore_impl.empty() ? "learner" : explore_impl, page);
      } else if (!explore_options.checkpoint.empty()) {
        const std::string engine_impl = explore_impl.empty() ? "reference" : explore_impl;
        // lab 13's GPT engine for its checkpoints, lab 10's for anything else (as generate)
        const bool gpt = workbench::names_gpt_checkpoint(explore_options.checkpoint);
        if (page.empty()) page = workbook::default_explore_page(explore_options.checkpoint);
        explore_options.out = page;
        status = run_engine(ctx, gpt ? "explore-gpt" : "explore", engine_impl,
                            workbench::explore_arguments(explore_options), "; nothing was written");
      } else {
        throw workbook::UsageError(
            "explore needs a lab (`workbook explore 10`) or a checkpoint (`workbook explore "
            "--checkpoint DIR --tokens \"3 17 4 9\"`)");
      }
      return status == 0 && serve ? workbook::serve_page(page, port) : status;
    }
    const std::optional<std::string> lab_arg =
        lab.empty() ? std::nullopt : std::optional<std::string>(lab);
    if (*list_cmd) return workbook::list_labs(ctx);
    if (*check_cmd) return workbook::check_lab(ctx, lab_arg, check_only);
    if (*verify_cmd) return workbook::verify_lab(ctx, lab, verify_impl);
    if (*diff_cmd) return workbook::diff_lab(ctx, lab);
    if (*hint_cmd) return workbook::show_hint(ctx, lab, restart);
    if (*break_cmd) return workbook::break_lab(ctx, lab, mutant, !no_predict);
    if (*solution_cmd) return workbook::show_solution(ctx, lab, force);
    if (*reset_cmd) return workbook::reset_lab(ctx, lab, yes);
    if (*watch_cmd) return workbook::watch(ctx, poll);
    if (*grade_cmd) return workbook::grade(ctx, json);
    if (*bench_cmd) return workbook::bench(ctx, bench_options);
    if (*corpus_cmd) return workbook::write_corpus(ctx, corpus_out);
    if (*dev_check_cmd) {
      for (std::string& number : dev_check_options.only_labs)
        number = ctx.require_lab(number).number;
      return workbook::dev_check(ctx, dev_check_options);
    }
    return workbook::show_current(ctx);
  } catch (const workbook::UsageError& e) {
    std::cerr << "workbook: " << e.what() << '\n';
    return kUsage;
  } catch (const std::exception& e) {  // EnvironmentError, and what the environment throws
    std::cerr << "workbook: " << e.what() << '\n';
    return kEnvironment;
  }
}
