#include "util/engine_main.hpp"

#include <exception>
#include <iostream>
#include <new>

#include "minimodel/todo.hpp"

namespace workbench {

int engine_main(CLI::App& app, int argc, char** argv, const EngineErrors& errors,
                const std::function<int()>& run) {
  app.failure_message([command = errors.command](const CLI::App*, const CLI::Error& e) {
    return command + ": " + e.what() + "\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);  // prints --help, or the failure message
    return status == 0 ? 0 : 2;
  }
  try {
    return run();
  } catch (const minimodel::Todo& e) {
    std::cerr << errors.command << " --impl " << errors.impl << ": " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << errors.command << ": out of memory (std::bad_alloc)"
              << (errors.out_of_memory.empty() ? "" : ": " + errors.out_of_memory) << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << errors.command << ": " << e.what() << '\n';
    return 2;
  }
}

}  // namespace workbench
