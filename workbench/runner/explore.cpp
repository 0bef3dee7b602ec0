// `workbook explore`: the attention explorer's page. `explore NN` renders lab NN's last verify
// run (the explore.json its verify program wrote) as explore.html beside it; `explore
// --checkpoint` runs the explore engine (workbook_main.cpp) and this file only chooses its page's
// path; --serve serves either page on 127.0.0.1 with cpp-httplib until Ctrl-C.
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <httplib.h>

#include "explore/page_data.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"

namespace workbook {

namespace {

// Lab NN's experiment folder for `impl`: the learner's, or its reference/ subfolder.
std::filesystem::path experiment_folder(const Context& ctx, const Lab& lab,
                                        const std::string& impl) {
  const std::filesystem::path folder = ctx.ws.repo / lab.experiment;
  return impl == "reference" ? folder / "reference" : folder;
}

}  // namespace

std::filesystem::path default_explore_page(const std::filesystem::path& checkpoint) {
  std::filesystem::path folder = std::filesystem::absolute(checkpoint).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // DIR/ names DIR
  return folder.parent_path() / "explore-checkpoint.html";
}

int explore_lab(const Context& ctx, const std::string& number, const std::string& impl,
                std::filesystem::path& page_path) {
  const Lab& lab = ctx.require_lab(number);
  std::filesystem::path folder = experiment_folder(ctx, lab, impl);
  const std::string verify =
      "workbook verify " + lab.number + (impl == "reference" ? " --impl reference" : "");
  // A lab whose real run is long (lab 13's five minutes) runs short in ctest, into short/: its
  // page, when there is no real run's, says which it is.
  if (!std::filesystem::is_regular_file(folder / "explore.json") &&
      std::filesystem::is_regular_file(folder / "short" / "explore.json")) {
    folder /= "short";
    std::cout << "lab " << lab.number << "'s short run (ctest's): `" << verify
              << "` makes the real one\n";
  }
  const std::filesystem::path data_path = folder / "explore.json";
  if (!std::filesystem::is_regular_file(data_path)) {
    // A verify run that passed and whose manifest lists no explore.json: a lab with no attention
    // (lab 12's tokenizer) or none to page (lab 00's two tokens, lab 14's ranks), or a run older
    // than the code that writes one.
    const nlohmann::json manifest =
        std::filesystem::is_regular_file(folder / "manifest.json")
            ? nlohmann::json::parse(workbench::read_file(folder / "manifest.json"), nullptr, false)
            : nlohmann::json();
    if (manifest.is_object() && manifest.contains("artifacts") &&
        manifest["artifacts"].is_array() && manifest.contains("results_summary") &&
        manifest["results_summary"].is_object() &&
        manifest["results_summary"].value("passed", nlohmann::json()) == true) {
      std::cerr << "workbook explore " << lab.number << ": lab " << lab.number << " (" << lab.title
                << ") has no attention page: its verify run wrote no explore.json (run `" << verify
                << "` again if that run is older than your code); explore another lab's run, or a "
                   "checkpoint with --checkpoint\n";
      return kNotDone;
    }
    std::cerr << "workbook explore " << lab.number << ": no " << ctx.ws.relative(data_path)
              << ": run `" << verify
              << "` first (each verify program that computes attention writes it there)\n";
    return kNotDone;
  }
  workbench::PageData page;
  try {
    page = workbench::page_from_json(nlohmann::json::parse(workbench::read_file(data_path)));
  } catch (const std::exception& e) {
    std::cerr << "workbook explore " << lab.number << ": " << ctx.ws.relative(data_path) << ": "
              << e.what() << "; run `" << verify << "` again\n";
    return kNotDone;
  }
  page_path = folder / "explore.html";
  workbench::write_file_atomically(page_path, workbench::explorer_html(page));
  std::cout << "wrote " << ctx.ws.relative(page_path) << '\n';
  return kSuccess;
}

int serve_page(const std::filesystem::path& page_path, int port) {
  const std::string html = workbench::read_file(page_path);
  httplib::Server server;
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server share a port already
  // in use: SO_REUSEADDR alone allows a quick restart but refuses a port another one listens on.
  server.set_socket_options([](socket_t socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // An idle connection (a browser keeps one open, or opens one ahead) holds stop(), and so Ctrl-C,
  // for this long: cpp-httplib's default is 5 s.
  server.set_keep_alive_timeout(1);
  server.Get("/", [&html](const httplib::Request&, httplib::Response& response) {
    response.set_content(html, "text/html; charset=utf-8");
  });
  // Ctrl-C, SIGTERM and a closed terminal are waited for below, not handled: blocked here, before
  // the server's threads start, so that they inherit the mask and the signal comes to sigwait.
  sigset_t signals, previous;
  sigemptyset(&signals);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  const int bound = port == 0 ? server.bind_to_any_port("127.0.0.1")
                              : (server.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound < 0) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    std::cerr << "workbook explore --serve: cannot listen on 127.0.0.1:" << port
              << " (is the port in use?); give another with --port, or --port 0 for any free one\n";
    return kEnvironment;
  }
  std::cout << "serving " << page_path.filename().string() << " at http://127.0.0.1:" << bound
            << "/ until Ctrl-C" << std::endl;
  std::thread listener([&server] { server.listen_after_bind(); });
  int signal = 0;
  sigwait(&signals, &signal);
  server.stop();
  listener.join();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  std::cout << "stopped serving" << std::endl;
  return kSuccess;
}

}  // namespace workbook
