// Lab 08: the KV cache, incremental decoding and grouped-query attention, checked against lab 05's
// rope_self_attention and lab 01's layer (full sequences at once), the PyTorch fixtures, and
// invariants of the cache itself.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/attention/kv_cache.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"
#include "tensors/npy_io.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::Fixture;
using testing::kTorchTolerance;
using testing::random_tokens;
using testing::throws_invalid_argument;

// Decoding sums the same products as the full forward in another order (one token's projection
// against the batch's GEMM, a view of the cache against the whole sequence), so float32 rounding
// differs by a few units in the last place of the largest outputs. Those reach |y| = 4 here,
// where one unit is 4.8e-7; so outputs are compared to 1e-6 of their scale, max(1, max |y|):
// 8 units in the last place at any scale.
constexpr double kTolerance = 1e-6;
// all_close(actual, expected, kTolerance), both divided by max(1, max |expected|).
template <class A, class E>
::testing::AssertionResult close_at_scale(const A& actual, const E& expected) {
  const xt::xarray<double> a = actual, e = expected;
  const double scale = std::max(1.0, double(xt::amax(xt::abs(e))()));
  return all_close(a / scale, e / scale, kTolerance) << " (compared at scale " << scale << ")";
}

constexpr float kTheta = 10000.0f;

Tensor2 random_weight(std::size_t rows, std::size_t cols, int seed) {
  return xt::view(random_tokens(1, rows, cols, seed), 0) / std::sqrt(float(rows));
}

// (B, H, T, d_head) draws from N(0, 1).
Tensor4 random_heads(std::size_t B, std::size_t H, std::size_t T, std::size_t d_head, int seed) {
  const Tensor3 rows = random_tokens(B, H * T, d_head, seed);
  return xt::reshape_view(rows, std::array<std::size_t, 4>{B, H, T, d_head});
}

// W_Q, W_K, W_V, W_O for n_heads query heads and n_kv_heads key/value heads.
struct Weights {
  Tensor2 w_q, w_k, w_v, w_o;
};
Weights random_weights(std::size_t d_model, std::size_t n_heads, std::size_t n_kv_heads, int seed) {
  const std::size_t kv_width = n_kv_heads * (d_model / n_heads);
  return {random_weight(d_model, d_model, seed), random_weight(d_model, kv_width, seed + 1),
          random_weight(d_model, kv_width, seed + 2), random_weight(d_model, d_model, seed + 3)};
}

GroupedQueryAttention make_layer(const Weights& w, std::size_t n_heads, std::size_t n_kv_heads,
                                 std::optional<RotaryPositionalEmbedding> rope) {
  return GroupedQueryAttention(w.w_q, w.w_k, w.w_v, w.w_o, n_heads, n_kv_heads, std::move(rope));
}

// W_K or W_V (d_model, H_kv · d_head) -> (d_model, H · d_head), key/value head g's column block
// repeated for each of its query heads: grouped-query attention is multi-head attention whose
// heads share these weights, so lab 05 can referee it.
Tensor2 repeated_columns(const Tensor2& w, std::size_t n_heads, std::size_t n_kv_heads) {
  const std::size_t d_head = w.shape(1) / n_kv_heads, n_rep = n_heads / n_kv_heads;
  Tensor2 full({w.shape(0), n_heads * d_head});
  for (std::size_t h = 0; h < n_heads; ++h)
    xt::view(full, xt::all(), xt::range(h * d_head, (h + 1) * d_head)) =
        xt::view(w, xt::all(), xt::range(h / n_rep * d_head, (h / n_rep + 1) * d_head));
  return full;
}

// The referee: each sequence on its own through lab 05's rope_self_attention, at its own
// positions, with the key/value weights repeated for every query head.
Tensor3 lab05_forward(const Tensor3& x, const Weights& w, std::size_t n_heads,
                      std::size_t n_kv_heads, const RotaryPositionalEmbedding& rope,
                      const BatchPositions& positions) {
  const Tensor2 w_k = repeated_columns(w.w_k, n_heads, n_kv_heads);
  const Tensor2 w_v = repeated_columns(w.w_v, n_heads, n_kv_heads);
  Tensor3 y(x.shape());
  for (std::size_t b = 0; b < x.shape(0); ++b) {
    const Tensor3 one = xt::view(x, xt::range(b, b + 1));
    const Positions at = xt::view(positions, b);
    xt::view(y, xt::range(b, b + 1)) =
        rope_self_attention(one, w.w_q, w_k, w_v, w.w_o, n_heads, rope, at).output;
  }
  return y;
}

