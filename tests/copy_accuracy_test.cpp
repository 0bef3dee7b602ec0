// Greedy copy accuracy on lab 10's task (workbench/generate/copy_accuracy.hpp), measured on models
// written by hand whose every output is known: a one-token induction head in its two simplest
// forms, copying the token after the first, or after the latest, earlier occurrence of the last
// token.
#include <cstddef>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "generate/copy_accuracy.hpp"
#include "support/checks.hpp"

namespace workbench {
namespace {

using minimodel::testing::throws_invalid_argument;
using Tokens = std::vector<std::size_t>;

// The token after the first (or the latest) earlier occurrence of the context's last token; 0 if
// there is none.
std::size_t after_first(const Tokens& context) {
  for (std::size_t j = 0; j + 1 < context.size(); ++j)
    if (context[j] == context.back()) return context[j + 1];
  return 0;
}
std::size_t after_latest(const Tokens& context) {
  for (std::size_t j = context.size() - 1; j-- > 0;)
    if (context[j] == context.back()) return context[j + 1];
  return 0;
}

// 5 | 0 7 2 | 0 7 2: the four tokens before the second copy are distinct.
const Tokens kDistinct = {5, 0, 7, 2, 0, 7, 2};
// 6 | 4 1 2 1 3 | 4 1 2 1 3: token 1 stands twice before the second copy, at 2 and 4.
const Tokens kRepeated = {6, 4, 1, 2, 1, 3, 4, 1, 2, 1, 3};

TEST(DistinctBeforeCopy, LooksAtEveryTokenBeforeTheSecondCopyOnly) {
  EXPECT_TRUE(distinct_before_copy(kDistinct, 3));
  EXPECT_FALSE(distinct_before_copy(kRepeated, 5));
  EXPECT_TRUE(distinct_before_copy({1, 2, 3, 1, 2, 3}, 3));  // the copy itself repeats, of course
  EXPECT_FALSE(distinct_before_copy({3, 9, 3, 1, 2, 1, 2}, 2));  // in the random part
  EXPECT_TRUE(
      throws_invalid_argument([] { distinct_before_copy(kDistinct, 0); }, {"segment of 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { distinct_before_copy(kDistinct, 4); },
                                      {"segment of 4 tokens in a sequence of 7"}));
}

TEST(CopyAccuracy, CountsTheGeneratedTokensThatEqualTheCopyByKind) {
  // after_first on kRepeated, prompt 6 4 1 2 1 3 4: 4 -> 1, 1 -> 2, 2 -> 1 (all right), then 1 ->
  // 2 again where the copy has 3: the first 1 is the wrong one to copy after. kDistinct: 0 -> 7,
  // 7 -> 2, both right.
  const CopyAccuracy score = copy_accuracy({{kDistinct, kRepeated}, {3, 5}}, after_first);
  EXPECT_EQ(score.distinct.sequences, 1u);
  EXPECT_EQ(score.distinct.tokens, 2u);
  EXPECT_EQ(score.distinct.right, 2u);
  EXPECT_EQ(score.repeated.sequences, 1u);
  EXPECT_EQ(score.repeated.tokens, 4u);
  EXPECT_EQ(score.repeated.right, 3u);
  EXPECT_DOUBLE_EQ(score.repeated.accuracy(), 0.75);
  EXPECT_EQ(score.right, (Tokens{2, 3}));
  ASSERT_EQ(score.errors.size(), 1u);
  const CopyError& error = score.errors[0];
  EXPECT_EQ(error.sequence, 1u);
  EXPECT_EQ(error.position, 10u);
  EXPECT_EQ(error.expected, 3u);
  EXPECT_EQ(error.generated, 2u);
  EXPECT_EQ(error.matched, 1u);
  EXPECT_EQ(error.earlier, (Tokens{2, 4}));
}

TEST(CopyAccuracy, FeedsTheModelItsOwnTokensNotTheCopy) {
  // after_latest on kRepeated: 4 -> 1 (right); 1 -> 3, after the 1 at 4 (wrong: 2); then it sees
  // its own 3 and goes on 3 -> 4, 4 -> 1, wrong twice more. Fed the true copy instead, its third
  // token would be right (2 -> 1).
  std::vector<Tokens> contexts;
  const CopyAccuracy score = copy_accuracy({{kRepeated}, {5}}, [&](const Tokens& context) {
    contexts.push_back(context);
    return after_latest(context);
  });
  const Tokens prompt = {6, 4, 1, 2, 1, 3, 4};
  std::vector<Tokens> expected = {prompt};
  for (const std::size_t token : {1, 3, 4}) {
    expected.push_back(expected.back());
    expected.back().push_back(token);
  }
  EXPECT_EQ(contexts, expected);
  EXPECT_EQ(score.repeated.right, 1u);
  EXPECT_EQ(score.distinct.sequences, 0u);
  EXPECT_DOUBLE_EQ(score.distinct.accuracy(), 0.0);  // no tokens: 0, not a NaN
  ASSERT_EQ(score.errors.size(), 1u);                // the first error of each sequence only
  EXPECT_EQ(score.errors[0].position, 8u);
  EXPECT_EQ(score.errors[0].generated, 3u);
}

TEST(CopyAccuracy, RejectsBatchesThatAreNotRepeatedSegments) {
  EXPECT_TRUE(throws_invalid_argument([] { copy_accuracy({}, after_first); }, {"0 sequences"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        copy_accuracy({{kDistinct}, {3, 3}}, after_first);
      },
      {"1 sequences and 2 segments"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        copy_accuracy({{kDistinct}, {4}}, after_first);
      },
      {"segment of 4 tokens in a sequence of 7"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        copy_accuracy({{kDistinct}, {2}}, after_first);
      },
      {"not a segment of 2 repeated"}));
}

TEST(BalancedCopySequences, HoldsAsManyOfEachKindAndSegmentLengthAllCopies) {
  std::mt19937_64 rng(7);
  // Sequences of 16 from 16 tokens, segments of 4 to 8: 12 distinct tokens before the shortest
  // segment's copy happen once in 323 draws.
  const minimodel::CopyBatch batch = balanced_copy_sequences(3, 16, 16, rng);
  ASSERT_EQ(batch.tokens.size(), 3u * 5 * 2);
  std::vector<std::size_t> count(2 * 5, 0);
  for (std::size_t b = 0; b < batch.tokens.size(); ++b) {
    const std::size_t n = batch.segment[b];
    ASSERT_GE(n, 4u);
    ASSERT_LE(n, 8u);
    ++count[2 * (n - 4) + (distinct_before_copy(batch.tokens[b], n) ? 0 : 1)];
  }
  EXPECT_EQ(count, std::vector<std::size_t>(10, 3));
  const CopyAccuracy copied = copy_accuracy(batch, after_first);  // checks every copy
  EXPECT_EQ(copied.distinct.right, copied.distinct.tokens) << "one match is all they need";
  EXPECT_EQ(copied.distinct.sequences, copied.repeated.sequences);
  EXPECT_TRUE(throws_invalid_argument([&] { balanced_copy_sequences(1, 16, 11, rng); },
                                      {"12 distinct tokens"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { balanced_copy_sequences(0, 16, 16, rng); }, {"0 per kind"}));
}

}  // namespace
}  // namespace workbench
