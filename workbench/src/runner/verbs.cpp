#include "verbs.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../process.hpp"
#include "workbench/npy_io.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

std::string paint(const Context& ctx, const char* code, const std::string& text) {
  return ctx.terminal ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
}

std::string heading(const Lab& lab) { return "lab " + lab.number + " — " + lab.title; }

std::string status_text(const Context& ctx, LabStatus status) {
  const std::string name = status_name(status);
  switch (status) {
    case LabStatus::done: return green(ctx, name);
    case LabStatus::in_progress: return yellow(ctx, name);
    case LabStatus::todo: return name;
    case LabStatus::build_error: return red(ctx, name);
  }
  return name;
}

// "[#####-----] 1/3 labs done" on a terminal, "1/3 labs done" otherwise.
std::string progress(const Context& ctx, std::size_t done, std::size_t total) {
  std::string text = std::to_string(done) + "/" + std::to_string(total) + " labs done";
  if (!ctx.terminal || total == 0) return text;
  constexpr std::size_t kWidth = 20;
  const std::size_t filled = done * kWidth / total;
  return "[" + green(ctx, std::string(filled, '#')) + std::string(kWidth - filled, '-') + "] " + text;
}

// "not started: Block A of labs/00-….md", one line per (lab, block) whose TODO was reached.
std::vector<std::string> not_started(const Context& ctx, const std::vector<TestFailure>& failures) {
  std::vector<std::string> lines;
  std::set<std::pair<std::string, std::string>> seen;
  for (const TestFailure& f : failures) {
    const auto todo = todo_in(f.message);
    if (!todo || !seen.insert(*todo).second) continue;
    const Lab* lab = find_lab(ctx.labs, todo->first);
    lines.push_back("not started: Block " + todo->second + " of " +
                    (lab ? lab->text() : "lab " + todo->first));
  }
  return lines;
}

void print_build_error(const Context& ctx, const BuildResult& build) {
  std::cout << red(ctx, "the build failed") << ":\n" << build.first_error << '\n'
            << "full build output: " << ctx.ws.relative(build.log) << '\n';
}

std::string next_step(const Lab& lab, const LabResult& result) {
  switch (result.status) {
    case LabStatus::done: return "workbook verify " + lab.number + "   (then the next lab)";
    case LabStatus::todo:
      return "read " + lab.text() + ", edit " + (lab.learner_files.empty() ? "its files" : lab.learner_files[0]) +
             ", then: workbook check " + lab.number;
    case LabStatus::in_progress: return "workbook check " + lab.number + "   (or: workbook hint " + lab.number + ")";
    case LabStatus::build_error: return "fix the error above, then: workbook check " + lab.number;
  }
  return "";
}

// The state that persists between runs (the hint counters), in BUILD/workbook-state.json:
//   {"hints_shown": {"00": 2}}
// It lives in the build tree, never in the learner's sources; deleting it only resets the hints.
fs::path state_path(const Context& ctx) { return ctx.ws.build / "workbook-state.json"; }

nlohmann::json load_state(const Context& ctx) {
  std::ifstream in(state_path(ctx));
  if (!in) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();  // a damaged state only loses hint counters
  }
}

void save_state(const Context& ctx, const nlohmann::json& state) {
  fs::create_directories(ctx.ws.build);
  std::ofstream(state_path(ctx)) << state.dump(2) << '\n';
}

std::string git_show(const Context& ctx, const std::string& ref, const std::string& path) {
  const auto run = workbench::run_captured("git", {"-C", ctx.ws.repo.string(), "show", ref + ":" + path});
  if (!run.status.exited || run.status.code != 0)
    throw EnvironmentError("git show " + ref + ":" + path + " failed: " + run.output);
  return run.output;
}

// origin/HEAD if the repository has an origin (a learner's clone), else HEAD.
std::string pristine_ref(const Context& ctx) {
  const auto run = workbench::run_captured(
      "git", {"-C", ctx.ws.repo.string(), "rev-parse", "--verify", "--quiet", "origin/HEAD"});
  return run.status.exited && run.status.code == 0 ? "origin/HEAD" : "HEAD";
}

