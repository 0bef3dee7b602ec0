// Lab 01, Block D: a test you write yourself. Heads are interchangeable: permuting the column
// blocks of W_Q, W_K and W_V and the row blocks of W_O by the same permutation leaves the layer's
// output unchanged and permutes its attention maps (theory/03-multi-head.md, "Head-permutation
// symmetry"). Read labs/01-multi-head-attention.md, Block D, first.
#include <array>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/attention/attention.hpp"
#include "support/checks.hpp"         // testing::all_close(actual, expected, tolerance)
#include "support/random_tokens.hpp"  // testing::random_tokens(B, T, d_model, seed)

namespace minimodel {
namespace {

TEST(MultiHeadAttention, PermutingHeadsLeavesTheOutputUnchanged) {
  // TODO(lab 01, Block D): permute the heads of a seeded layer, build a second layer from the
  // permuted weights, and check its output and attention maps — see labs/01-multi-head-attention.md
  FAIL() << "TODO(lab 01, Block D): permute the heads of a seeded layer, build a second layer "
            "from the permuted weights, and check its output and attention maps — see "
            "labs/01-multi-head-attention.md";
}

}  // namespace
}  // namespace minimodel
