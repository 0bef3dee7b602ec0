// Lab 12: byte-level BPE. Read labs/12-tokens.md first. The API is in bpe.hpp. The helpers in the
// unnamed namespaces are given: GPT-2's pattern compiled with PCRE2, its byte table, UTF-8 writing.
#include "minimodel/tokenizer/bpe.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "minimodel/todo.hpp"

namespace minimodel {
namespace {

// ---- Block A helpers ----------------------------------------------------------------------------

// GPT-2's pattern, compiled once (with PCRE2's JIT where it is available). MATCH_INVALID_UTF: bytes
// that are not UTF-8 are skipped by the matcher instead of failing the match.
struct CompiledPattern {
  pcre2_code* code = nullptr;
  CompiledPattern() {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern.data()), kGpt2Pattern.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::logic_error("pretokenize: GPT-2's pattern does not compile at " +
                             std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without a JIT, the interpreter matches
  }
  ~CompiledPattern() { pcre2_code_free(code); }
};

[[maybe_unused]] const CompiledPattern& gpt2_pattern() {
  static const CompiledPattern pattern;
  return pattern;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// ---- Block B helpers ----------------------------------------------------------------------------

// GPT-2's byte-to-unicode table: byte -> code point, and code point (< 324) -> byte.
struct ByteTable {
  std::array<char32_t, 256> to_char{};
  std::array<int, 512> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? char32_t(b) : char32_t(256 + extra++);
      to_byte[to_char[b]] = b;
    }
  }
};

[[maybe_unused]] const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

[[maybe_unused]] void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

// The length of the longest prefix of s[i..] that starts a well-formed UTF-8 character (Unicode's
// table 3-7), and whether it is a whole character. A byte that starts none has length 0.
struct Utf8Prefix {
  std::size_t length = 0;
  bool complete = false;
};

[[maybe_unused]] Utf8Prefix utf8_prefix(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {1, true};
  std::size_t need = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) low = 0x90;   // no overlong forms
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {0, false};  // a continuation byte, C0, C1 or F5-FF
  }
  std::size_t length = 1;
  for (std::size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {length, false};
    const unsigned char c = byte(i + k);
    const unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
    if (c < lo || c > hi) return {length, false};
    ++length;
  }
  return {length, true};
}

}  // namespace

// ---- Block A: bytes and pre-tokens --------------------------------------------------------------

std::vector<TextPiece> split_on_special_tokens(std::string_view text,
                                               const std::vector<std::string>& special_tokens) {
  // TODO(lab 12, Block A): cut the text at each special token, left to right, the longest where two
  // start at the same place — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block A): cut the text at each special token, left to right, the longest where "
      "two start at the same place — see labs/12-tokens.md");
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  // TODO(lab 12, Block A): match GPT-2's pattern with PCRE2 from the end of each match, keeping
  // bytes no rule matched as pre-tokens of their own — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block A): match GPT-2's pattern with PCRE2 from the end of each match, keeping "
      "bytes no rule matched as pre-tokens of their own — see labs/12-tokens.md");
}

// ---- Block B: training --------------------------------------------------------------------------

std::unordered_map<std::string, std::int64_t> count_pretokens(
    std::string_view text, const std::vector<std::string>& special_tokens) {
  // TODO(lab 12, Block B): split on the special tokens and count each pre-token of the ordinary
  // pieces — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): split on the special tokens and count each pre-token of the ordinary "
      "pieces — see labs/12-tokens.md");
}

PairCounts count_pairs(const std::vector<std::vector<TokenId>>& words,
                       const std::vector<std::int64_t>& word_counts) {
  PairCounts counts;
  for (std::size_t w = 0; w < words.size(); ++w)
    for (std::size_t i = 0; i + 1 < words[w].size(); ++i)
      counts[{words[w][i], words[w][i + 1]}] += word_counts[w];
  return counts;
}

BpeTraining start_training(const std::unordered_map<std::string, std::int64_t>& pretoken_counts) {
  // TODO(lab 12, Block B): every pre-token as its bytes, the counts of its adjacent pairs and the
  // index from each pair to its words — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): every pre-token as its bytes, the counts of its adjacent pairs and "
      "the index from each pair to its words — see labs/12-tokens.md");
}

TokenPair most_frequent_pair(const BpeTraining& state) {
  // TODO(lab 12, Block B): the pair with the highest count; on a tie the greater (left bytes, right
  // bytes) — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): the pair with the highest count; on a tie the greater (left bytes, "
      "right bytes) — see labs/12-tokens.md");
}

TokenId merge_pair(BpeTraining& state, TokenPair pair) {
  // TODO(lab 12, Block B): add the merged token, merge the pair left to right in the words the
  // index names, and update the counts of the words that changed only — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): add the merged token, merge the pair left to right in the words the "
      "index names, and update the counts of the words that changed only — see labs/12-tokens.md");
}