std::string utc_stamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::ostringstream out;
  out << std::put_time(&utc, "%Y%m%dT%H%M%SZ");
  return out.str();
}

// As the verify programs print numbers ("1.00e-05"). (workbench/verify_run.cpp has the same, but it
// needs an implementation linked in, and this command links none.)
std::string scientific(double value) {
  std::ostringstream out;
  out << std::setprecision(2) << std::scientific << value;
  return out.str();
}

// max |a - b| over same-shaped arrays; NaN if either holds a NaN.
double max_abs_diff(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(double(a.flat(i)) - double(b.flat(i)));
    if (std::isnan(diff)) return diff;
    worst = std::max(worst, diff);
  }
  return worst;
}

std::string shape_text(const nlohmann::json& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i].get<std::size_t>());
  return text + ")";
}

std::string pad(const std::string& text, std::size_t width) {
  // Count UTF-8 code points, so "—" takes one column.
  std::size_t columns = 0;
  for (const unsigned char c : text) columns += (c & 0xC0) != 0x80;
  return columns >= width ? text + " " : text + std::string(width - columns, ' ');
}

}  // namespace

std::string green(const Context& ctx, const std::string& text) { return paint(ctx, "32", text); }
std::string red(const Context& ctx, const std::string& text) { return paint(ctx, "31", text); }
std::string yellow(const Context& ctx, const std::string& text) { return paint(ctx, "33", text); }
std::string bold(const Context& ctx, const std::string& text) { return paint(ctx, "1", text); }

const Lab& require_lab(const Context& ctx, const std::string& number) {
  const auto normal = normalise_lab_number(number);
  const Lab* lab = normal ? find_lab(ctx.labs, *normal) : nullptr;
  if (!lab) throw UsageError("no lab " + normal.value_or(number) + ": labs are " + lab_range(ctx.labs));
  return *lab;
}

const Lab* current_lab(const Context& ctx, LabResult* result) {
  for (const Lab& lab : ctx.labs) {
    LabResult r = run_learner_tests(ctx.ws, lab);
    if (r.status != LabStatus::done) {
      if (result) *result = std::move(r);
      return &lab;
    }
  }
  return nullptr;
}

int print_check(const Context& ctx, const Lab& lab, const LabResult& result) {
  std::cout << bold(ctx, heading(lab)) << ": ";
  if (result.status == LabStatus::build_error) {
    std::cout << status_text(ctx, result.status) << '\n';
    print_build_error(ctx, result.build);
    std::cout << "next: " << next_step(lab, result) << '\n';
    return 1;
  }
  if (result.status == LabStatus::done) {
    std::cout << green(ctx, "all " + std::to_string(result.total) + " tests pass") << " — done\n";
    std::cout << "next: " << next_step(lab, result) << '\n';
    return 0;
  }
  std::cout << result.passed << " of " << result.total << " tests pass\n";
  if (!result.problem.empty()) std::cout << "  " << red(ctx, result.problem) << '\n';
  for (const std::string& line : not_started(ctx, result.failures)) std::cout << "  " << yellow(ctx, line) << '\n';
  constexpr std::size_t kShown = 6;  // the rest is one `ctest --preset labNN` away
  std::size_t shown = 0, other = 0;
  for (const TestFailure& f : result.failures) {
    if (todo_in(f.message)) continue;
    if (shown == kShown) {
      ++other;
      continue;
    }
    ++shown;
    std::cout << "  " << red(ctx, "FAIL") << ' ' << f.test << '\n' << "       " << f.message << '\n';
    if (const std::string block = lab.block_for(f.test, f.message); !block.empty())
      std::cout << "       revisit Block " << block << " of " << lab.text() << '\n';
  }
  if (other) std::cout << "  … and " << other << " more failing tests (ctest --preset lab" << lab.number << ")\n";
  std::cout << "next: " << next_step(lab, result) << '\n';
  return 1;
}

