#pragma once
// What the engines of `workbook explore --checkpoint` share, whichever model they run (lab 10's
// explore_main.cpp; lab 13's, with its tokenizer): the input read and refused with one line, cut
// to the model's context, and the page written with its data beside it.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "explore/explore_options.hpp"
#include "explore/page_data.hpp"

namespace workbench {

/// How many next tokens the page shows at each position.
inline constexpr std::size_t kTopPredictions = 5;

/// The text of --text or --text-file: a regular file of at most 1 MiB (a device, a FIFO or a
/// folder is refused without being opened), not empty, valid UTF-8.
/// @throws std::invalid_argument with one line naming the option and what is wrong.
std::string explore_text(const ExploreOptions& o);

/// Says on stderr and in the page's notes that the input was cut (`cut` says how).
void note_cut(const std::string& cut, PageData& page);

/// Cuts `tokens` to the model's context `max_len`, saying so on stderr and in the page's notes.
template <class Token>
void cut_to_context(std::vector<Token>& tokens, std::size_t max_len, PageData& page) {
  if (tokens.size() <= max_len) return;
  const std::string cut = "the input has " + std::to_string(tokens.size()) +
                          " tokens but the model's context is " + std::to_string(max_len) +
                          ": only the first " + std::to_string(max_len) + " are shown";
  note_cut(cut, page);
  tokens.resize(max_len);
}

/// An engine's main: the explore options (--checkpoint and --out required) read and `explore` run
/// by engine_main (util/engine_main.hpp), which says what it throws in one line: a TODO stub
/// exit 1 (naming `impl`), anything else (bad input, no memory) 2; a bad command line 2.
int explore_engine_main(int argc, char** argv, const std::string& description,
                        const std::string& impl,
                        const std::function<int(const ExploreOptions&)>& explore);

/// Writes the page to o.out and its JSON beside it (.json), both or neither, and prints both.
/// @throws std::invalid_argument if o.out does not end in .html; std::runtime_error (naming the
///         path) if it cannot be written, among them check_replaceable's refusals.
void write_explorer_page(const ExploreOptions& o, const PageData& page);

}  // namespace workbench
