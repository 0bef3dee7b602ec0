#pragma once
// Text printed as a model produces it, token by token. A byte-level token can end inside a UTF-8
// character (lab 12's tokens split a character whose bytes were never merged), so a piece is
// printed only up to the last character that is complete or can no longer become one; the bytes
// of a character still being written wait for the next token. Invalid UTF-8 is replaced by U+FFFD
// per maximal subpart (The Unicode Standard §3.9, Python's errors="replace", lab 12's decode), so
// that the pieces printed, joined, are exactly the replaced text of all the bytes.
#include <string>
#include <string_view>

namespace workbench {

class Utf8Stream {
 public:
  /// Appends `bytes` and returns the text that can be printed now: everything but a trailing
  /// prefix of a character that the next bytes could still complete.
  std::string push(std::string_view bytes);

  /// The rest, at the end of the text: a character left incomplete becomes one U+FFFD.
  std::string finish();

  /// The bytes waiting for the rest of their character (at most 3).
  const std::string& pending() const { return pending_; }

 private:
  std::string pending_;
};

/// `bytes` as UTF-8 with each maximal invalid subpart replaced by U+FFFD. With `final` false, a
/// trailing incomplete character is not replaced but left out, and `*kept` (if given) says where
/// it starts; with `final` true, it is replaced and *kept is bytes.size().
std::string replace_invalid_utf8(std::string_view bytes, bool final = true,
                                 std::size_t* kept = nullptr);

}  // namespace workbench
