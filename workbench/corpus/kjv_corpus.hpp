#pragma once
// Lab 12's corpus: the King James Bible of Debian's `bible-kjv` package (`bible -f
// "Genesis1:1-Revelation22:21"`, 31,102 verses), as the plain text the tokenizer labs read.
//
// The text: the reference that starts each line ("Ge1:1 ") is removed and each verse is one line;
// each book ends with a line holding only the special token <|endoftext|>, GPT-2's separator of
// documents. The split, by book, fixed: the validation part is eight books of different kinds
// (kKjvValidationBooks, about 9.5 % of the text), the training part the other 58.
#include <array>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace workbench {

/// The separator written after each book.
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

/// The books of the validation part, by the `bible` program's abbreviations: Ruth and Esther
/// (narrative), Proverbs (wisdom), Lamentations (poetry), Daniel (prophecy), Mark (a gospel),
/// Romans (a letter) and Revelation (apocalypse).
inline constexpr std::array<std::string_view, 8> kKjvValidationBooks = {
    "Ruth", "Est", "Prv", "Lam", "Dan", "Mark", "Rom", "Rev"};

/// `bible` is not installed (or could not run): the message says how to install it.
struct KjvMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One book: its abbreviation ("Ge", "1Sm", "Rev") and its verses without their references.
struct KjvBook {
  std::string name;
  std::vector<std::string> verses;
};

/// The 66 books, in order, read from `bible -f "Genesis1:1-Revelation22:21"`.
/// @throws KjvMissing if `bible` cannot run; std::runtime_error if a line has no reference.
std::vector<KjvBook> read_kjv();

/// The corpus text of `books`: each verse on a line, each book followed by a line <|endoftext|>.
std::string corpus_text(const std::vector<KjvBook>& books);

/// The training and validation texts.
struct KjvCorpus {
  std::string train;
  std::string validation;
};

/// read_kjv(), split by kKjvValidationBooks. @throws as read_kjv.
KjvCorpus kjv_corpus();

/// The corpus files `workbook corpus` writes into a folder.
inline constexpr std::string_view kKjvTrainFile = "kjv-train.txt";
inline constexpr std::string_view kKjvValidationFile = "kjv-validation.txt";

/// Writes kjv_corpus() as `dir`/kjv-train.txt and `dir`/kjv-validation.txt, both or neither
/// (write_files_atomically: a path that is not a regular file is refused).
void write_kjv_corpus(const std::filesystem::path& dir);

}  // namespace workbench
