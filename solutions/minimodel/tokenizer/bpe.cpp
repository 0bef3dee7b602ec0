// Lab 12: byte-level BPE. Read labs/12-tokens.md first. The API is in bpe.hpp.
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

const CompiledPattern& gpt2_pattern() {
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

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

void append_utf8(std::string& out, char32_t c) {
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

Utf8Prefix utf8_prefix(std::string_view s, std::size_t i) {
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
  for (const std::string& token : special_tokens)
    if (token.empty())
      throw std::invalid_argument("split_on_special_tokens: a special token is empty");
  std::vector<TextPiece> pieces;
  // next[i]: where special token i next occurs at or after `pos` (npos: nowhere).
  std::vector<std::size_t> next(special_tokens.size());
  for (std::size_t i = 0; i < special_tokens.size(); ++i) next[i] = text.find(special_tokens[i]);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t start = std::string_view::npos, length = 0;
    for (std::size_t i = 0; i < special_tokens.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < pos)
        next[i] = text.find(special_tokens[i], pos);
      if (next[i] < start || (next[i] == start && next[i] != std::string_view::npos &&
                              special_tokens[i].size() > length)) {
        start = next[i];
        length = special_tokens[i].size();
      }
    }
    if (start == std::string_view::npos) break;
    if (start > pos) pieces.push_back({text.substr(pos, start - pos), false});
    pieces.push_back({text.substr(start, length), true});
    pos = start + length;
  }
  if (pos < text.size()) pieces.push_back({text.substr(pos), false});
  return pieces;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  const CompiledPattern& pattern = gpt2_pattern();
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(pattern.code, nullptr));
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::string_view> pretokens;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(pattern.code, subject, text.size(), pos, 0, match.get(), nullptr);
    std::size_t start = text.size(), end = text.size();
    if (rc >= 0) {
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
      start = ovector[0];
      end = ovector[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      throw std::runtime_error("pretokenize: PCRE2 error " + std::to_string(rc));
    }
    if (start > pos) pretokens.push_back(text.substr(pos, start - pos));  // bytes no rule matched
    if (end > start) pretokens.push_back(text.substr(start, end - start));
    pos = end;
  }
  return pretokens;
}

// ---- Block B: training --------------------------------------------------------------------------

std::unordered_map<std::string, std::int64_t> count_pretokens(
    std::string_view text, const std::vector<std::string>& special_tokens) {
  std::unordered_map<std::string, std::int64_t> counts;
  for (const TextPiece& piece : split_on_special_tokens(text, special_tokens)) {
    if (piece.special) continue;  // a document boundary, never part of a merge
    for (std::string_view pretoken : pretokenize(piece.text)) ++counts[std::string(pretoken)];
  }
  return counts;
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
  BpeTraining state;
  for (int b = 0; b < 256; ++b) state.vocab.emplace_back(1, char(b));
  for (const auto& [pretoken, count] : pretoken_counts) {
    std::vector<TokenId> word;
    for (const char c : pretoken) word.push_back(static_cast<unsigned char>(c));
    const std::size_t w = state.words.size();
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      state.pair_counts[{word[i], word[i + 1]}] += count;
      state.pair_words[{word[i], word[i + 1]}].insert(w);
    }
    state.words.push_back(std::move(word));
    state.word_counts.push_back(count);
  }
  return state;
}

TokenPair most_frequent_pair(const BpeTraining& state) {
  if (state.pair_counts.empty())
    throw std::invalid_argument("most_frequent_pair: there are no pairs left to merge");
  const auto greater = [&](const TokenPair& a, std::int64_t count_a, const TokenPair& b,
                           std::int64_t count_b) {
    if (count_a != count_b) return count_a > count_b;
    // Ties: the greater pair of byte strings (GPT-2, CS336), left token first.
    const std::string& a_left = state.vocab[a.first];
    const std::string& b_left = state.vocab[b.first];
    if (a_left != b_left) return a_left > b_left;
    return state.vocab[a.second] > state.vocab[b.second];
  };
  auto best = state.pair_counts.begin();
  for (auto it = std::next(best); it != state.pair_counts.end(); ++it)
    if (greater(it->first, it->second, best->first, best->second)) best = it;
  return best->first;
}

