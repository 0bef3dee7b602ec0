// Lab 07: efficient attention, checked against lab 00's softmax and single_head_attention, lab
// 01's layer, the PyTorch fixtures, and a count of the heap bytes each call allocates.
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/efficient_attention.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"
#include "support/random_tokens.hpp"
#include "support/torch_parity.hpp"
#include "tensors/npy_io.hpp"
#include "util/heap_meter.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::Fixture;
using testing::kTorchTolerance;
using testing::random_tokens;
using testing::throws_invalid_argument;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The kernel sums the same products as lab 00 in another order (tiles, BLAS blocking, a running
// rescale): for outputs of size O(1) from O(100) terms, float32 rounding differs by a few 1e-7.
constexpr double kTolerance = 1e-6;

Tensor2 random_matrix(std::size_t rows, std::size_t cols, int seed, float scale = 1.0f) {
  return xt::view(random_tokens(1, rows, cols, seed), 0) * scale;
}

// ---- Block A: online softmax --------------------------------------------------------------------

TEST(RunningSoftmax, TheFirstScoreSetsTheMaxAndASumOfOne) {
  RunningSoftmax running;
  EXPECT_EQ(running.add(3.5f), 0.0f) << "nothing was accumulated before: the factor is exp(-inf)";
  EXPECT_EQ(running.max, 3.5f);
  EXPECT_EQ(running.sum, 1.0f);
}

TEST(RunningSoftmax, AGrowingMaxRescalesTheSumAndReturnsTheFactor) {
  RunningSoftmax running;
  running.add(1.0f);
  EXPECT_EQ(running.add(0.0f), 1.0f) << "a smaller score leaves the max";
  EXPECT_NEAR(running.sum, 1.0f + std::exp(-1.0f), 1e-7);
  const float factor = running.add(3.0f);
  EXPECT_NEAR(factor, std::exp(1.0f - 3.0f), 1e-7);
  EXPECT_EQ(running.max, 3.0f);
  // Σ exp(s - 3) over 1, 0, 3.
  EXPECT_NEAR(running.sum, std::exp(-2.0f) + std::exp(-3.0f) + 1.0f, 1e-6);
}

TEST(RunningSoftmax, MinusInfinityChangesNothingEvenFirst) {
  RunningSoftmax running;
  EXPECT_EQ(running.add(-kInf), 1.0f);
  EXPECT_EQ(running.max, -kInf);
  EXPECT_EQ(running.sum, 0.0f) << "-inf - -inf is NaN: a removed key must not reach exp";
  running.add(2.0f);
  running.add(-kInf);
  EXPECT_EQ(running.max, 2.0f);
  EXPECT_EQ(running.sum, 1.0f);
}

TEST(OnlineSoftmax, EqualsLab00SoftmaxOnFiniteRows) {
  for (const float scale : {1.0f, 30.0f, 1e4f}) {  // up to logits of ±1e4: no overflow
    SCOPED_TRACE("scale " + std::to_string(scale));
    const Tensor2 scores = random_matrix(6, 37, 7, scale);
    EXPECT_TRUE(all_close(online_softmax(scores), softmax(scores), kTolerance));
  }
  Tensor2 masked = random_matrix(3, 5, 8);
  masked(1, 0) = masked(1, 3) = kMaskedScore;  // a finite mask value is an ordinary score here
  EXPECT_TRUE(all_close(online_softmax(masked), softmax(masked), kTolerance));
}

TEST(OnlineSoftmax, ARowOfMinusInfinityIsZerosNotNaN) {
  Tensor2 scores = random_matrix(3, 4, 9);
  xt::view(scores, 1) = -kInf;
  scores(2, 0) = -kInf;  // one removed key first, then real ones
  const Tensor2 weights = online_softmax(scores);
  EXPECT_TRUE(all_close(xt::view(weights, 1), xt::zeros<float>({4}), 0.0));
  EXPECT_EQ(weights(2, 0), 0.0f);
  const Tensor2 rest = xt::view(scores, xt::keep(0, 2));
  EXPECT_TRUE(all_close(xt::view(weights, xt::keep(0, 2)), softmax(rest), kTolerance))
      << "-inf is exp(-inf) = 0 in a row with real scores";
}

// ---- Block B: the tiled kernel -----------------------------------------------------------------

struct Case {
  std::size_t T, S, d_head, d_v;
};

TEST(TiledAttention, EqualsSingleHeadAttentionForEveryTileSize) {
  // T = 1, S != T, sizes that are not multiples of the tiles, and tiles larger than the input.
  for (const Case c : {Case{1, 1, 4, 4}, Case{5, 7, 8, 3}, Case{33, 33, 16, 16}, Case{64, 50, 8, 8},
                       Case{100, 130, 32, 16}}) {
    const Tensor2 q = random_matrix(c.T, c.d_head, 1), k = random_matrix(c.S, c.d_head, 2),
                  v = random_matrix(c.S, c.d_v, 3);
    const Tensor2 expected = single_head_attention(q, k, v).output;
    for (const Tiles tiles :
         {Tiles{1, 1}, Tiles{4, 3}, Tiles{16, 16}, Tiles{64, 64}, Tiles{c.T + 1, c.S + 1}}) {
      SCOPED_TRACE("T " + std::to_string(c.T) + ", S " + std::to_string(c.S) + ", tiles " +
                   std::to_string(tiles.queries) + " x " + std::to_string(tiles.keys));
      TiledOptions options;
      options.tiles = tiles;
      EXPECT_TRUE(all_close(tiled_attention(q, k, v, options), expected, kTolerance));
    }
  }
}

TEST(TiledAttention, EqualsSingleHeadAttentionWithAnAdditiveMask) {
  const Tensor2 q = random_matrix(20, 8, 4), k = random_matrix(30, 8, 5),
                v = random_matrix(30, 8, 6);
  Tensor2 mask = random_matrix(20, 30, 7);  // soft values are added to the scores
  for (std::size_t t = 0; t < 20; ++t) mask(t, (3 * t) % 30) = kMaskedScore;  // removals
  mask(4, 9) = -kInf;
  TiledOptions options;
  options.mask = &mask;
  options.tiles = {8, 8};
  Tensor2 finite = mask;
  finite(4, 9) = kMaskedScore;  // lab 00 takes -1e9, which removes the key as -inf does
  EXPECT_TRUE(all_close(tiled_attention(q, k, v, options),
                        single_head_attention(q, k, v, finite).output, kTolerance));
}

TEST(TiledAttention, EqualsSingleHeadAttentionWithAKeyPaddingMask) {
  // A key-padding mask removes whole columns: here keys 0-7, one whole key tile, so that every row
  // starts with a tile that has no key left, and keys 25-29, the end of the last tile. Given as a
  // (T, S) mask and as a key_bias of S floats: alone, and with causal, where query t < 8 has no key
  // left at all (zeros; lab 00 would average it).
  const Tensor2 q = random_matrix(30, 8, 16), k = random_matrix(30, 8, 17),
                v = random_matrix(30, 8, 18);
  Tensor1 key_bias = xt::zeros<float>({30});
  xt::view(key_bias, xt::range(0, 8)) = kMaskedScore;
  xt::view(key_bias, xt::range(25, 30)) = kMaskedScore;
  const Tensor2 padding = xt::zeros<float>({30, 30}) + key_bias;  // every row the same
  const Tensor2 both = xt::minimum(padding, causal_mask(30));
  for (const bool as_key_bias : {false, true}) {
    SCOPED_TRACE(as_key_bias ? "as options.key_bias (S)" : "as options.mask (T, S)");
    TiledOptions options;
    options.key_bias = as_key_bias ? &key_bias : nullptr;
    options.mask = as_key_bias ? nullptr : &padding;
    options.tiles = {8, 8};
    EXPECT_TRUE(all_close(tiled_attention(q, k, v, options),
                          single_head_attention(q, k, v, padding).output, kTolerance));

    options.causal = true;
    const Tensor2 out = tiled_attention(q, k, v, options);
    EXPECT_TRUE(all_close(xt::view(out, xt::range(0, 8)), xt::zeros<float>({8, 8}), 0.0));
    EXPECT_TRUE(all_close(xt::view(out, xt::range(8, 30)),
                          xt::view(single_head_attention(q, k, v, both).output, xt::range(8, 30)),
                          kTolerance));
  }

  // A soft key_bias is added to every row's scores, on top of a mask's own values.
  const Tensor1 soft = xt::view(random_matrix(1, 30, 19), 0);
  Tensor2 mask = random_matrix(30, 30, 20);
  mask(3, 4) = kMaskedScore;
  TiledOptions options;
  options.mask = &mask;
  options.key_bias = &soft;
  options.tiles = {8, 8};
  const Tensor2 sum = mask + soft;  // (3, 4) stays -1e9 in float32: removed
  EXPECT_TRUE(all_close(tiled_attention(q, k, v, options),
                        single_head_attention(q, k, v, sum).output, kTolerance));
}

TEST(TiledAttention, CausalEqualsTheCausalMaskAndSkipsEveryTileAboveTheDiagonal) {
  const Tensor2 q = random_matrix(100, 8, 10), k = random_matrix(100, 8, 11),
                v = random_matrix(100, 8, 12);
  const Tensor2 expected = single_head_attention(q, k, v, causal_mask(100)).output;
  // 100 rows in tiles of 16 are 7 blocks, and query block b ends at row min(16b + 15, 99); a key
  // tile is needed if it starts at or before that row. 16 x 16: key blocks 0..b, 28 of the 49
  // tiles. 16 x 32 (key tiles at 0, 32, 64, 96): 1, 1, 2, 2, 3, 3, 4 of them, 16 of 28. 16 x 8
  // (13 key tiles): 2, 4, 6, 8, 10, 12, 13, 55 of 91; a kernel that stopped at the block's first
  // query instead of its last would skip the second half of each diagonal.
  for (const auto& [tiles, computed, skipped] :
       {std::tuple{Tiles{16, 16}, 28u, 21u}, std::tuple{Tiles{16, 32}, 16u, 12u},
        std::tuple{Tiles{16, 8}, 55u, 36u}}) {
    SCOPED_TRACE(std::to_string(tiles.queries) + " x " + std::to_string(tiles.keys));
    TileCounts counts;
    TiledOptions options;
    options.causal = true;
    options.tiles = tiles;
    options.counts = &counts;
    EXPECT_TRUE(all_close(tiled_attention(q, k, v, options), expected, kTolerance));
    EXPECT_EQ(counts.computed, computed);
    EXPECT_EQ(counts.skipped, skipped);
  }
  TileCounts counts;
  TiledOptions full;
  full.tiles = {16, 16};
  full.counts = &counts;
  tiled_attention(q, k, v, full);
  EXPECT_EQ(counts.computed, 49u) << "without causal, every tile";
  EXPECT_EQ(counts.skipped, 0u);
}

TEST(TiledAttention, AFullyMaskedRowGivesZeros) {
  const Tensor2 q = random_matrix(6, 4, 13), k = random_matrix(9, 4, 14),
                v = random_matrix(9, 4, 15);
  Tensor2 mask = xt::zeros<float>({6, 9});
  xt::view(mask, 2) = kMaskedScore;  // query 2 has no key left
  xt::view(mask, 4) = -kInf;
  TiledOptions options;
  options.mask = &mask;
  options.tiles = {4, 4};
  const Tensor2 out = tiled_attention(q, k, v, options);
  EXPECT_TRUE(all_close(xt::view(out, 2), xt::zeros<float>({4}), 0.0));
  EXPECT_TRUE(all_close(xt::view(out, 4), xt::zeros<float>({4}), 0.0));
  const Tensor2 others = single_head_attention(q, k, v).output;
  EXPECT_TRUE(all_close(xt::view(out, xt::keep(0, 1, 3, 5)), xt::view(others, xt::keep(0, 1, 3, 5)),
                        kTolerance));
}

TEST(TiledAttention, StaysExactWithLogitsUpToTenThousand) {
  // Scores of ±1e4 overflow exp unless every exponent is relative to a running max; the max of a
  // row may sit in any tile.
  const Tensor2 q = random_matrix(12, 4, 16, 50.0f), k = random_matrix(40, 4, 17, 50.0f),
                v = random_matrix(40, 4, 18);
  TiledOptions options;
  options.tiles = {5, 7};
  const Tensor2 out = tiled_attention(q, k, v, options);
  EXPECT_TRUE(all_close(out, single_head_attention(q, k, v).output, kTolerance));
  EXPECT_TRUE(xt::all(xt::isfinite(out)));
}

TEST(TiledAttention, ReadsAndWritesStridedViewsInPlace) {
  // Head 1 of 3 in (T, 12) projections: columns 4..7, rows 12 floats apart.
  const Tensor2 q = random_matrix(10, 12, 19), k = random_matrix(10, 12, 20),
                v = random_matrix(10, 12, 21);
  Tensor2 out = xt::full_like(q, 7.0f);
  const std::size_t column = 4, d_head = 4;
  TiledOptions options;
  options.tiles = {3, 4};
  tiled_attention({q.data() + column, 10, d_head, 12}, {k.data() + column, 10, d_head, 12},
                  {v.data() + column, 10, d_head, 12}, {out.data() + column, 10, d_head, 12},
                  options);
  const auto head = [&](const Tensor2& t) -> Tensor2 {
    return xt::view(t, xt::all(), xt::range(column, column + d_head));
  };
  EXPECT_TRUE(
      all_close(head(out), single_head_attention(head(q), head(k), head(v)).output, kTolerance));
  EXPECT_TRUE(all_close(xt::view(out, xt::all(), xt::range(0, column)),
                        xt::full_like(head(out), 7.0f), 0.0))
      << "the other heads' columns are not touched";
}

TEST(TiledAttention, RejectsMismatchedShapes) {
  const Tensor2 q = random_matrix(4, 8, 1), k = random_matrix(6, 8, 2), v = random_matrix(6, 5, 3);
  EXPECT_TRUE(throws_invalid_argument([&] { tiled_attention(q, random_matrix(6, 7, 4), v); },
                                      {"(4, 8)", "(6, 7)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { tiled_attention(q, k, random_matrix(5, 5, 4)); },
                                      {"(6, 8)", "(5, 5)"}));
  const Tensor2 mask = xt::zeros<float>({4, 5});
  TiledOptions masked;
  masked.mask = &mask;
  EXPECT_TRUE(
      throws_invalid_argument([&] { tiled_attention(q, k, v, masked); }, {"(4, 5)", "(4, 6)"}));
  const Tensor1 key_bias = xt::zeros<float>({5});
  TiledOptions biased;
  biased.key_bias = &key_bias;
  EXPECT_TRUE(throws_invalid_argument([&] { tiled_attention(q, k, v, biased); },
                                      {"key_bias", "(5)", "(6)"}));
  TiledOptions causal;
  causal.causal = true;
  EXPECT_TRUE(throws_invalid_argument([&] { tiled_attention(q, k, v, causal); },
                                      {"causal", "(4, 8)", "(6, 8)"}));
  TiledOptions no_tiles;
  no_tiles.tiles = {0, 16};
  EXPECT_TRUE(
      throws_invalid_argument([&] { tiled_attention(q, k, v, no_tiles); }, {"tiles", "0 x 16"}));
  Tensor2 wide = Tensor2::from_shape({4, 5});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        tiled_attention(view_of(q), view_of(k), view_of(v), {wide.data(), 4, 5, 3});
      },
      {"out", "ld 3", "5"}));
  Tensor2 out = Tensor2::from_shape({4, 4});
  EXPECT_TRUE(throws_invalid_argument(
      [&] { tiled_attention(view_of(q), view_of(k), view_of(v), view_of(out)); },
      {"(4, 4)", "(4, 5)"}));
}

