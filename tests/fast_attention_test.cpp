// Lab 07's tuned efficient_forward (workbench/fast_attention) against the plain reference it
// speeds up (solutions/minimodel/attention/efficient_attention.cpp): the same outputs on several
// shapes, causal and not, with masks, on one thread and two; and neither changes OpenBLAS's
// process-wide thread count, as their headers promise.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>  // OpenBLAS's own: openblas_{get,set}_num_threads
#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "fast_attention/fast_attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "support/checks.hpp"
#include "support/random_tokens.hpp"

// Every call of openblas_set_num_threads in this program, the libraries linked into it included,
// comes here first (the executable's definition interposes on OpenBLAS's), is counted, and goes on
// to OpenBLAS's own.
namespace {
std::atomic<int> blas_thread_changes{0};
}  // namespace

extern "C" void openblas_set_num_threads(int threads) {
  ++blas_thread_changes;
  using Setter = void (*)(int);
  static const Setter openblas = reinterpret_cast<Setter>(dlsym(RTLD_NEXT, __func__));
  openblas(threads);
}

namespace minimodel {
namespace {

using testing::all_close;
using testing::random_tokens;
using testing::throws_invalid_argument;

// Both sum the same products; the tuned path projects a block of rows and a group of heads per
// GEMM, so OpenBLAS blocks the sums differently: outputs of size O(1) differ by a few 1e-7, as lab
// 07's kernel differs from lab 00 (its tests' tolerance, for the same reason).
constexpr double kTolerance = 1e-6;

std::string threads_text(std::size_t threads) {
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

TEST(FastAttention, EqualsThePlainReferenceForLab01sLayer) {
  struct Shape {
    std::size_t B, T, d_model, H;
    Tiles tiles;
    std::size_t key_value_bytes;  // small: heads in groups of 2 (of 6) or 3 (of 8)
  };
  const std::size_t all = std::size_t{16} << 20;
  for (const Shape& s :
       {Shape{2, 45, 32, 4, {16, 8}, all}, Shape{1, 300, 64, 8, {64, 64}, all},
        Shape{1, 1, 16, 2, {64, 64}, all}, Shape{2, 200, 48, 6, {32, 16}, 2 * 200 * 8 * 2 * 4},
        Shape{1, 130, 64, 8, {16, 32}, 3 * 130 * 8 * 2 * 4}}) {
    MultiHeadAttention layer(s.d_model, s.H, 60);
    const Tensor3 x = random_tokens(s.B, s.T, s.d_model, 61);
    for (const bool causal : {false, true}) {
      const Tensor3 expected = efficient_forward(layer, x, causal, s.tiles);
      for (const std::size_t threads : {1, 2}) {
        SCOPED_TRACE("B " + std::to_string(s.B) + ", T " + std::to_string(s.T) + ", H " +
                     std::to_string(s.H) + ", key_value_bytes " +
                     std::to_string(s.key_value_bytes) + (causal ? ", causal, " : ", ") +
                     threads_text(threads));
        fast::FastOptions options;
        options.tiles = s.tiles;
        options.threads = threads;
        options.key_value_bytes = s.key_value_bytes;
        EXPECT_TRUE(
            all_close(fast::efficient_forward(layer, x, causal, options), expected, kTolerance));
      }
    }
  }
}

// Without tiles in its options, the tuned path takes fast::machine_tiles: sizes libxsmm generates
// kernels for, whose working set fits a quarter of this machine's L2 (128 x 128 with a Zen 4's
// 1 MiB at d_head 64), and equals the plain reference run with the same tiles, with partial tiles
// at the end (T = 300), causal and not, on one thread and two.
TEST(FastAttention, ChoosesItsTilesFromTheL2CacheAndEqualsThePlainReferenceWithThem) {
  const std::size_t d_head = 64, l2 = fast::l2_cache_bytes();
  const Tiles tiles = fast::machine_tiles(d_head);
  SCOPED_TRACE("L2 " + std::to_string(l2) + " bytes, tiles " + std::to_string(tiles.queries) +
               " x " + std::to_string(tiles.keys));
  if (l2 == 0) {
    EXPECT_EQ(tiles.queries, 64u);
    EXPECT_EQ(tiles.keys, 64u);
  } else {
    for (const std::size_t size : {tiles.queries, tiles.keys})
      EXPECT_TRUE(size == 32 || size == 64 || size == 128) << size;
    const std::size_t working_set =
        4 * (2 * tiles.queries * d_head + 2 * tiles.keys * d_head + tiles.queries * tiles.keys);
    EXPECT_LE(working_set, l2 / 4);
  }
  MultiHeadAttention layer(8 * d_head, 8, 81);
  const Tensor3 x = random_tokens(1, 300, 8 * d_head, 82);
  for (const bool causal : {false, true})
    for (const std::size_t threads : {1, 2}) {
      SCOPED_TRACE((causal ? "causal, " : "") + threads_text(threads));
      fast::FastOptions options;
      options.threads = threads;
      EXPECT_TRUE(all_close(fast::efficient_forward(layer, x, causal, options),
                            efficient_forward(layer, x, causal, tiles), kTolerance));
    }
}

// The kernel packs K in panels of tiles.keys columns and hands each tile to a small-GEMM kernel
// generated for its sizes (tile_kernel.cpp): sizes that fill no whole tile or vector (T = S = 1,
// T of 67 or 129 with tiles of 24 x 40 or 7 x 5), d_head not a multiple of 8 (12, 20), and
// d_head 80 (where a libxsmm that generates no kernel that size leaves the product to OpenBLAS).
TEST(FastAttention, EqualsThePlainReferenceForOddSizesOfTheSmallGemmKernels) {
  struct Shape {
    std::size_t T, d_model, H;
    Tiles tiles;
  };
  for (const Shape& s :
       {Shape{1, 24, 2, {64, 64}}, Shape{67, 60, 5, {24, 40}}, Shape{129, 40, 2, {7, 5}},
        Shape{67, 160, 2, {64, 64}}, Shape{129, 60, 5, {64, 64}}}) {
    MultiHeadAttention layer(s.d_model, s.H, 79);
    const Tensor3 x = random_tokens(2, s.T, s.d_model, 80);
    for (const bool causal : {false, true}) {
      SCOPED_TRACE("T " + std::to_string(s.T) + ", d_head " + std::to_string(s.d_model / s.H) +
                   ", tiles " + std::to_string(s.tiles.queries) + " x " +
                   std::to_string(s.tiles.keys) + (causal ? ", causal" : ""));
      fast::FastOptions options;
      options.tiles = s.tiles;
      EXPECT_TRUE(all_close(fast::efficient_forward(layer, x, causal, options),
                            efficient_forward(layer, x, causal, s.tiles), kTolerance));
    }
  }
}

TEST(FastAttention, EqualsThePlainReferenceForLab06sLayerWithMasks) {
  constexpr std::size_t B = 2, T = 37, S = 53, d_model = 32, H = 4;
  const MultiheadCrossAttention init(d_model, H, 62, false);
  const auto bias = [&](int seed) {
    return std::optional<Tensor1>(xt::view(random_tokens(1, 1, d_model, seed), 0, 0));
  };
  const MultiheadCrossAttention layer(init.w_q(), init.w_k(), init.w_v(), init.w_o(), bias(63),
                                      bias(64), bias(65), bias(66), H);
  const Tensor3 query = random_tokens(B, T, d_model, 67), kv = random_tokens(B, S, d_model, 68);
  BoolTensor2 padding = xt::zeros<bool>({B, S});
  xt::view(padding, 1, xt::range(S - 20, S)) = true;
  Tensor4 attn_mask = xt::view(random_tokens(B, T, S, 69), xt::all(), xt::newaxis()) * 0.5f;
  for (std::size_t t = 0; t < T; ++t)
    attn_mask(0, 0, t, (7 * t) % S) = -std::numeric_limits<float>::infinity();
  xt::view(attn_mask, 1, 0, 5, xt::range(0, S - 20)) = kMaskedScore;  // a query with no key left

  struct Case {
    const char* name;
    CrossAttentionOptions masks;
  };
  std::vector<Case> cases(5);
  cases[0].name = "no mask";
  cases[1].name = "key padding";
  cases[1].masks.key_padding_mask = padding;
  cases[2].name = "key padding and a per-sequence attn_mask";
  cases[2].masks.key_padding_mask = padding;
  cases[2].masks.attn_mask = attn_mask;
  cases[3].name = "an attn_mask shared by the batch";
  cases[3].masks.attn_mask = Tensor4(xt::view(attn_mask, xt::range(0, 1)));
  cases[4].name = "transform_qk and key padding";
  cases[4].masks.key_padding_mask = padding;
  cases[4].masks.transform_qk = [](Tensor4& q, Tensor4& k) {
    q = q * 1.5f;
    for (std::size_t s = 0; s < k.shape(2); ++s)
      xt::view(k, xt::all(), xt::all(), s) *= 1.0f + 0.05f * static_cast<float>(s);
  };
  for (const Case& c : cases) {
    const Tensor3 expected = efficient_forward(layer, query, kv, kv, c.masks, false, {16, 8});
    for (const std::size_t threads : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + ", " + threads_text(threads));
      fast::FastOptions options;
      options.tiles = {16, 8};
      options.threads = threads;
      EXPECT_TRUE(all_close(fast::efficient_forward(layer, query, kv, kv, c.masks, false, options),
                            expected, kTolerance));
    }
  }

  // Causal self-attention, alone and with key padding.
  const Tensor3 self = random_tokens(B, S, d_model, 70);
  for (const Case& c : {cases[0], cases[1]}) {
    SCOPED_TRACE(std::string("causal, ") + c.name);
    fast::FastOptions options;
    options.tiles = {8, 16};
    options.threads = 2;
    EXPECT_TRUE(all_close(fast::efficient_forward(layer, self, self, self, c.masks, true, options),
                          efficient_forward(layer, self, self, self, c.masks, true, {8, 16}),
                          kTolerance));
  }
}

TEST(FastAttention, RejectsWhatThePlainReferenceRejectsAndNoThreads) {
  const MultiHeadAttention layer(16, 4, 71);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { fast::efficient_forward(layer, random_tokens(2, 3, 12, 72)); }, {"(2, 3, 12)", "16"}));
  fast::FastOptions none;
  none.threads = 0;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { fast::efficient_forward(layer, random_tokens(1, 3, 16, 72), false, none); },
      {"threads", "0"}));
  MultiheadCrossAttention cross(16, 4, 73, true, 0.1f);
  const Tensor3 q = random_tokens(2, 3, 16, 74), kv = random_tokens(2, 5, 16, 75);
  CrossAttentionOptions masks;
  masks.key_padding_mask = BoolTensor2(xt::zeros<bool>({2, 4}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { fast::efficient_forward(cross, q, kv, kv, masks); },
                              {"efficient_forward", "key_padding_mask", "(2, 4)", "(2, 5)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { fast::efficient_forward(cross, q, kv, kv, {}, true); },
                                      {"causal", "(2, 3, 16)", "(2, 5, 16)"}));
  cross.train();
  EXPECT_TRUE(throws_invalid_argument([&] { fast::efficient_forward(cross, q, kv, kv); },
                                      {"training", "dropout"}));
}

