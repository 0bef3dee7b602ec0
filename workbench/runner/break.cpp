// `workbook break NN [NAME] [--no-predict]`: predict, then see. With no NAME, lab NN's mutants:
// realistic bugs, each the reference with one change (labs/mutants/NN-slug.json). With one, the
// learner first says which tests will fail and whether the verify program will notice; then the
// mutated reference is built in the build folder's scratch area (BUILD/mutants/labNN/NAME/, which
// cmake/labs.cmake writes), its tests and verify program run, and what failed is shown beside the
// prediction. The learner's files and the reference are never touched. Predictions and outcomes
// are kept with the verbs' state (update_state):
//   {"break": {"01": {"NAME": {"predicted": […], "verify_predicted": true, "failed": […], …}}}}
#include <algorithm>
#include <cctype>
#include <functional>
#include <iostream>
#include <regex>
#include <set>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// One line read from the learner; nullopt at the end of the input.
std::optional<std::string> ask(const std::string& question) {
  std::cout << question << "\n> " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return std::nullopt;
  return workbench::trim(answer);
}

struct Prediction {
  std::string text;
  std::set<std::string> tests;
  std::optional<bool> verify_notices;
};

Prediction ask_prediction(const Lab& lab) {
  std::string sizes;
  for (const Block& block : lab.blocks)
    sizes += (sizes.empty() ? "" : ", ") + ("Block " + block.id + ": ") +
             std::to_string(block.tests.size());
  std::cout << "Predict before you run. Lab " << lab.number << " has " << lab.test_names().size()
            << " tests (" << sizes << "); " << lab.tests << " has their names.\n";
  const std::string none = "no prediction read; answer the questions, or pass --no-predict";
  Prediction prediction;
  for (;;) {
    const auto text =
        ask("Which tests fail? Test or suite names or parts of them (SplitHeads, MatchesTorch), "
            "\"Block B\", \"all\" or \"none\":");
    if (!text) throw UsageError(none);
    prediction.text = *text;
    prediction.tests = predicted_tests(lab, *text);
    if (lower(*text) == "none" || !prediction.tests.empty()) break;
    std::cout << "that names no test of lab " << lab.number << "; try again\n";
  }
  for (;;) {
    const auto answer =
        ask("Does the verify program notice: a [FAIL] check, or stopping with an "
            "error? y or n:");
    if (!answer) throw UsageError(none);
    if (!answer->empty() && (lower(*answer)[0] == 'y' || lower(*answer)[0] == 'n')) {
      prediction.verify_notices = lower(*answer)[0] == 'y';
      break;
    }
  }
  return prediction;
}

struct VerifyOutcome {
  bool ran = false;  ///< exited (0 or 1) rather than crashed or failed to start
  std::vector<std::string> failed_checks;  ///< its "[FAIL] …" lines
  std::string problem;                     ///< how it ended, if not with its checks
};

// Runs the mutant's verify program, showing its progress lines (lab 10's training: "step 80/1500
// (5%) …", from verify_frame/step_progress.hpp) as they come, in place on a terminal.
VerifyOutcome run_verify(const Context& ctx, const Lab& lab, const std::string& target,
                         const fs::path& out) {
  static const std::regex progress_line(R"(^step \d+/\d+ )");
  std::cout << "running its verify program…\n" << std::flush;
  bool shown = false;
  workbench::CaptureOptions options;
  options.time_limit = time_limit(kVerifyTimeLimit);
  options.on_line = [&](const std::string& line) {
    if (!workbench::scannable(line) || !std::regex_search(line, progress_line)) return;
    std::cout << (ctx.terminal ? "\r\033[K  " : "  ") << line << (ctx.terminal ? "" : "\n")
              << std::flush;
    shown = true;
  };
  const auto [program, args] = lab.command(ctx.ws.bin(target).string(), {"--out", out.string()});
  const workbench::CapturedRun run = workbench::run_captured(program, args, options);
  if (shown && ctx.terminal) std::cout << "\r\033[K" << std::flush;
  VerifyOutcome outcome;
  for (const std::string& line : workbench::split_lines(run.output))
    if (workbench::trim(line).rfind("[FAIL]", 0) == 0)
      outcome.failed_checks.push_back(workbench::trim(line));
  outcome.ran = run.status.exited && (run.status.code == 0 || run.status.code == 1);
  if (!outcome.ran) {
    const auto lines = workbench::split_lines(workbench::trim(run.output));
    outcome.problem = run.status.describe() + (lines.empty() ? "" : ": " + lines.back());
  }
  return outcome;
}

