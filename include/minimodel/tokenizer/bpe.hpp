#pragma once
// The API of lab 12: GPT-2's byte-level byte-pair encoding (BPE), trained on a corpus, saved and
// loaded in GPT-2's vocab.json / merges.txt formats, and used to encode text into token ids and
// decode them back. Locked by BLUEPRINT.md beside this file.
//
// A token is a string of bytes. The 256 single bytes are tokens 0-255 (token id = byte value);
// each merge adds the token `left + right`, in the order learned; the special tokens come last.
// A vocabulary loaded from files keeps the files' ids instead.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace minimodel {

using TokenId = std::int32_t;

// ---- Block A: bytes and pre-tokens --------------------------------------------------------------

/// A piece of text: either a special token, kept whole, or the ordinary text between two of them.
struct TextPiece {
  std::string_view text;  ///< a view into the text that was split
  bool special = false;
};

/// Block A. Splits `text` at every occurrence of a special token, left to right; where two special
/// tokens start at the same place the longer wins ("<|a|><|b|>" over "<|a|>"). Ordinary pieces
/// are never empty. No special tokens: one ordinary piece (none for an empty text).
/// @throws std::invalid_argument if a special token is empty.
std::vector<TextPiece> split_on_special_tokens(std::string_view text,
                                               const std::vector<std::string>& special_tokens);

/// GPT-2's pre-tokenizer pattern: contractions, an optional space then letters, an optional space
/// then digits, an optional space then other symbols, whitespace that no word follows, whitespace.
inline constexpr std::string_view kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Block A. Splits ordinary text (no special tokens) into GPT-2's pre-tokens with kGpt2Pattern
/// (PCRE2, UTF-8 with Unicode properties). Concatenated, the pre-tokens are `text` again: bytes
/// that are not valid UTF-8, which the pattern cannot match, are pre-tokens of their own.
std::vector<std::string_view> pretokenize(std::string_view text);

// ---- Block B: training
// ---------------------------------------------------------------------------

/// Two adjacent tokens, by id.
using TokenPair = std::pair<TokenId, TokenId>;

struct TokenPairHash {
  std::size_t operator()(const TokenPair& p) const {
    return std::hash<std::uint64_t>()((std::uint64_t(std::uint32_t(p.first)) << 32) |
                                      std::uint32_t(p.second));
  }
};

using PairCounts = std::unordered_map<TokenPair, std::int64_t, TokenPairHash>;

/// Block B. How often each pre-token occurs in `text`: the text is split on the special tokens
/// (which are not counted) and each ordinary piece is pre-tokenized.
std::unordered_map<std::string, std::int64_t> count_pretokens(
    std::string_view text, const std::vector<std::string>& special_tokens);

/// What training keeps between merges.
struct BpeTraining {
  std::vector<std::string> vocab;           ///< token id -> its bytes; 256 bytes, then merges
  std::vector<std::vector<TokenId>> words;  ///< each distinct pre-token, as its current tokens
  std::vector<std::int64_t> word_counts;    ///< how often each word occurs in the corpus
  PairCounts pair_counts;                   ///< adjacent pairs in words, times word counts (> 0)
  std::unordered_map<TokenPair, std::unordered_set<std::size_t>, TokenPairHash>
      pair_words;  ///< pair -> the words it may occur in (an index)
  std::vector<std::pair<std::string, std::string>> merges;  ///< the merges made, in order
};

/// Block B. The state before the first merge: every pre-token as its bytes (tokens 0-255), the
/// counts of their adjacent pairs and the index from each pair to the words holding it.
BpeTraining start_training(const std::unordered_map<std::string, std::int64_t>& pretoken_counts);

/// Block B. Every adjacent pair's count, counted again from the words (what the incremental counts
/// must always equal).
PairCounts count_pairs(const std::vector<std::vector<TokenId>>& words,
                       const std::vector<std::int64_t>& word_counts);

/// Block B. The pair to merge next: the most frequent one; among equally frequent pairs the
/// greatest (left bytes, right bytes), comparing byte strings as std::string does. Requires a
/// non-empty pair_counts.
TokenPair most_frequent_pair(const BpeTraining& state);

/// Block B. Merges `pair` into a new token (appended to vocab and merges) in every word holding it,
/// left to right, and updates pair_counts and pair_words for the words that changed only.
/// Returns the new token's id.
TokenId merge_pair(BpeTraining& state, TokenPair pair);

