// `workbook`: the learner's command. Verbs run the workbook's other programs as child processes,
// so this command never links the learner's code and keeps working while that code is broken.
#include <iostream>

#include <CLI/CLI.hpp>

#include "attend_options.hpp"
#include "process.hpp"

namespace {

constexpr int kBadInput = 2;

// attend: run attend-<impl> from the same build folder with the same options.
int attend(const std::string& impl, const workbench::AttendOptions& options) {
  const auto engine = workbench::executable_dir() / ("attend-" + impl);
  if (!std::filesystem::exists(engine)) {
    std::cerr << "workbook attend: " << engine.string() << " is missing; build it with "
              << "`cmake --build build --target attend-" << impl << "`\n";
    return kBadInput;
  }
  const workbench::ProcessStatus status = workbench::run_process(engine, workbench::attend_arguments(options));
  if (!status.exited) {
    std::cerr << "workbook attend: the " << impl << " implementation crashed with " << status.describe()
              << "; nothing was written\n";
    return kBadInput;
  }
  return status.code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"workbook: the minimodel lab workbook's command."};
  app.require_subcommand(1);
  // One line a learner can act on, not CLI11's two.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "workbook: " + std::string(e.what()) + " (see workbook --help)\n";
  });

  std::string impl = "reference";
  workbench::AttendOptions options;
  CLI::App* attend_cmd = app.add_subcommand(
      "attend",
      "Run multi-head attention on .npy files: Y = MHA(X) with the given weights.\n"
      "Exit status: 0 done; 1 the learner implementation reached a TODO stub; 2 bad input, "
      "in which case nothing is written.");
  attend_cmd->add_option("--impl", impl, "Which implementation runs: the reference solutions/ or your src/")
      ->check(CLI::IsMember({"reference", "learner"}))
      ->capture_default_str();
  workbench::add_attend_options(*attend_cmd, options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kBadInput;
  }
  try {
    if (*attend_cmd) return attend(impl, options);
  } catch (const std::exception& e) {
    std::cerr << "workbook: " << e.what() << '\n';
    return kBadInput;
  }
  return 0;
}