TokenId merge_pair(BpeTraining& state, TokenPair pair) {
  const auto token = static_cast<TokenId>(state.vocab.size());
  state.vocab.push_back(state.vocab.at(pair.first) + state.vocab.at(pair.second));
  state.merges.emplace_back(state.vocab[pair.first], state.vocab[pair.second]);
  const auto holders = state.pair_words.find(pair);
  if (holders == state.pair_words.end()) return token;
  const std::vector<std::size_t> words(holders->second.begin(), holders->second.end());
  for (const std::size_t w : words) {
    std::vector<TokenId>& word = state.words[w];
    const std::int64_t count = state.word_counts[w];
    // The new word: the pair merged wherever it occurs, left to right.
    std::vector<TokenId> merged;
    merged.reserve(word.size());
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
        merged.push_back(token);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    if (merged.size() == word.size()) continue;  // the index is stale: the pair left this word
    // Incremental counts: this word's old pairs out, its new pairs in.
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = state.pair_counts.find({word[i], word[i + 1]});
      if ((it->second -= count) == 0) state.pair_counts.erase(it);
    }
    for (std::size_t i = 0; i + 1 < merged.size(); ++i) {
      state.pair_counts[{merged[i], merged[i + 1]}] += count;
      state.pair_words[{merged[i], merged[i + 1]}].insert(w);
    }
    word = std::move(merged);
  }
  state.pair_words.erase(pair);  // merged everywhere: no word holds it any more
  return token;
}

Bpe train_bpe(std::string_view text, std::size_t vocab_size,
              const std::vector<std::string>& special_tokens) {
  if (vocab_size < 256 + special_tokens.size())
    throw std::invalid_argument("train_bpe: vocab_size " + std::to_string(vocab_size) +
                                " is below the 256 bytes plus " +
                                std::to_string(special_tokens.size()) + " special tokens");
  BpeTraining state = start_training(count_pretokens(text, special_tokens));
  while (state.vocab.size() + special_tokens.size() < vocab_size && !state.pair_counts.empty())
    merge_pair(state, most_frequent_pair(state));
  Bpe bpe{std::move(state.vocab), std::move(state.merges), special_tokens};
  bpe.vocab.insert(bpe.vocab.end(), special_tokens.begin(), special_tokens.end());
  return bpe;
}

std::string gpt2_spelling(std::string_view bytes) {
  const ByteTable& table = byte_table();
  std::string spelling;
  for (const char c : bytes) append_utf8(spelling, table.to_char[static_cast<unsigned char>(c)]);
  return spelling;
}

std::string gpt2_bytes(std::string_view spelling) {
  const ByteTable& table = byte_table();
  std::string bytes;
  for (std::size_t i = 0; i < spelling.size();) {
    const Utf8Prefix prefix = utf8_prefix(spelling, i);
    char32_t c = 0;
    if (prefix.complete) {
      const auto lead = static_cast<unsigned char>(spelling[i]);
      c = prefix.length == 1 ? lead : lead & (0x7F >> prefix.length);
      for (std::size_t k = 1; k < prefix.length; ++k)
        c = (c << 6) | (static_cast<unsigned char>(spelling[i + k]) & 0x3F);
    }
    if (!prefix.complete || c >= table.to_byte.size() || table.to_byte[c] < 0)
      throw std::invalid_argument("gpt2_bytes: '" + std::string(spelling) +
                                  "' holds a character that is not in GPT-2's byte table");
    bytes.push_back(char(table.to_byte[c]));
    i += prefix.length;
  }
  return bytes;
}

std::string to_vocab_json(const Bpe& bpe) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  const std::size_t first_special = bpe.vocab.size() - bpe.special_tokens.size();
  for (std::size_t id = 0; id < bpe.vocab.size(); ++id) {
    const bool special = std::find(bpe.special_tokens.begin(), bpe.special_tokens.end(),
                                   bpe.vocab[id]) != bpe.special_tokens.end() &&
                         id >= first_special;
    vocab[special ? bpe.vocab[id] : gpt2_spelling(bpe.vocab[id])] = id;
  }
  return vocab.dump(2) + "\n";
}