// Positions first[b], first[b] + 1, … for each sequence b: (B, T).
BatchPositions positions_from(const std::vector<std::int64_t>& first, std::size_t T) {
  BatchPositions positions({first.size(), T});
  for (std::size_t b = 0; b < first.size(); ++b)
    for (std::size_t t = 0; t < T; ++t) positions(b, t) = first[b] + std::int64_t(t);
  return positions;
}

// Tokens [from, to) of every sequence: x (B, to − from, d_model) and their positions.
Tensor3 tokens(const Tensor3& x, std::size_t from, std::size_t to) {
  return xt::view(x, xt::all(), xt::range(from, to));
}
BatchPositions at(const BatchPositions& positions, std::size_t from, std::size_t to) {
  return xt::view(positions, xt::all(), xt::range(from, to));
}

// Feeds x to forward_step in chunks of the given sizes (then one token at a time) and returns
// the outputs side by side: (B, T, d_model).
Tensor3 decode(const GroupedQueryAttention& layer, const Tensor3& x,
               const BatchPositions& positions, KVCache& cache,
               const std::vector<std::size_t>& chunks = {}) {
  Tensor3 y(x.shape());
  std::size_t from = 0;
  for (std::size_t i = 0; from < x.shape(1); ++i) {
    const std::size_t to = from + (i < chunks.size() ? chunks[i] : 1);
    xt::view(y, xt::all(), xt::range(from, to)) =
        layer.forward_step(tokens(x, from, to), at(positions, from, to), cache);
    from = to;
  }
  return y;
}

BatchPositions fixture_positions(const std::string& name) {
  const xt::xarray<std::int64_t> p =
      workbench::load_npy_i64(testing::fixtures_dir() / name / "positions.npy");
  return BatchPositions(p);
}

GroupedQueryAttention fixture_layer(const Fixture& fixture) {
  const auto& meta = fixture.meta();
  const auto n_heads = meta.at("n_heads").get<std::size_t>();
  std::optional<RotaryPositionalEmbedding> rope;
  if (!meta.at("theta").is_null())
    rope.emplace(meta.at("theta").get<float>(), fixture.array<2>("w_q").shape(0) / n_heads,
                 meta.at("max_seq_len").get<std::size_t>());
  return GroupedQueryAttention(fixture.array<2>("w_q"), fixture.array<2>("w_k"),
                               fixture.array<2>("w_v"), fixture.array<2>("w_o"), n_heads,
                               meta.at("n_kv_heads").get<std::size_t>(), rope);
}

const std::vector<std::string> kFixtureCases = {"gqa_rope", "mqa_rope", "gqa_no_rope"};

// ---- Block A: what is stored --------------------------------------------------------------------

TEST(KVCache, StartsEmptyWithTheDocumentedShapes) {
  const KVCache cache(3, 2, 10, 4);
  EXPECT_EQ(cache.keys().shape(), (std::array<std::size_t, 4>{3, 2, 10, 4}));
  EXPECT_EQ(cache.values().shape(), (std::array<std::size_t, 4>{3, 2, 10, 4}));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_EQ(cache.bytes(), 2u * 3 * 2 * 10 * 4 * sizeof(float));
  EXPECT_TRUE(throws_invalid_argument([] { KVCache(3, 0, 10, 4); }, {"n_kv_heads"}));
  EXPECT_TRUE(throws_invalid_argument([] { KVCache(3, 2, 0, 4); }, {"max_len"}));
}

