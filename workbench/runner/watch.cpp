// `workbook watch`: re-check the current lab each time a learner file is saved, until Ctrl-C.
// inotify on the folders of the learner files (editors often save by renaming a temporary file, so
// the folder is watched, not the file); polling their modification times where inotify is missing.
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "runner/report.hpp"
#include "runner/verbs.hpp"
#include "util/process.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// The first Ctrl-C stops the check that is running (its child processes are killed, and no other
// starts) and ends the watch; the handler is then reset, so a second Ctrl-C ends it at once.
volatile std::sig_atomic_t stop_requested = 0;
void request_stop(int) {
  stop_requested = 1;
  workbench::stop_children();
}

std::string clock_time() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream out;
  out << std::put_time(&local, "%H:%M:%S");
  return out.str();
}

using MTimes = std::map<fs::path, fs::file_time_type>;

MTimes mtimes_of(const std::set<fs::path>& files) {
  MTimes times;
  std::error_code error;
  for (const fs::path& file : files) times[file] = fs::last_write_time(file, error);
  return times;
}

// Names of watched files in the events read from `fd`; empty if none of them changed.
std::set<std::string> read_events(int fd, const std::set<std::string>& names) {
  std::set<std::string> changed;
  alignas(inotify_event) char buffer[8192];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    for (char* p = buffer; p < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(p);
      if (event->len && names.count(event->name)) changed.insert(event->name);
      p += sizeof(inotify_event) + event->len;
    }
  }
  return changed;
}

}  // namespace

int watch(const Context& ctx, bool force_polling) {
  std::set<fs::path> files, folders;
  std::set<std::string> names;
  for (const Lab& lab : ctx.labs)
    for (const std::string& file : lab.learner_files) {
      files.insert(ctx.ws.repo / file);
      folders.insert((ctx.ws.repo / file).parent_path());
      names.insert(fs::path(file).filename().string());
    }

  struct sigaction action {};
  action.sa_handler = request_stop;  // no SA_RESTART: a blocking wait returns at once
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  int fd = force_polling ? -1 : inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  for (const fs::path& folder : folders)
    if (fd >= 0 &&
        inotify_add_watch(fd, folder.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0) {
      close(fd);  // e.g. no watches left: poll instead
      fd = -1;
    }

  std::string previous;  // the lab checked last time, to say when it is done
  auto run_check = [&](const std::string& why, const std::set<std::string>& saved) {
    if (ctx.terminal) std::cout << "\033[2J\033[H";  // clear the screen
    std::cout << "== workbook watch, " << clock_time() << ": " << why << '\n' << std::flush;
    try {
      const std::vector<LabResult> results = [&] {
        const BuildLock lock(ctx.ws);
        return run_all(ctx.ws, ctx.labs);
      }();
      if (stop_requested) return;  // its results are those of killed programs
      std::size_t current = 0;     // the first lab that is not done
      while (current < results.size() && results[current].status == LabStatus::done) ++current;
      for (std::size_t i = 0; i < ctx.labs.size(); ++i) {
        const Lab& lab = ctx.labs[i];
        if (!previous.empty() && lab.number >= previous && i < current)
          std::cout << ctx.green("lab " + lab.number + " is done") << '\n';
        // A file saved in a later lab that does not compile: say so, though it is not current.
        const bool saved_here = std::any_of(
            lab.learner_files.begin(), lab.learner_files.end(), [&](const std::string& file) {
              return saved.count(fs::path(file).filename().string());
            });
        if (i > current && saved_here && results[i].status == LabStatus::build_error)
          std::cout << ctx.red(heading(lab) + ": build error") << " (in the file you saved)\n"
                    << results[i].build.first_error << '\n';
      }
      if (current < ctx.labs.size()) {
        previous = ctx.labs[current].number;
        print_check(ctx, ctx.labs[current], results[current]);
      } else {
        previous = "";
        std::cout << ctx.green("every lab is done") << '\n';
      }
    } catch (const std::exception& e) {
      if (stop_requested) return;
      std::cout << ctx.red(e.what()) << '\n';
    }
    std::cout << "watching " << files.size() << " learner files "
              << (fd >= 0 ? "(inotify)" : "(polling every second)") << "; Ctrl-C stops\n"
              << std::flush;
  };

  run_check("start", {});
  MTimes times = mtimes_of(files);
  while (!stop_requested) {
    std::set<std::string> changed;
    if (fd >= 0) {
      pollfd waiting{fd, POLLIN, 0};
      if (::poll(&waiting, 1, 500) <= 0) continue;
      changed = read_events(fd, names);
      // Debounce: an editor's save is often several events; wait until 300 ms pass quietly.
      while (!changed.empty() && !stop_requested && ::poll(&waiting, 1, 300) > 0) {
        const auto more = read_events(fd, names);
        changed.insert(more.begin(), more.end());
      }
    } else {
      for (int i = 0; i < 10 && !stop_requested; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const MTimes now = mtimes_of(files);
      for (const auto& [file, time] : now)
        if (times[file] != time) changed.insert(file.filename().string());
      times = now;
    }
    if (changed.empty() || stop_requested) continue;
    std::string why;
    for (const std::string& name : changed) why += (why.empty() ? "" : ", ") + name;
    run_check(why + " saved", changed);
    times = mtimes_of(files);
  }
  if (fd >= 0) close(fd);
  std::cout << "watch stopped\n";
  return kSuccess;
}

}  // namespace workbook
