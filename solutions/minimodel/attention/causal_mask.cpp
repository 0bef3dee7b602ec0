// Lab 02 reference: the causal (look-back-only) mask.
#include "minimodel/attention/attention.hpp"

namespace minimodel {

// Block A. -> (T, T): 0 where key j <= query i, kMaskedScore where j > i (the future).
Tensor2 causal_mask(std::size_t T) {
  Tensor2 mask = xt::zeros<float>({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = i + 1; j < T; ++j) mask(i, j) = kMaskedScore;
  return mask;
}

}  // namespace minimodel