// ---- Block C: multi-head attention that stores no weights --------------------------------------

TEST(EfficientForward, EqualsLab01ForwardCausalAndNotAndLeavesItsWeights) {
  // A short batch, and a longer sequence with 8 heads: enough work per head that a version which
  // runs heads on several threads has them all busy.
  struct Size {
    std::size_t B, T, d_model, H;
  };
  for (const auto& [B, T, d_model, H] : {Size{2, 45, 32, 4}, Size{1, 300, 64, 8}}) {
    MultiHeadAttention layer(d_model, H, 22);
    const Tensor3 x = random_tokens(B, T, d_model, 23);
    for (const bool causal : {false, true}) {
      SCOPED_TRACE("T " + std::to_string(T) + (causal ? ", causal" : ", not causal"));
      const Tensor3 expected =
          layer.forward(x, causal ? std::optional<Tensor2>(causal_mask(T)) : std::nullopt);
      const Tensor4 weights = layer.attention_weights();
      EXPECT_TRUE(all_close(efficient_forward(layer, x, causal, {16, 8}), expected, kTolerance));
      EXPECT_TRUE(all_close(layer.attention_weights(), weights, 0.0))
          << "the weights of the last forward call are not replaced";
    }
  }
}

TEST(EfficientForward, MatchesTheTorchFixtures) {
  for (const char* name : {"mha_batched", "mha_unbatched", "mha_causal", "mha_causal_large_logits",
                           "mha_one_head", "mha_head_width_one", "mha_single_token"}) {
    SCOPED_TRACE(name);
    const Fixture fixture(name);
    const MultiHeadAttention layer(fixture.array<2>("w_q"), fixture.array<2>("w_k"),
                                   fixture.array<2>("w_v"), fixture.array<2>("w_o"),
                                   fixture.meta().at("n_heads").get<std::size_t>());
    const bool causal = fixture.meta().at("causal").get<bool>();
    if (fixture.rank("x") == 2) {  // (T, d): a batch of one
      const Tensor2 x = fixture.array<2>("x");
      const Tensor3 x3 = xt::view(x, xt::newaxis(), xt::all(), xt::all());
      const Tensor2 y = xt::view(efficient_forward(layer, x3, causal), 0);
      EXPECT_TRUE(all_close(y, fixture.array<2>("y"), kTorchTolerance));
    } else {
      EXPECT_TRUE(all_close(efficient_forward(layer, fixture.array<3>("x"), causal),
                            fixture.array<3>("y"), kTorchTolerance));
    }
  }
}