TEST(KVCache, AppendWritesEachSequenceAfterTheTokensItHolds) {
  KVCache cache(2, 2, 6, 3);
  const Tensor4 k1 = random_heads(2, 2, 2, 3, 801);
  const Tensor4 v1 = -k1;
  cache.append(k1, v1);  // 2 tokens each
  cache.truncate(1, 1);  // sequence 1 keeps its first token only
  Tensor4 k2 = xt::ones<float>({2, 2, 1, 3}), v2 = 2.0f * k2;
  cache.append(k2, v2);
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{3, 2}));
  // Sequence 0: its two tokens, then the new one at row 2.
  EXPECT_TRUE(all_close(xt::view(cache.keys(), 0, xt::all(), xt::range(0, 2)), xt::view(k1, 0), 0));
  EXPECT_TRUE(
      all_close(xt::view(cache.values(), 0, xt::all(), 2), xt::view(v2, 0, xt::all(), 0), 0));
  // Sequence 1: its first token, then the new one at row 1, over the one it forgot.
  EXPECT_TRUE(all_close(xt::view(cache.keys(), 1, xt::all(), 0), xt::view(k1, 1, xt::all(), 0), 0));
  EXPECT_TRUE(all_close(xt::view(cache.keys(), 1, xt::all(), 1), xt::view(k2, 1, xt::all(), 0), 0));
}

TEST(KVCache, RejectsAppendingPastMaxLenAndWritesNothing) {
  KVCache cache(2, 1, 5, 2);
  cache.append(xt::ones<float>({2, 1, 3, 2}), xt::ones<float>({2, 1, 3, 2}));
  cache.truncate(0, 1);
  const Tensor4 before = cache.keys();
  const Tensor4 three = xt::full_like(Tensor4::from_shape({2, 1, 3, 2}), 7.0f);
  // Sequence 0 has room (1 + 3 <= 5), sequence 1 has not (3 + 3 > 5).
  EXPECT_TRUE(throws_invalid_argument([&] { cache.append(three, three); },
                                      {"sequence 1 has length 3", "6", "max_len 5"}));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{1, 3}));
  EXPECT_TRUE(all_close(cache.keys(), before, 0)) << "a rejected append wrote into the cache";
}

TEST(KVCache, RejectsKeysAndValuesOfTheWrongShapeAndBadTruncations) {
  KVCache cache(2, 2, 4, 3);
  const Tensor4 good = xt::zeros<float>({2, 2, 1, 3});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        cache.append(xt::zeros<float>({2, 1, 1, 3}), good);
      },
      {"(2, 1, 1, 3)", "(2, 2, T, 3)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        cache.append(good, xt::zeros<float>({2, 2, 2, 3}));
      },
      {"(2, 2, 1, 3)", "(2, 2, 2, 3)"}));
  cache.append(good, good);
  EXPECT_TRUE(throws_invalid_argument([&] { cache.truncate(2, 0); }, {"sequence 2", "batch is 2"}));
  EXPECT_TRUE(throws_invalid_argument([&] { cache.truncate(0, 2); }, {"length 2", "length 1"}));
}

TEST(GroupedQueryAttention, RejectsKvHeadsThatDoNotDivideHeads) {
  const Weights w = random_weights(24, 6, 6, 810);
  EXPECT_TRUE(throws_invalid_argument([&] { make_layer(w, 6, 4, std::nullopt); },
                                      {"n_kv_heads 4", "n_heads 6"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { make_layer(w, 6, 0, std::nullopt); }, {"n_kv_heads 0"}));
  EXPECT_TRUE(throws_invalid_argument([&] { make_layer(w, 5, 5, std::nullopt); },
                                      {"n_heads 5", "d_model 24"}));
}

TEST(GroupedQueryAttention, RejectsWeightsOfTheWrongShape) {
  const Weights mha = random_weights(16, 4, 4, 811);  // square W_K, W_V
  EXPECT_TRUE(throws_invalid_argument([&] { make_layer(mha, 4, 2, std::nullopt); },
                                      {"w_k", "(16, 16)", "(16, 8)"}));
  Weights gqa = random_weights(16, 4, 2, 811);
  gqa.w_v = random_weight(16, 12, 1);
  EXPECT_TRUE(throws_invalid_argument([&] { make_layer(gqa, 4, 2, std::nullopt); },
                                      {"w_v", "(16, 12)", "(16, 8)"}));
  gqa = random_weights(16, 4, 2, 811);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { make_layer(gqa, 4, 2, RotaryPositionalEmbedding(kTheta, 8, 16)); }, {"8", "4"}));
}

