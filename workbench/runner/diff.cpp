// `workbook diff NN`: run the learner's and the reference's verify programs on the same inputs and
// compare the outputs they record (run.record in verify/labNN_verify.cpp), within the tolerance
// of the lab's tests; each output's row names the block whose code produced it.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "tensors/compare.hpp"
#include "tensors/npy_io.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

std::string shape_text(const nlohmann::json& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i].get<std::size_t>());
  return text + ")";
}

}  // namespace

// Each verify program's run, as verify's: generous, since only an endless loop should reach it.
constexpr std::chrono::minutes kDiffTimeLimit{10};

int diff_lab(const Context& ctx, const std::string& number) {
  using workbench::scientific;
  const Lab& lab = ctx.require_lab(number);
  const std::string learner = lab.target("verify", "learner"),
                    reference = lab.target("verify", "reference");
  const BuildResult build = build_targets(ctx.ws, {learner, reference});
  if (!build.ok) {
    print_build_error(ctx, build);
    return kNotDone;
  }
  const fs::path work = ctx.ws.build / "workbook" / ("diff-lab" + lab.number);  // ours to replace
  fs::remove_all(work);
  workbench::CaptureOptions limited;
  limited.time_limit = time_limit(kDiffTimeLimit);
  auto run = [&](const std::string& program, const std::string& impl) {
    const auto [command, args] = lab.command(
        ctx.ws.bin(program).string(),
        {"--out", (work / impl / "out").string(), "--dump", (work / impl / "dump").string()});
    return workbench::run_captured(command, args, limited);
  };
  const workbench::CapturedRun ref_run = run(reference, "reference");
  const workbench::CapturedRun learner_run = run(learner, "learner");
  auto outputs = [&](const std::string& impl) {
    std::ifstream in(work / impl / "dump" / "outputs.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (workbench::json_too_deep(text)) return nlohmann::ordered_json::object();  // no outputs
    const auto json = nlohmann::ordered_json::parse(text, nullptr, false);
    return json.is_object() ? json : nlohmann::ordered_json::object();
  };
  const nlohmann::ordered_json ref_outputs = outputs("reference"),
                               learner_outputs = outputs("learner");
  if (!ref_run.status.ok() || ref_outputs.empty())
    throw EnvironmentError(
        reference + " failed (" + how_it_ended(ref_run.status, limited.time_limit) +
        ") or recorded no outputs; does " + lab.verify + " call run.record(…)?\n" + ref_run.output);

  // Column widths from what is printed: a lab records a dozen outputs or more, with names such
  // as "attention_backward_dq" and shapes such as "(1, 4, 12, 12)".
  std::size_t name_width = 8, shape_width = 8;
  bool any_block = false;
  for (const auto& [name, info] : ref_outputs.items()) {
    name_width = std::max(name_width, name.size() + 2);
    shape_width = std::max(shape_width, shape_text(info.at("shape")).size() + 2);
    any_block = any_block || info.contains("block");
  }
  const std::size_t block_width = any_block ? 7 : 0;
  std::cout << ctx.bold(heading(lab))
            << ": your outputs vs the reference's, on the verify program's inputs\n";
  std::cout << (any_block ? pad("Block", block_width) : "") << pad("output", name_width)
            << pad("shape", shape_width) << pad("max abs diff", 14) << pad("tolerance", 11)
            << "within?\n";
  std::size_t within = 0;
  // The output beyond tolerance of the earliest block (the first such in that block), where a
  // learner should look first: a wrong Block A makes every later block's outputs wrong too.
  std::string first_beyond, first_beyond_block;
  auto beyond = [&](const std::string& name, const nlohmann::ordered_json& info) {
    const std::string block = info.value("block", "");
    if (!first_beyond.empty() && block >= first_beyond_block) return;
    first_beyond = (block.empty() ? "" : "Block " + block + "'s ") + name;
    first_beyond_block = block;
  };
  for (const auto& [name, info] : ref_outputs.items()) {
    const double tolerance = info.at("tolerance").get<double>();
    if (any_block) std::cout << pad(info.value("block", ""), block_width);
    std::cout << pad(name, name_width);
    if (!learner_outputs.contains(name)) {
      std::cout << pad(shape_text(info.at("shape")), shape_width) << pad("—", 14)
                << pad(scientific(tolerance), 11) << ctx.yellow("not reached") << '\n';
      continue;
    }
    const auto mine = workbench::load_npy_f32(work / "learner" / "dump" / (name + ".npy"));
    const auto theirs = workbench::load_npy_f32(work / "reference" / "dump" / (name + ".npy"));
    if (mine.shape() != theirs.shape()) {
      std::cout << pad(shape_text(learner_outputs[name].at("shape")) + " vs " +
                           shape_text(info.at("shape")),
                       shape_width + 14)
                << pad(scientific(tolerance), 11) << ctx.red("no: shapes differ") << '\n';
      beyond(name, info);
      continue;
    }
    const double diff = workbench::max_abs_diff(mine, theirs);
    const bool ok = diff <= tolerance;
    within += ok;
    if (!ok) beyond(name, info);
    std::cout << pad(shape_text(info.at("shape")), shape_width)
              << pad(diff == 0.0 ? "0" : scientific(diff), 14) << pad(scientific(tolerance), 11)
              << (ok ? ctx.green("yes") : ctx.red("no")) << '\n';
  }
  if (const auto todo = todo_in(learner_run.output)) {
    const Lab* at = find_lab(ctx.labs, todo->first);
    std::cout << ctx.yellow("not started: Block " + todo->second + " of " +
                            (at ? at->text : "lab " + todo->first))
              << " (your verify program stopped there)\n";
  } else if (crashed(learner_run.status)) {
    std::cout << ctx.red(learner + " " + how_it_ended(learner_run.status, limited.time_limit))
              << '\n';
  }
  const std::size_t total = ref_outputs.size();
  std::cout << within << " of " << total << " outputs within tolerance";
  if (within == total) std::cout << ": " << ctx.green("0 differences beyond tolerance");
  std::cout << '\n';
  if (!first_beyond.empty())
    std::cout << "the first output beyond tolerance is " << first_beyond << ": start there\n";
  if (crashed(learner_run.status)) return kCrashed;
  return within == total ? kSuccess : kNotDone;
}

}  // namespace workbook