TEST(EfficientForward, AllocatesNothingOfSizeTSquared) {
  // One (T, T) float matrix is 4 MiB at T = 1024; the projections are (T, 32), 128 KiB each. The
  // bound, a quarter of one head's weights, leaves room for O(T · d_model) buffers and tiles.
  constexpr std::size_t T = 1024, d_model = 32;
  constexpr std::size_t bound = T * T * sizeof(float) / 4;
  MultiHeadAttention layer(d_model, 2, 24);
  const Tensor3 x = random_tokens(1, T, d_model, 25);
  efficient_forward(layer, x, true);  // a first call may set up reusable buffers
  for (const bool causal : {false, true})
    EXPECT_LT(workbench::peak_extra_heap_bytes([&] { efficient_forward(layer, x, causal); }), bound)
        << (causal ? "causal" : "not causal");

  const Tensor2 q = xt::view(x, 0), k = q, v = q;
  Tensor2 out = Tensor2::from_shape({T, d_model});
  EXPECT_LT(workbench::peak_extra_heap_bytes(
                [&] { tiled_attention(view_of(q), view_of(k), view_of(v), view_of(out)); }),
            bound)
      << "the kernel itself";
}

TEST(EfficientForward, RejectsXOfTheWrongWidth) {
  const MultiHeadAttention layer(16, 4, 26);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { efficient_forward(layer, random_tokens(2, 3, 12, 27)); }, {"(2, 3, 12)", "16"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        efficient_forward(layer, random_tokens(1, 3, 16, 27), false, {8, 0});
      },
      {"tiles", "8 x 0"}));
}