TEST(GroupedQueryAttention, MakesACacheOfItsKvHeadsOnly) {
  const std::size_t d_model = 32, H = 8;
  for (const std::size_t H_kv : {8u, 2u, 1u}) {
    const KVCache cache =
        make_layer(random_weights(d_model, H, H_kv, 812), H, H_kv, std::nullopt).make_cache(3, 20);
    EXPECT_EQ(cache.keys().shape(), (std::array<std::size_t, 4>{3, H_kv, 20, 4}));
    EXPECT_EQ(cache.bytes(), 2u * 3 * H_kv * 20 * 4 * sizeof(float)) << "H_kv " << H_kv;
  }
}

// ---- Block B: one step --------------------------------------------------------------------------

TEST(GroupedQueryAttention, KvHeadGivesEachGroupOfConsecutiveQueryHeadsOneKvHead) {
  const auto heads_of = [](std::size_t H_kv) {
    const GroupedQueryAttention layer =
        make_layer(random_weights(16, 8, H_kv, 850), 8, H_kv, std::nullopt);
    std::vector<std::size_t> kv;
    for (std::size_t h = 0; h < 8; ++h) kv.push_back(layer.kv_head(h));
    return kv;
  };
  EXPECT_EQ(heads_of(8), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(heads_of(2), (std::vector<std::size_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(heads_of(1), (std::vector<std::size_t>(8, 0)));
}

TEST(RopeBatchPositions, RotatesEachSequenceAtItsOwnRow) {
  const RotaryPositionalEmbedding rope(kTheta, 4, 32);
  const Tensor4 x = random_heads(2, 3, 5, 4, 820);
  const BatchPositions positions = positions_from({0, 17}, 5);
  const Tensor4 rotated = rope.apply(x, positions);
  for (std::size_t b = 0; b < 2; ++b) {
    const Tensor4 one = xt::view(x, xt::range(b, b + 1));
    EXPECT_TRUE(all_close(xt::view(rotated, xt::range(b, b + 1)),
                          rope.apply(one, Positions(xt::view(positions, b))), 0))
        << "sequence " << b;
  }
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(x, positions_from({0, 1, 2}, 5));
      },
      {"(2, 3, 5, 4)", "(3, 5)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        rope.apply(x, positions_from({0, 30}, 5));
      },
      {"is 32", "max_seq_len 32"}));
}

TEST(ForwardStep, APromptInOneChunkEqualsLab05sRopeSelfAttention) {
  const std::size_t B = 2, T = 9, d_model = 16, H = 4;
  const Weights w = random_weights(d_model, H, H, 821);
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 32);
  const GroupedQueryAttention layer = make_layer(w, H, H, rope);
  const Tensor3 x = random_tokens(B, T, d_model, 822);
  const BatchPositions positions = positions_from({0, 0}, T);
  KVCache cache = layer.make_cache(B, 16);
  EXPECT_TRUE(close_at_scale(layer.forward_step(x, positions, cache),
                             lab05_forward(x, w, H, H, rope, positions)));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{T, T}));
}

TEST(ForwardStep, TokenByTokenEqualsTheFullCausalForward) {
  const std::size_t B = 2, T = 12, d_model = 16, H = 2;
  const Weights w = random_weights(d_model, H, H, 823);
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 32);
  const GroupedQueryAttention layer = make_layer(w, H, H, rope);
  const Tensor3 x = random_tokens(B, T, d_model, 824);
  const BatchPositions positions = positions_from({0, 0}, T);
  KVCache cache = layer.make_cache(B, T);
  EXPECT_TRUE(close_at_scale(decode(layer, x, positions, cache),
                             lab05_forward(x, w, H, H, rope, positions)));
}