int show_current(const Context& ctx) {
  LabResult result;
  const Lab* lab = current_lab(ctx, &result);
  if (!lab) {
    std::cout << green(ctx, "every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size() << ")\n"
              << "next: workbook grade --json, or compare with solutions/ (workbook solution NN)\n";
    return 0;
  }
  std::cout << "current lab: " << bold(ctx, heading(*lab)) << " (" << lab->text() << ")\n"
            << "status: " << status_text(ctx, result.status);
  if (result.status != LabStatus::build_error)
    std::cout << ", " << result.passed << " of " << result.total << " tests pass";
  std::cout << '\n';
  if (result.status == LabStatus::build_error) print_build_error(ctx, result.build);
  std::cout << "next: " << next_step(*lab, result) << '\n';
  return 0;
}

// The width of the title column: the longest title, plus a space.
std::size_t title_width(const std::vector<Lab>& labs) {
  std::size_t width = 0;
  for (const Lab& lab : labs) width = std::max(width, lab.title.size());
  return width + 1;
}

int list_labs(const Context& ctx) {
  const std::vector<LabResult> results = run_all(ctx.ws, ctx.labs, false);
  std::size_t done = 0;
  bool blocked = false;  // an earlier lab is not done
  for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
    const Lab& lab = ctx.labs[i];
    const LabResult& r = results[i];
    std::string status = status_text(ctx, r.status);
    std::string width_text = status_name(r.status);
    if (r.status != LabStatus::done && blocked) status = width_text = "locked";
    std::cout << lab.number << "  " << pad(lab.title, title_width(ctx.labs)) << status << std::string(13 - std::min<std::size_t>(12, width_text.size()), ' ');
    if (r.status == LabStatus::build_error) std::cout << "(see workbook check " << lab.number << ")";
    else std::cout << r.passed << "/" << r.total << " tests";
    std::cout << '\n';
    done += r.status == LabStatus::done;
    blocked = blocked || r.status != LabStatus::done;
  }
  std::cout << progress(ctx, done, ctx.labs.size()) << '\n';
  if (done < ctx.labs.size())
    std::cout << "locked is advice only: every verb works on every lab\n";
  return done == ctx.labs.size() ? 0 : 1;
}

int check_lab(const Context& ctx, const std::optional<std::string>& number) {
  if (number) {
    const Lab& lab = require_lab(ctx, *number);
    return print_check(ctx, lab, run_learner_tests(ctx.ws, lab));
  }
  LabResult result;
  const Lab* lab = current_lab(ctx, &result);
  if (!lab) {
    std::cout << green(ctx, "every lab is done") << " (" << ctx.labs.size() << "/" << ctx.labs.size() << ")\n";
    return 0;
  }
  return print_check(ctx, *lab, result);
}

int verify_lab(const Context& ctx, const std::string& number, const std::string& impl) {
  const Lab& lab = require_lab(ctx, number);
  const std::string target = "verify-lab" + lab.number + "-" + impl;
  const BuildResult build = build_targets(ctx.ws, {target});
  if (!build.ok) {
    print_build_error(ctx, build);
    return 1;
  }
  // The verify program prints its checks and a "wrote <path>" line per artifact.
  const workbench::ProcessStatus status = workbench::run_process(ctx.ws.build / "bin" / target, {});
  if (!status.exited) {
    std::cout << red(ctx, target + " crashed with " + status.describe()) << '\n';
    return 1;
  }
  if (status.code == 1 && impl == "learner")
    std::cout << "next: finish the block named above (" << lab.text() << "), then: workbook verify " << lab.number
              << '\n';
  return status.code;
}