// ---- Block C: lab 06's layer, output only ------------------------------------------------------

// Lab 06's tolerance against lab 06: with random biases the outputs reach about 2, and float32
// rounds them differently in another order of summation by about 1e-6 (a few units in the last
// place); 1e-5 still catches a missing bias or mask, which moves them by 1e-2 or more.
constexpr double kLab06Tolerance = 1e-5;

// Lab 06's layer with Xavier weights from `seed` and random biases, so that every bias counts.
MultiheadCrossAttention cross_layer(std::size_t d_model, std::size_t H, int seed) {
  const MultiheadCrossAttention init(d_model, H, static_cast<std::uint64_t>(seed), false);
  const auto bias = [&](int offset) {
    return std::optional<Tensor1>(xt::view(random_matrix(1, d_model, seed + offset), 0));
  };
  return MultiheadCrossAttention(init.w_q(), init.w_k(), init.w_v(), init.w_o(), bias(1), bias(2),
                                 bias(3), bias(4), H);
}

TEST(EfficientCrossForward, MatchesTheTorchFixturesOfLab06) {
  for (const char* name : {"cross_padding", "cross_attn_mask", "cross_no_bias"}) {
    SCOPED_TRACE(name);
    const Fixture fixture(name);
    const bool bias = fixture.meta().at("bias").get<bool>();
    const auto b = [&](const char* which) {
      return bias ? std::optional<Tensor1>(fixture.array<1>(which)) : std::nullopt;
    };
    const MultiheadCrossAttention layer(fixture.array<2>("w_q"), fixture.array<2>("w_k"),
                                        fixture.array<2>("w_v"), fixture.array<2>("w_o"), b("b_q"),
                                        b("b_k"), b("b_v"), b("b_o"),
                                        fixture.meta().at("n_heads").get<std::size_t>());
    CrossAttentionOptions options;
    options.key_padding_mask = BoolTensor2(
        workbench::load_npy_bool(testing::fixtures_dir() / name / "key_padding_mask.npy"));
    if (fixture.meta().at("attn_mask").get<bool>())
      options.attn_mask = as_attn_mask(fixture.array<2>("attn_mask"));
    EXPECT_TRUE(
        all_close(efficient_forward(layer, fixture.array<3>("query"), fixture.array<3>("key"),
                                    fixture.array<3>("value"), options, false, {2, 3}),
                  fixture.array<3>("y"), kTorchTolerance));
  }
}