int list_mutants(const Context& ctx, const Lab& lab, const std::vector<Mutant>& mutants) {
  if (mutants.empty()) {
    std::cout << "lab " << lab.number << " has no mutants yet (" << lab.mutants << ")\n";
    return kSuccess;
  }
  const nlohmann::json tried = load_state(ctx.ws)["break"][lab.number];
  std::cout << ctx.bold(heading(lab)) << ": " << mutants.size()
            << " mutants, each the reference with one bug\n";
  std::size_t width = 0;
  for (const Mutant& mutant : mutants) width = std::max(width, mutant.name.size());
  for (const Mutant& mutant : mutants) {
    std::cout << "  Block " << mutant.block << "  " << pad(mutant.name, width + 2) << mutant.bug;
    if (!mutant.equivalent.empty()) std::cout << ctx.yellow("  (no test can see it: why?)");
    if (tried.is_object() && tried.contains(mutant.name)) std::cout << ctx.green("  (tried)");
    std::cout << '\n';
  }
  std::cout << "next: workbook break " << lab.number << " " << mutants.front().name
            << "   (predict, then see)\n";
  return kSuccess;
}

}  // namespace

std::set<std::string> predicted_tests(const Lab& lab, const std::string& prediction) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : prediction + " ") {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ';') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else if (c != '*' && c != '`') {
      word += c;
    }
  }
  std::set<std::string> tests;
  const std::vector<std::string> every = lab.test_names();
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string w = lower(words[i]);
    if (w == "all") tests.insert(every.begin(), every.end());
    if (w == "block" && i + 1 < words.size()) {
      for (const Block& block : lab.blocks)
        if (lower(block.id) == lower(words[i + 1]))
          tests.insert(block.tests.begin(), block.tests.end());
      ++i;  // the block's letter ("A") is no part of a test name
      continue;
    }
    if (!std::isupper(static_cast<unsigned char>(words[i][0]))) continue;
    for (const std::string& test : every)
      if (test.find(words[i]) != std::string::npos) tests.insert(test);
  }
  return tests;
}

