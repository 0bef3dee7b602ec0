#pragma once
// Greedy copying on lab 10's task, measured: a model is given each held-out sequence up to the
// first token of its second copy (nothing announces that token) and generates the rest of the copy
// one token at a time from its own output, as `workbook generate` does. The score counts the
// generated tokens that equal the copy, split by whether the tokens before the second copy are all
// distinct. When one of them occurs twice, a head that matches one token of context finds two
// earlier occurrences of it and may copy the token after the wrong one. Header-only, with the model
// passed in as a function, so that the verify program runs it on the learner's model_forward and
// the tests on a model written by hand.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "minimodel/model/tiny_transformer.hpp"

namespace workbench {

/// The model measured: the token it puts after `context` (greedy: the argmax of its logits).
using NextToken = std::function<std::size_t(const std::vector<std::size_t>& context)>;

/// The generated tokens of one kind of sequence: how many sequences, how many tokens were
/// generated (n − 1 for a segment of n), and how many of them equal the copy.
struct CopyScore {
  std::size_t sequences = 0, tokens = 0, right = 0;
  double accuracy() const { return tokens ? double(right) / double(tokens) : 0.0; }
};

/// A sequence's first wrong token: the model put `generated` at `position` where the copy has
/// `expected`. `matched` is the token before it (the one an induction head looks up) and `earlier`
/// every position before the second copy that holds it: two or more, and the head had to choose.
struct CopyError {
  std::size_t sequence = 0, position = 0, expected = 0, generated = 0, matched = 0;
  std::vector<std::size_t> earlier;
};

/// The two kinds; per sequence, in the batch's order, how many of its generated tokens are right;
/// and the first error of each sequence that has one.
struct CopyAccuracy {
  CopyScore distinct, repeated;
  std::vector<std::size_t> right;
  std::vector<CopyError> errors;
};

/// True if the `sequence.size() − segment` tokens before the second copy are all distinct.
/// @throws std::invalid_argument if the segment is 0 or longer than half the sequence.
inline bool distinct_before_copy(const std::vector<std::size_t>& sequence, std::size_t segment) {
  if (segment == 0 || 2 * segment > sequence.size())
    throw std::invalid_argument("distinct_before_copy: a segment of " + std::to_string(segment) +
                                " tokens in a sequence of " + std::to_string(sequence.size()) +
                                "; it must be 1 to half the sequence");
  std::vector<std::size_t> before(sequence.begin(), sequence.end() - std::ptrdiff_t(segment));
  std::sort(before.begin(), before.end());
  return std::adjacent_find(before.begin(), before.end()) == before.end();
}

/// Greedy copy accuracy: for each sequence of `batch` (second copy at T − n), the prompt is its
/// first T − n + 1 tokens; next_token continues it n − 1 times, each time fed the prompt and every
/// token it generated so far. Each generated token is compared with the copy at its position.
/// @throws std::invalid_argument if the batch is empty, its tokens and segments differ in number,
///         a segment is 0 or longer than half its sequence, or a sequence's second copy does not
///         repeat the n tokens before it.
inline CopyAccuracy copy_accuracy(const minimodel::CopyBatch& batch, const NextToken& next_token) {
  if (batch.tokens.empty() || batch.tokens.size() != batch.segment.size())
    throw std::invalid_argument("copy_accuracy: " + std::to_string(batch.tokens.size()) +
                                " sequences and " + std::to_string(batch.segment.size()) +
                                " segments; they must be as many, and at least one");
  CopyAccuracy result;
  for (std::size_t b = 0; b < batch.tokens.size(); ++b) {
    const std::vector<std::size_t>& sequence = batch.tokens[b];
    const std::size_t n = batch.segment[b], T = sequence.size();
    const bool distinct = distinct_before_copy(sequence, n);  // also checks n
    for (std::size_t t = T - n; t < T; ++t)
      if (sequence[t] != sequence[t - n])
        throw std::invalid_argument("copy_accuracy: sequence " + std::to_string(b) + " has token " +
                                    std::to_string(sequence[t]) + " at " + std::to_string(t) +
                                    " but " + std::to_string(sequence[t - n]) + " at " +
                                    std::to_string(t - n) + ": not a segment of " +
                                    std::to_string(n) + " repeated");
    CopyScore& score = distinct ? result.distinct : result.repeated;
    ++score.sequences;
    std::vector<std::size_t> context(sequence.begin(), sequence.end() - std::ptrdiff_t(n) + 1);
    result.right.push_back(0);
    bool erred = false;
    for (std::size_t t = T - n + 1; t < T; ++t) {
      const std::size_t token = next_token(context);
      ++score.tokens;
      if (token == sequence[t]) {
        ++score.right, ++result.right.back();
      } else if (!erred) {
        erred = true;
        CopyError error{b, t, sequence[t], token, context.back(), {}};
        for (std::size_t j = 0; j < T - n; ++j)
          if (sequence[j] == error.matched) error.earlier.push_back(j);
        result.errors.push_back(error);
      }
      context.push_back(token);
    }
  }
  return result;
}

/// Held-out sequences for copy_accuracy: copy_task's sequences, drawn one at a time from `rng`,
/// keeping the first `per_kind` of each segment length (length / 4 … length / 2) and each kind
/// (distinct_before_copy or not), so that both kinds have the same mix of segment lengths.
/// Sequences of distinct tokens are rare (about 1 in 140 for 24 tokens of 64), so most draws are
/// dropped.
/// @throws std::invalid_argument if per_kind is 0, length < 4, or the vocabulary is too small for
///         length − length / 4 distinct tokens.
inline minimodel::CopyBatch balanced_copy_sequences(std::size_t per_kind, std::size_t length,
                                                    std::size_t vocab, std::mt19937_64& rng) {
  if (per_kind == 0 || length < 4 || vocab < length - length / 4)
    throw std::invalid_argument(
        "balanced_copy_sequences: " + std::to_string(per_kind) + " per kind, sequences of " +
        std::to_string(length) + " tokens and a vocabulary of " + std::to_string(vocab) +
        "; it needs one or more per kind, 4 tokens or more and " +
        std::to_string(length - length / 4) + " distinct tokens before the longest second copy");
  const std::size_t shortest = length / 4, lengths = length / 2 - shortest + 1;
  std::vector<std::size_t> kept(2 * lengths, 0);  // [2 · (n − shortest) + repeated]
  minimodel::CopyBatch balanced;
  for (std::size_t missing = kept.size() * per_kind; missing > 0;) {
    minimodel::CopyBatch one = minimodel::copy_task(1, length, vocab, rng);
    const std::size_t n = one.segment[0];
    std::size_t& count =
        kept[2 * (n - shortest) + (distinct_before_copy(one.tokens[0], n) ? 0 : 1)];
    if (count == per_kind) continue;
    ++count, --missing;
    balanced.tokens.push_back(one.tokens[0]);
    balanced.segment.push_back(n);
  }
  return balanced;
}

}  // namespace workbench