TEST(EfficientCrossForward, EqualsLab06ForwardWithBiasesMasksTransformAndCausal) {
  // S != T, tiles that divide neither; sequence 1 pads its last 20 keys, and its query 5 has no
  // key left (output b_o); the attn_mask adds soft values and removes keys of its own.
  constexpr std::size_t B = 2, T = 37, S = 53, d_model = 32, H = 4;
  MultiheadCrossAttention layer = cross_layer(d_model, H, 40);
  const Tensor3 query = random_tokens(B, T, d_model, 41), kv = random_tokens(B, S, d_model, 42);
  BoolTensor2 padding = xt::zeros<bool>({B, S});
  xt::view(padding, 1, xt::range(S - 20, S)) = true;
  Tensor4 attn_mask = xt::view(random_tokens(B, T, S, 43), xt::all(), xt::newaxis()) * 0.5f;
  for (std::size_t t = 0; t < T; ++t) attn_mask(0, 0, t, (7 * t) % S) = -kInf;
  xt::view(attn_mask, 1, 0, 5, xt::range(0, S - 20)) = kMaskedScore;

  struct Options {
    const char* name;
    CrossAttentionOptions options;
  };
  std::vector<Options> cases(4);
  cases[0].name = "no mask";
  cases[1].name = "key padding";
  cases[1].options.key_padding_mask = padding;
  cases[2].name = "key padding and a per-sequence attn_mask";
  cases[2].options.key_padding_mask = padding;
  cases[2].options.attn_mask = attn_mask;
  cases[3].name = "transform_qk and an attn_mask shared by the batch";
  cases[3].options.attn_mask = Tensor4(xt::view(attn_mask, xt::range(0, 1)));
  // A map that keeps the shapes and, like RoPE, depends on the key's position, so that the key
  // bias no longer adds the same to every score of a row (where softmax would cancel it).
  cases[3].options.transform_qk = [](Tensor4& q, Tensor4& k) {
    q = q * 1.5f;
    for (std::size_t s = 0; s < k.shape(2); ++s)
      xt::view(k, xt::all(), xt::all(), s) *= 1.0f + 0.05f * static_cast<float>(s);
  };
  for (Options& c : cases) {
    SCOPED_TRACE(c.name);
    c.options.need_weights = false;
    const Tensor3 expected = layer.forward(query, kv, kv, c.options).output;
    EXPECT_TRUE(all_close(efficient_forward(layer, query, kv, kv, c.options, false, {16, 8}),
                          expected, kLab06Tolerance));
  }

  SCOPED_TRACE("causal, tiles skipped, against lab 06 with causal_mask(T)");
  const Tensor3 self = random_tokens(B, S, d_model, 44);
  CrossAttentionOptions masked;
  masked.attn_mask = as_attn_mask(causal_mask(S));
  const Tensor3 expected = layer.forward(self, self, self, masked).output;
  EXPECT_TRUE(all_close(efficient_forward(layer, self, self, self, {}, true, {8, 16}), expected,
                        kLab06Tolerance));
}