Bpe train_bpe(std::string_view text, std::size_t vocab_size,
              const std::vector<std::string>& special_tokens) {
  // TODO(lab 12, Block B): count pre-tokens, start training, merge the most frequent pair until the
  // vocabulary is full, then add the special tokens — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): count pre-tokens, start training, merge the most frequent pair until "
      "the vocabulary is full, then add the special tokens — see labs/12-tokens.md");
}

std::string gpt2_spelling(std::string_view bytes) {
  // TODO(lab 12, Block B): each byte as its character in GPT-2's table (byte_table()), written as
  // UTF-8 — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): each byte as its character in GPT-2's table (byte_table()), written "
      "as UTF-8 — see labs/12-tokens.md");
}

std::string gpt2_bytes(std::string_view spelling) {
  // TODO(lab 12, Block B): each character back to its byte, rejecting one that is not in the table:
  // decode each UTF-8 character (utf8_prefix) to its code point; one ≥ 512 or with `to_byte` −1 is
  // not in the table — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): each character back to its byte, rejecting one that is not in the "
      "table: decode each UTF-8 character (utf8_prefix) to its code point; one ≥ 512 or with "
      "`to_byte` −1 is not in the table — see labs/12-tokens.md");
}

std::string to_vocab_json(const Bpe& bpe) {
  // TODO(lab 12, Block B): GPT-2's vocab.json: {spelling: id}, special tokens spelled as themselves
  // — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): GPT-2's vocab.json: {spelling: id}, special tokens spelled as "
      "themselves — see labs/12-tokens.md");
}

std::string to_merges_txt(const Bpe& bpe) {
  // TODO(lab 12, Block B): GPT-2's merges.txt: a #version line, then 'left right' per merge,
  // spelled — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): GPT-2's merges.txt: a #version line, then 'left right' per merge, "
      "spelled — see labs/12-tokens.md");
}

Bpe bpe_from_files(std::string_view vocab_json, std::string_view merges_txt,
                   const std::vector<std::string>& special_tokens) {
  // TODO(lab 12, Block B): read vocab.json and merges.txt back, checking ids, lines and special
  // tokens — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block B): read vocab.json and merges.txt back, checking ids, lines and special "
      "tokens — see labs/12-tokens.md");
}

// ---- Block C: encoding and decoding -------------------------------------------------------------

BpeEncoder::BpeEncoder(Bpe bpe) : bpe_(std::move(bpe)) {
  // TODO(lab 12, Block C): the id of each byte, each merge's rank and result, each special token's
  // id — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): the id of each byte, each merge's rank and result, each special "
      "token's id — see labs/12-tokens.md");
}

std::vector<TokenId> BpeEncoder::encode_pretoken(std::string_view pretoken) {
  // TODO(lab 12, Block C): a pre-token's bytes, then merge the pair of lowest rank until none has a
  // rank; cache the result — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): a pre-token's bytes, then merge the pair of lowest rank until none "
      "has a rank; cache the result — see labs/12-tokens.md");
}

std::vector<TokenId> BpeEncoder::encode(std::string_view text) {
  // TODO(lab 12, Block C): special tokens to their ids, every pre-token of the rest through
  // encode_pretoken — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): special tokens to their ids, every pre-token of the rest through "
      "encode_pretoken — see labs/12-tokens.md");
}

void BpeEncoder::encode_stream(std::istream& in,
                               const std::function<void(const std::vector<TokenId>&)>& sink,
                               std::size_t chunk_bytes) {
  // TODO(lab 12, Block C): read chunks, encode up to the last safe cut, keep the rest for the next
  // chunk — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): read chunks, encode up to the last safe cut, keep the rest for the "
      "next chunk — see labs/12-tokens.md");
}

std::string BpeEncoder::decode_bytes(const std::vector<TokenId>& ids) const {
  // TODO(lab 12, Block C): concatenate the tokens' bytes, rejecting an unknown id — see
  // labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): concatenate the tokens' bytes, rejecting an unknown id — see "
      "labs/12-tokens.md");
}

std::string BpeEncoder::decode(const std::vector<TokenId>& ids) const {
  // TODO(lab 12, Block C): decode_bytes, then replace invalid UTF-8 — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): decode_bytes, then replace invalid UTF-8 — see labs/12-tokens.md");
}

std::string utf8_replace_invalid(std::string_view bytes) {
  // TODO(lab 12, Block C): copy each well-formed UTF-8 character, one U+FFFD for each maximal
  // invalid subpart — see labs/12-tokens.md
  throw Todo(
      "TODO(lab 12, Block C): copy each well-formed UTF-8 character, one U+FFFD for each maximal "
      "invalid subpart — see labs/12-tokens.md");
}

}  // namespace minimodel