TEST(ForwardStep, PromptChunksThenSingleStepsEqualTheFullForward) {
  const std::size_t B = 3, T = 14, d_model = 24, H = 3;
  const Weights w = random_weights(d_model, H, H, 825);
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 64);
  const GroupedQueryAttention layer = make_layer(w, H, H, rope);
  const Tensor3 x = random_tokens(B, T, d_model, 826);
  const BatchPositions positions = positions_from({0, 0, 0}, T);
  const Tensor3 expected = lab05_forward(x, w, H, H, rope, positions);
  // A prompt of 5, then a chunk of 4 that must see the prompt and be causal within itself.
  for (const std::vector<std::size_t>& chunks :
       {std::vector<std::size_t>{5}, std::vector<std::size_t>{5, 4}}) {
    KVCache cache = layer.make_cache(B, 20);
    EXPECT_TRUE(close_at_scale(decode(layer, x, positions, cache, chunks), expected))
        << "first chunks " << chunks.size();
  }
}

TEST(ForwardStep, SequencesAtDifferentOffsetsEachMatchTheirOwnForward) {
  const std::size_t B = 3, T = 8, d_model = 16, H = 2;
  const Weights w = random_weights(d_model, H, H, 827);
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 128);
  const GroupedQueryAttention layer = make_layer(w, H, H, rope);
  const Tensor3 x = random_tokens(B, T, d_model, 828);
  // Sequence 0 starts at 0; sequence 1 is a continuation, at positions 40…; sequence 2 joined
  // the batch after a first request of 3 tokens in its slot had finished, at positions 100….
  KVCache cache = layer.make_cache(B, 16);
  layer.forward_step(random_tokens(B, 3, d_model, 829), positions_from({90, 91, 92}, 3), cache);
  cache.truncate(0, 0);
  cache.truncate(1, 0);
  cache.truncate(2, 0);
  const BatchPositions positions = positions_from({0, 40, 100}, T);
  const Tensor3 y = decode(layer, x, positions, cache, {2});
  EXPECT_TRUE(close_at_scale(y, lab05_forward(x, w, H, H, rope, positions)));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{T, T, T}));
}

TEST(ForwardStep, SequencesOfDifferentLengthsShareABatch) {
  const std::size_t B = 2, d_model = 16, H = 4;
  const Weights w = random_weights(d_model, H, H, 830);
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 32);
  const GroupedQueryAttention layer = make_layer(w, H, H, rope);
  // Sequence 0 holds 6 tokens; sequence 1 is cut back to 2 (say, rejected draft tokens), so
  // the next step attends over 7 keys for one and 3 for the other (each token sees itself).
  const Tensor3 prompt = random_tokens(B, 6, d_model, 831);
  const Tensor3 next = random_tokens(B, 3, d_model, 832);
  KVCache cache = layer.make_cache(B, 12);
  layer.forward_step(prompt, positions_from({0, 0}, 6), cache);
  cache.truncate(1, 2);
  const Tensor3 y = decode(layer, next, positions_from({6, 2}, 3), cache);
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{9, 5}));
  // Each sequence's whole history, through the full forward.
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t kept = b == 0 ? 6 : 2;
    const Tensor3 history =
        xt::concatenate(xt::xtuple(xt::view(prompt, xt::range(b, b + 1), xt::range(0, kept)),
                                   xt::view(next, xt::range(b, b + 1))),
                        1);
    const Tensor3 expected = lab05_forward(history, w, H, H, rope, positions_from({0}, kept + 3));
    EXPECT_TRUE(close_at_scale(xt::view(y, xt::range(b, b + 1)),
                               xt::view(expected, xt::all(), xt::range(kept, kept + 3))))
        << "sequence " << b;
  }
}

TEST(ForwardStep, CachesTheRotatedKeysAndThePlainValues) {
  const Fixture fixture("gqa_rope");
  const GroupedQueryAttention layer = fixture_layer(fixture);
  const Tensor3 x = fixture.array<3>("x");
  KVCache cache = layer.make_cache(x.shape(0), 10);
  decode(layer, x, fixture_positions("gqa_rope"), cache, {2});
  auto filled = xt::range(std::size_t{0}, x.shape(1));
  EXPECT_TRUE(all_close(xt::view(cache.keys(), xt::all(), xt::all(), filled),
                        fixture.array<4>("k_rot"), kTorchTolerance));
  EXPECT_TRUE(all_close(xt::view(cache.values(), xt::all(), xt::all(), filled),
                        fixture.array<4>("v_heads"), kTorchTolerance));
}

