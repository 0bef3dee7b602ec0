#include "generate/utf8_stream.hpp"

namespace workbench {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The length of a well-formed character starting with `lead` (table 3-7 of The Unicode Standard),
// and the range its second byte must fall in; 0 for a byte that cannot start one.
struct Lead {
  std::size_t length;
  unsigned char second_low, second_high;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // not the surrogates D800-DFFF
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // not above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

std::string replace_invalid_utf8(std::string_view bytes, bool final, std::size_t* kept) {
  std::string text;
  text.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Lead lead = lead_of(static_cast<unsigned char>(bytes[i]));
    if (lead.length == 0) {  // a byte that starts nothing: a subpart of its own
      text += kReplacement;
      ++i;
      continue;
    }
    // The longest prefix of a well-formed character present here.
    std::size_t n = 1;
    while (n < lead.length && i + n < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + n]);
      const bool fits =
          n == 1 ? (b >= lead.second_low && b <= lead.second_high) : (b >= 0x80 && b <= 0xBF);
      if (!fits) break;
      ++n;
    }
    if (n == lead.length) {
      text.append(bytes.substr(i, n));
    } else if (i + n == bytes.size() && !final) {  // the next bytes may complete it
      if (kept) *kept = i;
      return text;
    } else {
      text += kReplacement;
    }
    i += n;
  }
  if (kept) *kept = bytes.size();
  return text;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t kept = 0;
  std::string text = replace_invalid_utf8(pending_, false, &kept);
  pending_.erase(0, kept);
  return text;
}

std::string Utf8Stream::finish() {
  std::string text = replace_invalid_utf8(pending_, true);
  pending_.clear();
  return text;
}

}  // namespace workbench