TEST(FastAttention, NeitherPathChangesOpenBlasThreads) {
  // The plain reference calls BLAS on whatever count the process set; the tuned path runs threads
  // of its own and leaves OpenBLAS's count to its caller. Two callers at once, on two threads of
  // this test, see the count the test set, and each gets the plain reference's output.
  openblas_set_num_threads(2);
  ASSERT_EQ(blas_thread_changes.exchange(0), 1) << "the counting wrapper sees a call";
  const int before = openblas_get_num_threads();
  const MultiHeadAttention layer(64, 4, 76);
  const MultiheadCrossAttention cross(64, 4, 77);
  const Tensor3 x = random_tokens(1, 200, 64, 78);
  CrossAttentionOptions padded;
  padded.key_padding_mask = BoolTensor2(xt::zeros<bool>({1, 200}));
  const Tensor3 plain = efficient_forward(layer, x, true);
  const Tensor3 plain_cross = efficient_forward(cross, x, x, x, padded, true);
  EXPECT_EQ(blas_thread_changes, 0) << "the plain reference set OpenBLAS's thread count";
  Tensor3 tuned[2], tuned_cross[2];
  const auto caller = [&](int i) {
    fast::FastOptions options;
    options.threads = 2;
    tuned[i] = fast::efficient_forward(layer, x, true, options);
    tuned_cross[i] = fast::efficient_forward(cross, x, x, x, padded, true, options);
  };
  std::thread first(caller, 0), second(caller, 1);
  first.join();
  second.join();
  EXPECT_EQ(blas_thread_changes, 0) << "the tuned path set OpenBLAS's thread count";
  EXPECT_EQ(openblas_get_num_threads(), before);
  for (int i : {0, 1}) {
    EXPECT_TRUE(all_close(tuned[i], plain, kTolerance));
    EXPECT_TRUE(all_close(tuned_cross[i], plain_cross, kTolerance));
  }
}

}  // namespace
}  // namespace minimodel
