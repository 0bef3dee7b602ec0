// Lab 01 reference, Block D: the test a learner writes. Heads are interchangeable: permuting the
// column blocks of W_Q, W_K and W_V and the row blocks of W_O by the same permutation leaves the
// layer's output unchanged and permutes its attention maps (theory/03-multi-head.md,
// "Head-permutation symmetry").
#include <array>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "support/checks.hpp"
#include "support/random_tokens.hpp"

namespace minimodel {
namespace {

// float32 sums of O(10) products of O(1) numbers, as in tests/lab01_test.cpp: errors near 1e-6.
constexpr double kTolerance = 1e-5;

TEST(MultiHeadAttention, PermutingHeadsLeavesTheOutputUnchanged) {
  const std::size_t d = 24, H = 4, d_head = d / H;
  MultiHeadAttention mha(d, H, 21);
  const std::array<std::size_t, H> order = {2, 0, 3, 1};  // new head h is old head order[h]
  Tensor2 w_q(mha.w_q().shape()), w_k(w_q.shape()), w_v(w_q.shape()), w_o(w_q.shape());
  for (std::size_t h = 0; h < H; ++h) {
    auto to = xt::range(h * d_head, (h + 1) * d_head);
    auto from = xt::range(order[h] * d_head, (order[h] + 1) * d_head);
    xt::view(w_q, xt::all(), to) = xt::view(mha.w_q(), xt::all(), from);
    xt::view(w_k, xt::all(), to) = xt::view(mha.w_k(), xt::all(), from);
    xt::view(w_v, xt::all(), to) = xt::view(mha.w_v(), xt::all(), from);
    xt::view(w_o, to, xt::all()) = xt::view(mha.w_o(), from, xt::all());
  }
  MultiHeadAttention permuted(w_q, w_k, w_v, w_o, H);
  const Tensor3 x = testing::random_tokens(2, 6, d, 22);
  EXPECT_TRUE(testing::all_close(permuted.forward(x), mha.forward(x), kTolerance));
  for (std::size_t h = 0; h < H; ++h)
    EXPECT_TRUE(testing::all_close(xt::view(permuted.attention_weights(), xt::all(), h),
                                   xt::view(mha.attention_weights(), xt::all(), order[h]),
                                   kTolerance))
        << "new head " << h << " is old head " << order[h];
}

}  // namespace
}  // namespace minimodel