std::string to_merges_txt(const Bpe& bpe) {
  std::string text = "#version: 0.2\n";
  for (const auto& [left, right] : bpe.merges)
    text += gpt2_spelling(left) + " " + gpt2_spelling(right) + "\n";
  return text;
}

Bpe bpe_from_files(std::string_view vocab_json, std::string_view merges_txt,
                   const std::vector<std::string>& special_tokens) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("bpe_from_files: vocab.json is not JSON: ") + e.what());
  }
  if (!json.is_object())
    throw std::invalid_argument("bpe_from_files: vocab.json is not an object {token: id}");
  Bpe bpe;
  bpe.special_tokens = special_tokens;
  std::vector<bool> seen(json.size(), false);
  bpe.vocab.resize(json.size());
  for (const auto& [spelling, value] : json.items()) {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() >= std::int64_t(json.size()) || seen[value.get<std::size_t>()])
      throw std::invalid_argument("bpe_from_files: vocab.json gives '" + spelling + "' the id " +
                                  value.dump() + ": the ids must be 0 to " +
                                  std::to_string(json.size() - 1) + ", each once");
    const auto id = value.get<std::size_t>();
    seen[id] = true;
    const bool special =
        std::find(special_tokens.begin(), special_tokens.end(), spelling) != special_tokens.end();
    bpe.vocab[id] = special ? spelling : gpt2_bytes(spelling);
  }
  for (const std::string& token : special_tokens)
    if (!json.contains(token))
      throw std::invalid_argument("bpe_from_files: the special token '" + token +
                                  "' is not in vocab.json");
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < merges_txt.size();) {
    std::size_t end = merges_txt.find('\n', start);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.substr(0, 8) == "#version") continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      throw std::invalid_argument("bpe_from_files: merges.txt line " + std::to_string(line_number) +
                                  " is not 'left right': '" + std::string(line) + "'");
    bpe.merges.emplace_back(gpt2_bytes(line.substr(0, space)), gpt2_bytes(line.substr(space + 1)));
  }
  BpeEncoder check(bpe);  // every byte and every merge's parts and result are in the vocabulary
  return bpe;
}

// ---- Block C: encoding and decoding -------------------------------------------------------------

BpeEncoder::BpeEncoder(Bpe bpe) : bpe_(std::move(bpe)) {
  std::unordered_map<std::string, TokenId> ids;
  for (std::size_t id = 0; id < bpe_.vocab.size(); ++id) ids.emplace(bpe_.vocab[id], TokenId(id));
  const auto id_of = [&](const std::string& bytes, const char* what) {
    const auto it = ids.find(bytes);
    if (it == ids.end())
      throw std::invalid_argument(std::string("BpeEncoder: ") + what + " '" + gpt2_spelling(bytes) +
                                  "' is not in the vocabulary");
    return it->second;
  };
  for (int b = 0; b < 256; ++b) byte_ids_[b] = id_of(std::string(1, char(b)), "the byte");
  for (std::size_t rank = 0; rank < bpe_.merges.size(); ++rank) {
    const auto& [left, right] = bpe_.merges[rank];
    const TokenPair pair{id_of(left, "a merge's left part"), id_of(right, "a merge's right part")};
    ranks_.emplace(pair, std::make_pair(rank, id_of(left + right, "a merge's result")));
  }
  for (const std::string& token : bpe_.special_tokens)
    special_ids_[token] = id_of(token, "the special token");
}

std::vector<TokenId> BpeEncoder::encode_pretoken(std::string_view pretoken) {
  std::string key(pretoken);
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  std::vector<TokenId> word;
  for (const char c : pretoken) word.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  while (word.size() > 1) {
    // The adjacent pair of lowest rank, then every occurrence of it, left to right (GPT-2's bpe()).
    std::size_t best_rank = std::numeric_limits<std::size_t>::max();
    TokenPair best{};
    TokenId merged_id = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks_.find({word[i], word[i + 1]});
      if (it != ranks_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best = it->first;
        merged_id = it->second.second;
      }
    }
    if (best_rank == std::numeric_limits<std::size_t>::max()) break;
    std::vector<TokenId> merged;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && TokenPair{word[i], word[i + 1]} == best) {
        merged.push_back(merged_id);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word = std::move(merged);
  }
  if (cache_.size() >= (std::size_t{1} << 18)) cache_.clear();  // bounded memory on any input
  cache_.emplace(std::move(key), word);
  return word;
}

