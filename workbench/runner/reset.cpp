// `workbook reset NN [--yes]`: restore a lab's stubs as committed upstream, after saving the
// learner's version under .workbook-backups/<UTC time>/.
#include <unistd.h>

#include <iostream>

#include "runner/verbs.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// The file as committed: git's stdout alone, so that a warning of git's (an ambiguous ref name)
// never becomes part of a restored stub; it reaches the learner on stderr instead.
std::string git_show(const Context& ctx, const std::string& ref, const std::string& path) {
  const ToolRun run =
      run_tool_stdout("git", {"-C", ctx.ws.repo.string(), "show", ref + ":" + path});
  if (!run.ok)
    throw EnvironmentError("git show " + ref + ":" + path + " failed (git's message is above)");
  return run.output;
}

std::string utc_stamp() { return workbench::utc_now("%Y%m%dT%H%M%SZ"); }

}  // namespace

int reset_lab(const Context& ctx, const std::string& number, bool yes) {
  const Lab& lab = ctx.require_lab(number);
  const std::string ref = pristine_ref(ctx.ws.repo);
  std::vector<std::pair<std::string, std::string>> changed;  // path, pristine text
  for (const std::string& file : lab.learner_files) {
    const std::string pristine = git_show(ctx, ref, file);
    const fs::path path = ctx.ws.repo / file;
    if (!fs::exists(path) || workbench::read_file(path) != pristine)
      changed.emplace_back(file, pristine);
  }
  if (changed.empty()) {
    std::cout << "lab " << lab.number << "'s files are already the stubs of " << ref
              << "; nothing to do\n";
    return kSuccess;
  }
  if (!yes) {
    if (!isatty(STDIN_FILENO))
      throw UsageError(
          "reset needs confirmation and there is no terminal: pass --yes (your files are backed up "
          "first)");
    std::cout << "reset lab " << lab.number << " to the stubs of " << ref << ":";
    for (const auto& [file, text] : changed) std::cout << ' ' << file;
    std::cout << "\nyour current version is backed up first. continue? [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::cout << "nothing changed\n";
      return kNotDone;
    }
  }
  fs::path backup = ctx.ws.repo / ".workbook-backups" / utc_stamp();
  for (int i = 2; fs::exists(backup); ++i)
    backup = backup.parent_path() / (utc_stamp() + "-" + std::to_string(i));
  for (const auto& [file, pristine] : changed) {
    const fs::path path = ctx.ws.repo / file;
    if (fs::exists(path)) {
      fs::create_directories((backup / file).parent_path());
      fs::copy_file(path, backup / file);
      std::cout << "saved your version to " << ctx.ws.relative(backup / file) << '\n';
    }
    workbench::write_file_atomically(path, pristine);
    std::cout << "restored " << file << " (" << ref << ")\n";
  }
  return kSuccess;
}

}  // namespace workbook