TEST(ForwardStep, WithoutRopeAndAKvHeadPerHeadIsLab01sCausalLayer) {
  const std::size_t B = 2, T = 7, d_model = 12, H = 3;
  const Weights w = random_weights(d_model, H, H, 833);
  const GroupedQueryAttention layer = make_layer(w, H, H, std::nullopt);
  MultiHeadAttention lab01(w.w_q, w.w_k, w.w_v, w.w_o, H);
  const Tensor3 x = random_tokens(B, T, d_model, 834);
  KVCache cache = layer.make_cache(B, T);
  EXPECT_TRUE(close_at_scale(decode(layer, x, positions_from({0, 0}, T), cache, {3}),
                             lab01.forward(x, causal_mask(T))));
}

TEST(ForwardStep, RejectsAFullCacheAndLeavesItUnchanged) {
  const std::size_t d_model = 8, H = 2;
  const GroupedQueryAttention layer =
      make_layer(random_weights(d_model, H, 1, 835), H, 1, std::nullopt);
  KVCache cache = layer.make_cache(2, 4);
  layer.forward_step(random_tokens(2, 3, d_model, 836), positions_from({0, 0}, 3), cache);
  const Tensor4 keys = cache.keys();
  // A chunk of 2 more does not fit: 3 + 2 > 4.
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward_step(random_tokens(2, 2, d_model, 837), positions_from({3, 3}, 2), cache);
      },
      {"length 3", "5", "max_len 4"}));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{3, 3}));
  EXPECT_TRUE(all_close(cache.keys(), keys, 0));
  // One more token fits exactly.
  layer.forward_step(random_tokens(2, 1, d_model, 838), positions_from({3, 3}, 1), cache);
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{4, 4}));
}

TEST(ForwardStep, RejectsPositionsOfTheWrongShape) {
  const std::size_t d_model = 8, H = 2;
  const GroupedQueryAttention layer = make_layer(random_weights(d_model, H, H, 839), H, H,
                                                 RotaryPositionalEmbedding(kTheta, 4, 16));
  KVCache cache = layer.make_cache(2, 8);
  const Tensor3 x = random_tokens(2, 3, d_model, 840);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward_step(x, positions_from({0, 0}, 2), cache);
      },
      {"(2, 3, 8)", "(2, 2)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { layer.forward_step(x, positions_from({0}, 3), cache); },
                                      {"(2, 3, 8)", "(1, 3)"}));
  EXPECT_EQ(cache.lengths(), (std::vector<std::size_t>{0, 0}));
}

TEST(ForwardStep, RejectsTokensOfAnotherWidthAndACacheOfAnotherLayer) {
  const std::size_t d_model = 8, H = 2;
  const GroupedQueryAttention layer =
      make_layer(random_weights(d_model, H, 1, 841), H, 1, std::nullopt);
  KVCache cache = layer.make_cache(2, 8);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward_step(random_tokens(2, 1, 12, 842), positions_from({0, 0}, 1), cache);
      },
      {"(2, 1, 12)", "d_model is 8"}));
  KVCache mha_cache(2, 2, 8, 4);  // two kv heads, the layer has one
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward_step(random_tokens(2, 1, 8, 843), positions_from({0, 0}, 1), mha_cache);
      },
      {"(2, 2, 8, 4)", "(2, 1, max_len, 4)"}));
  KVCache small_batch(1, 1, 8, 4);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward_step(random_tokens(2, 1, 8, 844), positions_from({0, 0}, 1), small_batch);
      },
      {"(2, 1, 8)", "(1, 1, 8, 4)"}));
}