TEST(EfficientCrossForward, AllocatesNothingOfSizeTTimesS) {
  // The projections are (T, 32) and (S, 32), 128 KiB each at T = S = 1024; the bound is a quarter
  // of one head's (T, S) weights, 1 MiB. Lab 06's forward keeps every head's weights, 8 MiB here.
  // Key padding is S floats per sequence, so it stays under the bound, causal or not; an attn_mask
  // may cost one (T, S) table, never more than the mask passed in (4 MiB here).
  constexpr std::size_t T = 1024, d_model = 32;
  constexpr std::size_t bound = T * T * sizeof(float) / 4, table = T * T * sizeof(float);
  const MultiheadCrossAttention layer = cross_layer(d_model, 2, 45);
  const Tensor3 x = random_tokens(1, T, d_model, 46);
  BoolTensor2 padding = xt::zeros<bool>({std::size_t{1}, T});
  xt::view(padding, 0, xt::range(T - 100, T)) = true;
  CrossAttentionOptions padded;
  padded.key_padding_mask = padding;
  CrossAttentionOptions attn;
  attn.attn_mask = Tensor4(xt::view(random_tokens(1, T, T, 47), xt::all(), xt::newaxis()));
  CrossAttentionOptions both = attn;
  both.key_padding_mask = padding;

  struct MaskCase {
    const char* name;
    const CrossAttentionOptions& options;
    bool causal;
    std::size_t bound;
  };
  const CrossAttentionOptions none;
  for (const MaskCase& c : {MaskCase{"no mask, causal", none, true, bound},
                            MaskCase{"key padding", padded, false, bound},
                            MaskCase{"key padding, causal", padded, true, bound},
                            MaskCase{"attn_mask", attn, false, table + bound},
                            MaskCase{"attn_mask and key padding", both, false, table + bound}}) {
    SCOPED_TRACE(c.name);
    efficient_forward(layer, x, x, x, c.options, c.causal);  // a first call may set up buffers
    EXPECT_LT(workbench::peak_extra_heap_bytes(
                  [&] { efficient_forward(layer, x, x, x, c.options, c.causal); }),
              c.bound);
  }
}