int diff_lab(const Context& ctx, const std::string& number) {
  const Lab& lab = require_lab(ctx, number);
  const std::string learner = "verify-lab" + lab.number + "-learner", reference = "verify-lab" + lab.number + "-reference";
  const BuildResult build = build_targets(ctx.ws, {learner, reference});
  if (!build.ok) {
    print_build_error(ctx, build);
    return 1;
  }
  const fs::path work = ctx.ws.build / "workbook" / ("diff-lab" + lab.number);
  fs::remove_all(work);
  auto run = [&](const std::string& program, const std::string& impl) {
    return workbench::run_captured((ctx.ws.build / "bin" / program).string(),
                                   {"--out", (work / impl / "out").string(), "--dump", (work / impl / "dump").string()});
  };
  const workbench::CapturedRun ref_run = run(reference, "reference");
  const workbench::CapturedRun learner_run = run(learner, "learner");
  auto outputs = [&](const std::string& impl) {
    std::ifstream in(work / impl / "dump" / "outputs.json");
    return in ? nlohmann::ordered_json::parse(in) : nlohmann::ordered_json::object();
  };
  const nlohmann::ordered_json ref_outputs = outputs("reference"), learner_outputs = outputs("learner");
  if (!ref_run.status.exited || ref_run.status.code != 0 || ref_outputs.empty())
    throw EnvironmentError(reference + " failed (" + ref_run.status.describe() + ") or recorded no outputs; " +
                           "does verify/lab" + lab.number + "_verify.cpp call run.record(…)?\n" + ref_run.output);

  std::cout << bold(ctx, heading(lab)) << ": your outputs vs the reference's, on the verify program's inputs\n";
  std::cout << pad("output", 20) << pad("shape", 18) << pad("max abs diff", 14) << pad("tolerance", 11) << "within?\n";
  std::size_t within = 0;
  for (const auto& [name, info] : ref_outputs.items()) {
    const double tolerance = info.at("tolerance").get<double>();
    std::cout << pad(name, 20);
    if (!learner_outputs.contains(name)) {
      std::cout << pad(shape_text(info.at("shape")), 18) << pad("—", 14) << pad(scientific(tolerance), 11)
                << yellow(ctx, "not reached") << '\n';
      continue;
    }
    const xt::xarray<float> mine = workbench::load_npy_f32(work / "learner" / "dump" / (name + ".npy"));
    const xt::xarray<float> theirs = workbench::load_npy_f32(work / "reference" / "dump" / (name + ".npy"));
    if (mine.shape() != theirs.shape()) {
      std::cout << pad(shape_text(learner_outputs[name].at("shape")) + " vs " + shape_text(info.at("shape")), 32)
                << pad(scientific(tolerance), 11) << red(ctx, "no: shapes differ") << '\n';
      continue;
    }
    const double diff = max_abs_diff(mine, theirs);
    const bool ok = diff <= tolerance;
    within += ok;
    std::cout << pad(shape_text(info.at("shape")), 18) << pad(diff == 0.0 ? "0" : scientific(diff), 14)
              << pad(scientific(tolerance), 11) << (ok ? green(ctx, "yes") : red(ctx, "no")) << '\n';
  }
  if (const auto todo = todo_in(learner_run.output)) {
    const Lab* at = find_lab(ctx.labs, todo->first);
    std::cout << yellow(ctx, "not started: Block " + todo->second + " of " + (at ? at->text() : "lab " + todo->first))
              << " (your verify program stopped there)\n";
  } else if (!learner_run.status.exited) {
    std::cout << red(ctx, learner + " crashed with " + learner_run.status.describe()) << '\n';
  }
  const std::size_t total = ref_outputs.size();
  std::cout << within << " of " << total << " outputs within tolerance";
  if (within == total) std::cout << ": " << green(ctx, "0 differences beyond tolerance");
  std::cout << '\n';
  return within == total ? 0 : 1;
}

int show_hint(const Context& ctx, const std::string& number, bool restart) {
  const Lab& lab = require_lab(ctx, number);
  if (lab.hints.empty()) {
    std::cout << "lab " << lab.number << " has no hints; reread " << lab.text() << '\n';
    return 0;
  }
  nlohmann::json state = load_state(ctx);
  if (!state.contains("hints_shown") || !state["hints_shown"].is_object()) state["hints_shown"] = nlohmann::json::object();
  const int shown = restart ? 0 : state["hints_shown"].value(lab.number, 0);
  const int n = static_cast<int>(lab.hints.size());
  const int next = std::min(shown + 1, n);
  std::cout << bold(ctx, "Hint " + std::to_string(next) + " of " + std::to_string(n)) << " for " << heading(lab)
            << "\n\n"
            << lab.hints[next - 1] << "\n\n";
  if (next < n)
    std::cout << "`workbook hint " << lab.number << "` again shows the next one.\n";
  else
    std::cout << "that is the last hint; `workbook hint " << lab.number << " --restart` starts over.\n";
  state["hints_shown"][lab.number] = next;
  save_state(ctx, state);
  return 0;
}