TEST(ForwardStep, GqaAndMqaTokenByTokenEqualTheFullForward) {
  const std::size_t B = 2, T = 11, d_model = 32, H = 8;
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 64);
  const Tensor3 x = random_tokens(B, T, d_model, 853);
  const BatchPositions positions = positions_from({0, 30}, T);
  for (const std::size_t H_kv : {8u, 2u, 1u}) {
    const Weights w = random_weights(d_model, H, H_kv, 854);
    const GroupedQueryAttention layer = make_layer(w, H, H_kv, rope);
    const Tensor3 expected = lab05_forward(x, w, H, H_kv, rope, positions);
    for (const std::vector<std::size_t>& chunks :
         {std::vector<std::size_t>{}, std::vector<std::size_t>{4, 3}}) {
      KVCache cache = layer.make_cache(B, T);
      EXPECT_TRUE(close_at_scale(decode(layer, x, positions, cache, chunks), expected))
          << "H_kv " << H_kv << ", first chunks " << chunks.size();
    }
  }
}

TEST(ForwardStep, MatchesTheTorchFixturesTokenByToken) {
  for (const std::string& name : kFixtureCases) {
    SCOPED_TRACE("fixture " + name);
    const Fixture fixture(name);
    const GroupedQueryAttention layer = fixture_layer(fixture);
    const Tensor3 x = fixture.array<3>("x");
    KVCache cache = layer.make_cache(x.shape(0), x.shape(1));
    EXPECT_TRUE(all_close(decode(layer, x, fixture_positions(name), cache), fixture.array<3>("y"),
                          kTorchTolerance));
  }
}

// ---- Block C: the whole sequence at once --------------------------------------------------------

TEST(GroupedQueryAttention, ForwardRejectsTokensAndPositionsOfTheWrongShape) {
  const std::size_t d_model = 8, H = 2;
  const GroupedQueryAttention layer = make_layer(random_weights(d_model, H, 1, 845), H, 1,
                                                 RotaryPositionalEmbedding(kTheta, 4, 16));
  const Tensor3 x = random_tokens(2, 3, d_model, 846);
  EXPECT_TRUE(throws_invalid_argument([&] { layer.forward(x, positions_from({0}, 3)); },
                                      {"(2, 3, 8)", "(1, 3)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward(random_tokens(2, 3, 12, 847), positions_from({0, 0}, 3));
      },
      {"(2, 3, 12)", "d_model is 8"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        layer.forward(x, positions_from({0, 14}, 3));
      },
      {"is 16", "max_seq_len 16"}));
}

TEST(RepeatKv, MatchesTorchRepeatInterleave) {
  for (const std::string& name : kFixtureCases) {
    SCOPED_TRACE("fixture " + name);
    const Fixture fixture(name);
    const auto n_rep = fixture.meta().at("n_heads").get<std::size_t>() /
                       fixture.meta().at("n_kv_heads").get<std::size_t>();
    EXPECT_TRUE(
        all_close(repeat_kv(fixture.array<4>("k_rot"), n_rep), fixture.array<4>("k_repeated"), 0));
  }
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        repeat_kv(xt::zeros<float>({1, 2, 3, 4}), 0);
      },
      {"n_rep"}));
}

TEST(GroupedQueryAttention, ForwardMatchesTheTorchFixtures) {
  for (const std::string& name : kFixtureCases) {
    SCOPED_TRACE("fixture " + name);
    const Fixture fixture(name);
    EXPECT_TRUE(
        all_close(fixture_layer(fixture).forward(fixture.array<3>("x"), fixture_positions(name)),
                  fixture.array<3>("y"), kTorchTolerance));
  }
}

TEST(GroupedQueryAttention, ForwardEqualsMultiHeadAttentionWithTheKvWeightsRepeated) {
  const std::size_t B = 2, T = 10, d_model = 32, H = 8;
  const RotaryPositionalEmbedding rope(kTheta, d_model / H, 64);
  const Tensor3 x = random_tokens(B, T, d_model, 851);
  const BatchPositions positions = positions_from({0, 21}, T);
  for (const std::size_t H_kv : {8u, 4u, 1u}) {
    const Weights w = random_weights(d_model, H, H_kv, 852);
    EXPECT_TRUE(close_at_scale(make_layer(w, H, H_kv, rope).forward(x, positions),
                               lab05_forward(x, w, H, H_kv, rope, positions)))
        << "H_kv " << H_kv;
  }
}

}  // namespace
}  // namespace minimodel