/// A trained (or loaded) tokenizer: its vocabulary, its merges in rank order, its special tokens.
struct Bpe {
  std::vector<std::string> vocab;  ///< token id -> bytes
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> special_tokens;
};

/// Block B. Trains on `text` until the vocabulary holds `vocab_size` tokens (256 bytes, the merges
/// and the special tokens) or no pair is left. @throws std::invalid_argument if vocab_size is below
/// 256 + the number of special tokens.
Bpe train_bpe(std::string_view text, std::size_t vocab_size,
              const std::vector<std::string>& special_tokens);

/// Block B. GPT-2's byte-to-unicode table: the printable bytes ('!'-'~', '¡'-'¬', '®'-'ÿ') stand
/// for themselves, each other byte b for the character 256 + (its rank among those bytes): the
/// space is "Ġ", the newline "Ċ". Returns the UTF-8 spelling of a token's bytes.
std::string gpt2_spelling(std::string_view bytes);

/// Block B. The inverse of gpt2_spelling. @throws std::invalid_argument naming the spelling and
/// saying it holds a character that is not in GPT-2's "byte table".
std::string gpt2_bytes(std::string_view spelling);

/// Block B. GPT-2's vocab.json: {spelling: id}, special tokens spelled as themselves.
std::string to_vocab_json(const Bpe& bpe);

/// Block B. GPT-2's merges.txt: "#version: 0.2", then one merge a line, "left right", spelled.
std::string to_merges_txt(const Bpe& bpe);

/// Block B. A tokenizer from the texts of a vocab.json and a merges.txt (a "#version" line is
/// skipped), with these special tokens, which must be in the vocabulary.
/// @throws std::invalid_argument whose message names "vocab.json" when it is not an object
/// {token: id} with the ids 0 to n - 1 once each; names a malformed merges.txt line by its number
/// ("line 1"); says a merge's part or result or a byte is "not in the vocabulary" (as BpeEncoder
/// does); or names a special token missing from vocab.json.
Bpe bpe_from_files(std::string_view vocab_json, std::string_view merges_txt,
                   const std::vector<std::string>& special_tokens);

// ---- Block C: encoding and decoding -------------------------------------------------------------

/// Block C. Text to token ids and back, with a tokenizer's vocabulary and merge ranks.
class BpeEncoder {
 public:
  /// @throws std::invalid_argument if a single byte or a merge's part or result is not in the
  /// vocabulary: the message names the token, spelled, and says "not in the vocabulary".
  explicit BpeEncoder(Bpe bpe);

  /// Special tokens become their ids; each pre-token of the ordinary text becomes its bytes, then
  /// the adjacent pair of lowest merge rank is merged, again, until no pair has a rank. Results per
  /// pre-token are cached.
  std::vector<TokenId> encode(std::string_view text);

  /// Encodes a stream in pieces of about `chunk_bytes`, cut only where encoding the pieces apart
  /// gives the tokens of the whole: after a special token, or at a newline between two printable
  /// ASCII characters. Calls `sink` with each piece's tokens; memory stays bounded by the chunk
  /// size unless a stretch of text longer than it has no such place.
  void encode_stream(std::istream& in, const std::function<void(const std::vector<TokenId>&)>& sink,
                     std::size_t chunk_bytes = std::size_t{1} << 20);

  /// The bytes of the tokens, concatenated. @throws std::out_of_range naming an unknown id.
  std::string decode_bytes(const std::vector<TokenId>& ids) const;

  /// decode_bytes as text: invalid UTF-8 replaced as Python's bytes.decode(errors="replace") does.
  std::string decode(const std::vector<TokenId>& ids) const;

  const Bpe& bpe() const { return bpe_; }

 private:
  std::vector<TokenId> encode_pretoken(std::string_view pretoken);

  Bpe bpe_;
  TokenId byte_ids_[256] = {};
  std::unordered_map<TokenPair, std::pair<std::size_t, TokenId>, TokenPairHash> ranks_;
  std::unordered_map<std::string, TokenId> special_ids_;
  std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

/// Block C. `bytes` as UTF-8 text, each maximal invalid subpart replaced by U+FFFD (Unicode's
/// "substitution of maximal subparts", what Python's errors="replace" does).
std::string utf8_replace_invalid(std::string_view bytes);

}  // namespace minimodel