std::vector<TokenId> BpeEncoder::encode(std::string_view text) {
  std::vector<TokenId> ids;
  for (const TextPiece& piece : split_on_special_tokens(text, bpe_.special_tokens)) {
    if (piece.special) {
      ids.push_back(special_ids_.at(std::string(piece.text)));
      continue;
    }
    for (std::string_view pretoken : pretokenize(piece.text)) {
      const std::vector<TokenId> tokens = encode_pretoken(pretoken);
      ids.insert(ids.end(), tokens.begin(), tokens.end());
    }
  }
  return ids;
}

namespace {

// Where `buffer` may be cut so that its two sides encode as the whole does: just after a newline
// that has a printable ASCII character on each side (no pre-token holds a newline and anything but
// whitespace, and the whitespace run is this one newline either way), and not inside a special
// token. 0 if there is no such place at or after `looked` (the places before it were looked at).
std::size_t last_safe_cut(const std::string& buffer, std::size_t looked,
                          const std::vector<std::string>& specials) {
  const auto printable = [](char c) { return c > ' ' && c < 0x7F; };
  for (std::size_t i = buffer.size() - 1;
       i >= std::max<std::size_t>(looked, 2) && i != std::string::npos; --i) {
    const std::size_t nl = i - 1;
    if (buffer[nl] != '\n' || !printable(buffer[nl - 1]) || !printable(buffer[i])) continue;
    bool inside_special = false;
    for (const std::string& token : specials) {
      const std::size_t from = i >= token.size() ? i - token.size() + 1 : 0;
      for (std::size_t q = from; q < i && !inside_special; ++q)
        inside_special = buffer.compare(q, token.size(), token) == 0;
    }
    if (!inside_special) return i;
  }
  return 0;
}

}  // namespace

void BpeEncoder::encode_stream(std::istream& in,
                               const std::function<void(const std::vector<TokenId>&)>& sink,
                               std::size_t chunk_bytes) {
  if (chunk_bytes == 0) throw std::invalid_argument("BpeEncoder::encode_stream: chunk_bytes is 0");
  std::string buffer, block(chunk_bytes, '\0');
  std::size_t looked = 0;  // buffer[0, looked) holds no safe cut: each byte is looked at once
  while (in) {
    in.read(block.data(), std::streamsize(chunk_bytes));
    buffer.append(block.data(), std::size_t(in.gcount()));
    if (buffer.size() < chunk_bytes) continue;
    const std::size_t cut = last_safe_cut(buffer, looked, bpe_.special_tokens);
    if (cut > 0) {
      sink(encode(std::string_view(buffer).substr(0, cut)));
      buffer.erase(0, cut);
    }
    looked = buffer.size();  // no safe place after the cut (or at all): read on
  }
  if (!buffer.empty()) sink(encode(buffer));
}

std::string BpeEncoder::decode_bytes(const std::vector<TokenId>& ids) const {
  std::string bytes;
  for (const TokenId id : ids) {
    if (id < 0 || std::size_t(id) >= bpe_.vocab.size())
      throw std::out_of_range("BpeEncoder::decode_bytes: token id " + std::to_string(id) +
                              " is not in the vocabulary of " + std::to_string(bpe_.vocab.size()) +
                              " tokens");
    bytes += bpe_.vocab[std::size_t(id)];
  }
  return bytes;
}

std::string BpeEncoder::decode(const std::vector<TokenId>& ids) const {
  return utf8_replace_invalid(decode_bytes(ids));
}

std::string utf8_replace_invalid(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string text;
  text.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Prefix prefix = utf8_prefix(bytes, i);
    if (prefix.complete) {
      text.append(bytes.substr(i, prefix.length));
      i += prefix.length;
    } else {  // one U+FFFD for the maximal subpart, or for the one byte that starts nothing
      text.append(kReplacement);
      i += std::max<std::size_t>(prefix.length, 1);
    }
  }
  return text;
}

}  // namespace minimodel
