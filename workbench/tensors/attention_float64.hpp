#pragma once
// Attention in float64: the truth that lab 11's float32, bf16 and fp16 kernels are measured
// against, by its tests and by its verify program alike.
#include <xtensor/xtensor.hpp>

namespace workbench {

using Matrix64 = xt::xtensor<double, 2>;

/// softmax(q kᵀ / sqrt(d_head)) v, every operation in double, from the float inputs as given
/// (each widened exactly, so only the attention's own arithmetic differs from a float kernel's).
/// q: (T, d_head), k: (S, d_head), v: (S, d_v) -> (T, d_v)
/// @throws std::invalid_argument if q and k differ in width or k and v in length, naming both
///         shapes.
Matrix64 attention_float64(const xt::xtensor<float, 2>& q, const xt::xtensor<float, 2>& k,
                           const xt::xtensor<float, 2>& v);

/// max |actual - truth| over all elements, in double; +inf if an element of `actual` is NaN, so
/// that a NaN output counts as the worst error (std::max would drop it).
/// @throws std::invalid_argument naming both shapes if they differ.
double max_abs_error(const xt::xtensor<float, 2>& actual, const Matrix64& truth);

}  // namespace workbench
