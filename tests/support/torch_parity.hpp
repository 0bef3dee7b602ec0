#pragma once
// Runs MultiHeadAttention on a PyTorch fixture case and compares output and weights.
#include <functional>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "minimodel/attention/attention.hpp"
#include "support/checks.hpp"
#include "support/fixtures.hpp"

namespace minimodel::testing {

/// Parity with torch.nn.MultiheadAttention on fixture `name`, output and weights to
/// kTorchTolerance. `causal_mask_of` builds the (T, T) mask of a causal case: lab 02's causal_mask,
/// passed by lab 02's tests, so that lab 01's tests (non-causal cases only) need no code of lab 02.
inline void expect_matches_torch(const std::string& name,
                                 const std::function<Tensor2(std::size_t)>& causal_mask_of = {}) {
  SCOPED_TRACE("fixture " + name);
  const Fixture fixture(name);
  MultiHeadAttention mha(fixture.array<2>("w_q"), fixture.array<2>("w_k"), fixture.array<2>("w_v"),
                         fixture.array<2>("w_o"), fixture.meta().at("n_heads").get<std::size_t>());
  const bool causal = fixture.meta().at("causal").get<bool>();
  ASSERT_TRUE(!causal || causal_mask_of) << name << " is causal: pass causal_mask";
  if (fixture.rank("x") == 2) {
    const Tensor2 x = fixture.array<2>("x");
    const auto mask = causal ? std::optional<Tensor2>(causal_mask_of(x.shape(0))) : std::nullopt;
    EXPECT_TRUE(all_close(mha.forward(x, mask), fixture.array<2>("y"), kTorchTolerance));
  } else {
    const Tensor3 x = fixture.array<3>("x");
    const auto mask = causal ? std::optional<Tensor2>(causal_mask_of(x.shape(1))) : std::nullopt;
    EXPECT_TRUE(all_close(mha.forward(x, mask), fixture.array<3>("y"), kTorchTolerance));
  }
  EXPECT_TRUE(all_close(mha.attention_weights(), fixture.array<4>("attn"), kTorchTolerance));
}

}  // namespace minimodel::testing