int show_solution(const Context& ctx, const std::string& number, bool force) {
  const Lab& lab = require_lab(ctx, number);
  if (!force) {
    const LabResult result = run_learner_tests(ctx.ws, lab);
    if (result.status != LabStatus::done) {
      std::cout << "lab " << lab.number << " is not done yet (" << status_name(result.status);
      if (result.status != LabStatus::build_error) std::cout << ", " << result.passed << " of " << result.total << " tests pass";
      std::cout << "): the solution opens once `workbook check " << lab.number << "` passes.\n"
                << "`workbook solution " << lab.number << " --force` shows it anyway.\n";
      return 1;
    }
  }
  std::cout << "==> " << lab.write_up() << " <==\n" << read_file(ctx.ws.repo / lab.write_up()) << '\n';
  for (const std::string& file : lab.reference_files())
    std::cout << "==> " << file << " <==\n" << read_file(ctx.ws.repo / file) << '\n';
  return 0;
}

int reset_lab(const Context& ctx, const std::string& number, bool yes) {
  const Lab& lab = require_lab(ctx, number);
  const std::string ref = pristine_ref(ctx);
  std::vector<std::pair<std::string, std::string>> changed;  // path, pristine text
  for (const std::string& file : lab.learner_files) {
    const std::string pristine = git_show(ctx, ref, file);
    const fs::path path = ctx.ws.repo / file;
    if (!fs::exists(path) || read_file(path) != pristine) changed.emplace_back(file, pristine);
  }
  if (changed.empty()) {
    std::cout << "lab " << lab.number << "'s files are already the stubs of " << ref << "; nothing to do\n";
    return 0;
  }
  if (!yes) {
    if (!isatty(STDIN_FILENO))
      throw UsageError("reset needs confirmation and there is no terminal: pass --yes (your files are backed up first)");
    std::cout << "reset lab " << lab.number << " to the stubs of " << ref << ":";
    for (const auto& [file, text] : changed) std::cout << ' ' << file;
    std::cout << "\nyour current version is backed up first. continue? [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::cout << "nothing changed\n";
      return 1;
    }
  }
  fs::path backup = ctx.ws.repo / ".workbook-backups" / utc_stamp();
  for (int i = 2; fs::exists(backup); ++i) backup = backup.parent_path() / (utc_stamp() + "-" + std::to_string(i));
  for (const auto& [file, pristine] : changed) {
    const fs::path path = ctx.ws.repo / file;
    if (fs::exists(path)) {
      fs::create_directories((backup / file).parent_path());
      fs::copy_file(path, backup / file);
      std::cout << "saved your version to " << ctx.ws.relative(backup / file) << '\n';
    }
    std::ofstream(path, std::ios::binary) << pristine;
    std::cout << "restored " << file << " (" << ref << ")\n";
  }
  return 0;
}

int grade(const Context& ctx, bool json) {
  const std::vector<LabResult> results = run_all(ctx.ws, ctx.labs, false);
  nlohmann::ordered_json report = {{"labs", nlohmann::ordered_json::array()}};
  int passed = 0, total = 0;
  for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
    const LabResult& r = results[i];
    report["labs"].push_back({{"lab", ctx.labs[i].number},
                              {"title", ctx.labs[i].title},
                              {"passed", r.passed},
                              {"total", r.total},
                              {"status", status_name(r.status)}});
    passed += r.passed;
    total += r.total;
  }
  report["passed"] = passed;
  report["total"] = total;
  report["score"] = total ? double(passed) / total : 0.0;
  if (json) {
    std::cout << report.dump(2) << '\n';
    return 0;
  }
  for (const auto& lab : report["labs"])
    std::cout << lab["lab"].get<std::string>() << "  " << pad(lab["title"].get<std::string>(), title_width(ctx.labs))
              << lab["passed"].get<int>() << "/" << lab["total"].get<int>() << "  "
              << lab["status"].get<std::string>() << '\n';
  std::cout << "score " << passed << "/" << total << '\n';
  return 0;
}

}  // namespace workbook
