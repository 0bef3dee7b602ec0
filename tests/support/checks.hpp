#pragma once
// Assertions shared by the lab tests: tensor closeness that says where it failed, and bad-input
// checks that demand std::invalid_argument with the shapes in its message.
#include <cmath>
#include <functional>
#include <initializer_list>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>

#include "minimodel/shapes.hpp"

namespace minimodel::testing {

/// 6 significant digits: enough to see a difference, short enough to read.
inline std::string short_number(double value, int digits = 6) {
  std::ostringstream out;
  out << std::setprecision(digits) << value;
  return out.str();
}

/// Passes when `actual` and `expected` have one shape and every element differs by at most
/// `tolerance`; otherwise reports the max abs diff, the index where it occurs and both values.
template <class A, class E>
::testing::AssertionResult all_close(const A& actual, const E& expected, double tolerance) {
  const xt::xarray<double> a = actual, e = expected;
  if (a.shape() != e.shape())
    return ::testing::AssertionFailure()
           << "shape " << shape_of(a) << " but expected " << shape_of(e);
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a.flat(i) - e.flat(i));
    if (!(diff <= worst)) {  // also catches NaN
      worst = diff;
      at = i;
      if (std::isnan(diff)) break;
    }
  }
  if (worst <= tolerance) return ::testing::AssertionSuccess();
  std::ostringstream index;
  const auto multi = xt::unravel_index(at, a.shape());
  for (std::size_t d = 0; d < multi.size(); ++d) index << (d ? ", " : "") << multi[d];
  // Two floats a few ulps apart look equal at 6 digits; 9 digits tell any two floats apart.
  const int digits = short_number(a.flat(at)) == short_number(e.flat(at)) ? 9 : 6;
  return ::testing::AssertionFailure()
         << "max |actual - expected| = " << short_number(worst) << " > tolerance "
         << short_number(tolerance) << " at (" << index.str() << "): actual "
         << short_number(a.flat(at), digits) << ", expected " << short_number(e.flat(at), digits);
}

/// Passes when `call` throws std::invalid_argument whose message contains every one of `parts`
/// (typically both shapes). Any other outcome is reported with what happened instead.
inline ::testing::AssertionResult throws_invalid_argument(
    const std::function<void()>& call, std::initializer_list<std::string> parts) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      if (message.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "std::invalid_argument \"" << message << "\" does not mention \"" << part << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "expected std::invalid_argument, got: " << e.what();
  }
  return ::testing::AssertionFailure() << "expected std::invalid_argument, nothing was thrown";
}

}  // namespace minimodel::testing
