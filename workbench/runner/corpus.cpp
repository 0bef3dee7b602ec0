// `workbook corpus [--out DIR]`: lab 12's corpus, the King James Bible of Debian's bible-kjv
// package split by book into DIR/kjv-train.txt and DIR/kjv-validation.txt (corpus/kjv_corpus.hpp).
#include <chrono>
#include <filesystem>
#include <iostream>

#include "corpus/kjv_corpus.hpp"
#include "runner/verbs.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace workbook {

int write_corpus(const Context& ctx, const std::string& out) {
  const std::filesystem::path dir =
      out.empty() ? ctx.ws.build / "corpus" : std::filesystem::path(out);
  // A --out that is no folder (a file, /dev/null) or holds a non-file where a split goes is a bad
  // command line, not a broken environment.
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw UsageError("corpus --out " + dir.string() + " is not a folder");
  for (std::string_view name : {workbench::kKjvTrainFile, workbench::kKjvValidationFile}) {
    try {
      workbench::check_replaceable(dir / name);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("corpus --out: ") + e.what());
    }
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    workbench::write_kjv_corpus(dir);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::string_view name : {workbench::kKjvTrainFile, workbench::kKjvValidationFile}) {
      const std::filesystem::path file = dir / name;
      std::cout << "wrote " << ctx.ws.relative(file) << " (" << std::filesystem::file_size(file)
                << " bytes)\n";
    }
    std::cout << "validation books:";
    for (std::string_view book : workbench::kKjvValidationBooks) std::cout << ' ' << book;
    std::cout << "; " << workbench::seconds_text(seconds) << '\n';
  } catch (const workbench::KjvMissing& e) {
    std::cerr << "workbook corpus: " << e.what() << '\n';
    return kEnvironment;
  }
  return kSuccess;
}

}  // namespace workbook
