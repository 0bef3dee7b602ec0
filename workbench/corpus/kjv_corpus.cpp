#include "corpus/kjv_corpus.hpp"

#include <algorithm>
#include <cctype>

#include "util/files.hpp"
#include "util/process.hpp"

namespace workbench {
namespace {

const char* const kInstall =
    "install it with scripts/install-deps.sh (or apt-get install bible-kjv)";

// "1Sm3:4 Text" -> ("1Sm", "Text"): the book is an optional digit and letters, then
// chapter:verse and one space.
bool split_reference(const std::string& line, std::string& book, std::string& text) {
  std::size_t i = 0;
  if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  const std::size_t letters = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  if (i == letters) return false;
  book = line.substr(0, i);
  const std::size_t chapter = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == chapter || i >= line.size() || line[i] != ':') return false;
  const std::size_t verse = ++i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == verse || i >= line.size() || line[i] != ' ') return false;
  text = line.substr(i + 1);
  return true;
}

}  // namespace

std::vector<KjvBook> read_kjv() {
  CaptureOptions options;
  options.capture_stderr = false;
  options.keep_bytes = std::size_t{64} << 20;  // the whole text (4.4 MB)
  CapturedRun run;
  try {
    run = run_captured("bible", {"-f", "Genesis1:1-Revelation22:21"}, options);
  } catch (const std::runtime_error& e) {
    throw KjvMissing(std::string("the King James Bible is missing (") + e.what() +
                     "): " + kInstall);
  }
  if (!run.status.ok())
    throw KjvMissing("`bible -f Genesis1:1-Revelation22:21` failed with " + run.status.describe() +
                     ": " + kInstall);
  std::vector<KjvBook> books;
  std::size_t start = 0;
  std::string book, text;
  while (start < run.output.size()) {
    std::size_t end = run.output.find('\n', start);
    if (end == std::string::npos) end = run.output.size();
    const std::string line = run.output.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (!split_reference(line, book, text))
      throw std::runtime_error("bible printed a line without a reference such as 'Ge1:1 ': " +
                               line.substr(0, 60));
    if (books.empty() || books.back().name != book) books.push_back({book, {}});
    books.back().verses.push_back(text);
  }
  return books;
}

std::string corpus_text(const std::vector<KjvBook>& books) {
  std::string text;
  for (const KjvBook& book : books) {
    for (const std::string& verse : book.verses) text.append(verse).push_back('\n');
    text.append(kEndOfText).push_back('\n');
  }
  return text;
}

KjvCorpus kjv_corpus() {
  std::vector<KjvBook> train, validation;
  for (KjvBook& book : read_kjv()) {
    const bool held_out = std::find(kKjvValidationBooks.begin(), kKjvValidationBooks.end(),
                                    book.name) != kKjvValidationBooks.end();
    (held_out ? validation : train).push_back(std::move(book));
  }
  if (validation.size() != kKjvValidationBooks.size())
    throw std::runtime_error("the bible program's book names are not the ones expected: found " +
                             std::to_string(validation.size()) + " of the " +
                             std::to_string(kKjvValidationBooks.size()) + " validation books");
  return {corpus_text(train), corpus_text(validation)};
}

void write_kjv_corpus(const std::filesystem::path& dir) {
  KjvCorpus corpus = kjv_corpus();
  write_files_atomically({{dir / kKjvTrainFile, std::move(corpus.train)},
                          {dir / kKjvValidationFile, std::move(corpus.validation)}});
}

}  // namespace workbench