TEST(EfficientCrossForward, RejectsWhatForwardRejectsAndDropoutInTraining) {
  MultiheadCrossAttention layer(16, 4, 47, true, 0.1f);
  const Tensor3 q = random_tokens(2, 3, 16, 48), kv = random_tokens(2, 5, 16, 49);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { efficient_forward(layer, random_tokens(2, 3, 12, 48), kv, kv); },
      {"query", "(2, 3, 12)", "16"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { efficient_forward(layer, q, kv, random_tokens(2, 4, 16, 50)); },
                              {"(2, 5, 16)", "(2, 4, 16)"}));
  CrossAttentionOptions options;
  options.key_padding_mask = BoolTensor2(xt::zeros<bool>({2, 4}));
  EXPECT_TRUE(throws_invalid_argument([&] { efficient_forward(layer, q, kv, kv, options); },
                                      {"key_padding_mask", "(2, 4)", "(2, 5)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { efficient_forward(layer, q, kv, kv, {}, true); },
                                      {"causal", "(2, 3, 16)", "(2, 5, 16)"}));
  layer.train();
  EXPECT_TRUE(throws_invalid_argument([&] { efficient_forward(layer, q, kv, kv); },
                                      {"training", "dropout"}));
}

}  // namespace
}  // namespace minimodel
