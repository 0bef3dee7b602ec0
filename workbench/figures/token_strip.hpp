#pragma once
// A text split into tokens, drawn as a strip of boxes (lab 12's verse_tokens.png): each token in
// its own box, alternately coloured, its id under it, wrapped into lines.
#include <filesystem>
#include <string>
#include <vector>

namespace workbench {

/// One token: the text shown in its box (spaces as "␣", a newline as "↵") and the label under it.
struct StripToken {
  std::string text;
  std::string label;
};

struct TokenStrip {
  std::string title;
  std::string caption;  ///< one line under the title: the tokenizer, the counts
  std::vector<StripToken> tokens;
};

/// Renders the strip to `png` atomically, about 1000 px wide, as tall as its lines need.
/// @throws std::invalid_argument if there are no tokens; std::runtime_error if the file cannot be
///         written.
void render_token_strip(const std::filesystem::path& png, const TokenStrip& strip);

}  // namespace workbench
