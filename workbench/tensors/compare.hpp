#pragma once
// Comparing two float32 arrays the way the tests, the verify programs and `workbook diff` do.
#include <xtensor/xarray.hpp>

namespace workbench {

/// max |a - b| over all elements, in double; NaN if either holds a NaN.
/// @throws std::invalid_argument naming both shapes if they differ.
double max_abs_diff(const xt::xarray<float>& a, const xt::xarray<float>& b);

}  // namespace workbench
