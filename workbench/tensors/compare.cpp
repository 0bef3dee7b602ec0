#include "tensors/compare.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "minimodel/shapes.hpp"

namespace workbench {

double max_abs_diff(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("max_abs_diff: " + minimodel::shape_of(a) + " vs " +
                                minimodel::shape_of(b));
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(static_cast<double>(a.flat(i)) - static_cast<double>(b.flat(i)));
    if (std::isnan(diff)) return diff;
    worst = std::max(worst, diff);
  }
  return worst;
}

}  // namespace workbench