int break_lab(const Context& ctx, const std::string& number, const std::string& name,
              bool predict) {
  const Lab& lab = ctx.require_lab(number);
  const std::vector<Mutant> mutants = load_mutants(ctx.ws.repo, lab);
  if (name.empty()) return list_mutants(ctx, lab, mutants);
  const auto it =
      std::find_if(mutants.begin(), mutants.end(), [&](const Mutant& m) { return m.name == name; });
  if (it == mutants.end()) {
    std::string names;
    for (const Mutant& mutant : mutants) names += (names.empty() ? "" : ", ") + mutant.name;
    throw UsageError("lab " + lab.number + " has no mutant " + name + "; its mutants are " +
                     (names.empty() ? "none yet" : names));
  }
  const Mutant& mutant = *it;
  std::cout << ctx.bold("mutant " + mutant.name) << " (lab " << lab.number << ", Block "
            << mutant.block << "): " << mutant.bug << "\n\n";

  Prediction prediction;
  if (predict) prediction = ask_prediction(lab);
  // This mutant's record, and only it, in the state as it is at each write: other verbs (a hint
  // shown while this one builds) write the state too.
  const auto update_record = [&](const std::function<void(nlohmann::json&)>& change) {
    update_state(ctx.ws,
                 [&](nlohmann::json& state) { change(state["break"][lab.number][mutant.name]); });
  };
  if (predict)  // the prediction is kept even if the build fails
    update_record([&](nlohmann::json& record) {
      record = {{"prediction", prediction.text},
                {"predicted", prediction.tests},
                {"verify_predicted", *prediction.verify_notices}};
    });

  const std::string tests = lab.mutant_target("test", mutant),
                    verify = lab.mutant_target("verify", mutant);
  const fs::path scratch = ctx.ws.build / "mutants" / ("lab" + lab.number) / mutant.name;
  std::cout << "\nbuilding the reference with this one bug (" << ctx.ws.relative(scratch) << "/)…\n"
            << std::flush;
  const BuildResult build = build_targets(ctx.ws, {tests, verify});
  if (!build.ok) {
    print_build_error(ctx, build);
    std::cout << "(a mutant that does not build is a defect of " << lab.mutants
              << ": `workbook dev-check` names it)\n";
    return kEnvironment;
  }
  std::cout << "running its tests…\n" << std::flush;
  const LabResult result = run_built_tests(ctx.ws, lab, tests);
  const fs::path artifacts = scratch / "experiment";
  const VerifyOutcome checks = run_verify(ctx, lab, verify, artifacts);

  // A lab with a test the learner writes (lab 01's): theirs, alone, on the same mutant.
  std::optional<LabResult> yours;
  std::optional<BuildResult> yours_unbuilt;
  if (std::any_of(lab.learner_files.begin(), lab.learner_files.end(), is_learner_test)) {
    const std::string program = tests + "-yours";
    if (BuildResult built = build_targets(ctx.ws, {program}); built.ok)
      yours = run_built_tests(ctx.ws, lab, program);
    else
      yours_unbuilt = std::move(built);
  }

  const std::size_t n_failed = result.failures.size();
  std::cout << '\n'
            << ctx.bold("the tests: " + std::to_string(n_failed) + " of " +
                        std::to_string(result.total) + " fail")
            << '\n';
  if (!result.problem.empty()) std::cout << "  " << ctx.red(result.problem) << '\n';
  std::set<std::string> failed;
  for (const TestFailure& failure : result.failures) {
    failed.insert(failure.test);
    const bool foreseen = prediction.tests.count(failure.test) > 0;
    std::cout << "  "
              << (predict ? (foreseen ? ctx.green("predicted  ") : ctx.yellow("surprise   ")) : "")
              << failure.test << "\n      " << failure.summary << '\n';
  }
  std::vector<std::string> passed_anyway;
  for (const std::string& test : prediction.tests)
    if (!failed.count(test)) passed_anyway.push_back(test);
  if (predict && !passed_anyway.empty()) {
    std::cout << ctx.yellow("  predicted to fail, but passed:") << '\n';
    for (const std::string& test : passed_anyway) std::cout << "    " << test << '\n';
  }

  if (yours_unbuilt) {
    std::cout << ctx.bold("your own test: ") << "does not compile\n";
    print_build_error(ctx, *yours_unbuilt);
  }
  if (yours) {
    std::cout << ctx.bold("your own test" + std::string(yours->total == 1 ? "" : "s") + ": ");
    if (yours->failures.empty() && yours->problem.empty())
      std::cout << "pass" << (failed.empty() ? "" : ": they do not catch this bug") << '\n';
    for (const TestFailure& failure : yours->failures)
      std::cout << (todo_in(failure.summary) ? "not written yet (its TODO still fails it)"
                                             : failure.test + " fails: " + failure.summary)
                << '\n';
    if (!yours->problem.empty()) std::cout << yours->problem << '\n';
  }

  // What the question asked: a [FAIL] check, or stopping with an error. The line says which.
  const bool noticed = !checks.failed_checks.empty() || !checks.ran;
  const std::size_t n_checks = checks.failed_checks.size();
  std::cout << ctx.bold("the verify program " +
                        (!checks.ran ? "notices: it stopped with an error (" + checks.problem + ")"
                         : noticed   ? "notices: " + std::to_string(n_checks) +
                                         (n_checks == 1 ? " check fails" : " checks fail")
                                   : std::string("does not notice: every check passes, no error")))
            << (predict ? (noticed == *prediction.verify_notices ? "  (as you predicted)"
                                                                 : "  (you predicted otherwise)")
                        : "")
            << '\n';
  for (const std::string& line : checks.failed_checks) std::cout << "  " << line << '\n';
  if (checks.ran)
    std::cout << "  its printout and figures: " << ctx.ws.relative(artifacts) << "/ (yours stay in "
              << lab.experiment << "/)\n";

  if (predict) {
    std::size_t foreseen = 0;
    for (const std::string& test : failed) foreseen += prediction.tests.count(test);
    std::cout << "\nyou foresaw " << foreseen << " of the " << n_failed << " failures; "
              << passed_anyway.size() << " test" << (passed_anyway.size() == 1 ? "" : "s")
              << " you named passed.\n";
  }
  if (n_failed == 0 && result.problem.empty())
    std::cout << (mutant.equivalent.empty()
                      ? ctx.red("no test catches this bug: a hole in the tests (tell the "
                                "maintainers: `workbook dev-check` should have caught it)")
                      : "no test can catch this one, by construction: " + mutant.equivalent)
              << '\n';
  std::cout << "What surprised you? The write-up asks: " << lab.experiment << "/README.md\n";

  update_record([&](nlohmann::json& record) {
    record["failed"] = std::vector<std::string>(failed.begin(), failed.end());
    record["tests"] = result.total;
    record["verify_noticed"] = noticed;
  });
  return kSuccess;
}

}  // namespace workbook
