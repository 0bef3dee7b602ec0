// Lab 02: the causal (look-back-only) mask.
// Read labs/02-causal-mask.md first. The API and its shapes are in attention.hpp.
#include "minimodel/attention/attention.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// Block A. -> (T, T): 0 where key j <= query i, kMaskedScore where j > i (the future).
Tensor2 causal_mask(std::size_t T) {
  // TODO(lab 02, Block A): build the (T, T) causal mask — see labs/02-causal-mask.md
  throw Todo("TODO(lab 02, Block A): build the (T, T) causal mask — see labs/02-causal-mask.md");
}

}  // namespace minimodel
