#include "tensors/attention_float64.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "minimodel/shapes.hpp"

namespace workbench {

// q: (T, d_head), k: (S, d_head), v: (S, d_v) -> (T, d_v)
Matrix64 attention_float64(const xt::xtensor<float, 2>& q, const xt::xtensor<float, 2>& k,
                           const xt::xtensor<float, 2>& v) {
  using minimodel::shape_of;
  if (q.shape(1) != k.shape(1))
    throw std::invalid_argument("attention_float64: q is " + shape_of(q) + " but k is " +
                                shape_of(k) + "; their widths must match");
  if (k.shape(0) != v.shape(0))
    throw std::invalid_argument("attention_float64: k is " + shape_of(k) + " but v is " +
                                shape_of(v) + "; they need one row per key");
  const std::size_t T = q.shape(0), S = k.shape(0), d = q.shape(1), d_v = v.shape(1);
  Matrix64 out = xt::zeros<double>({T, d_v});
  std::vector<double> w(S);  // one row of scores, then of weights
  for (std::size_t t = 0; t < T; ++t) {
    double max = -HUGE_VAL, sum = 0.0;
    for (std::size_t s = 0; s < S; ++s) {
      double dot = 0.0;
      for (std::size_t i = 0; i < d; ++i) dot += double(q(t, i)) * double(k(s, i));
      w[s] = dot / std::sqrt(double(d));
      max = std::max(max, w[s]);
    }
    for (double& x : w) sum += (x = std::exp(x - max));
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t j = 0; j < d_v; ++j) out(t, j) += w[s] / sum * double(v(s, j));
  }
  return out;
}

double max_abs_error(const xt::xtensor<float, 2>& actual, const Matrix64& truth) {
  if (actual.shape() != truth.shape())
    throw std::invalid_argument("max_abs_error: actual is " + minimodel::shape_of(actual) +
                                " but truth is " + minimodel::shape_of(truth));
  double worst = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(double(actual.flat(i)) - truth.flat(i));
    worst = std::max(worst, std::isnan(diff) ? HUGE_VAL : diff);
  }
  return worst;
}

}  // namespace workbench
