#pragma once
// Shape strings for error messages. xtensor drops shapes from its own messages in Release builds,
// so every public function checks its inputs and names both shapes itself:
//   throw std::invalid_argument("MultiHeadAttention::forward: x is " + shape_of(x) + " but ...");
#include <sstream>
#include <string>

namespace minimodel {

/// "(4, 8, 60)" for a tensor of that shape.
template <class E>
std::string shape_of(const E& e) {
  std::ostringstream out;
  out << '(';
  for (std::size_t i = 0; i < e.dimension(); ++i) out << (i ? ", " : "") << e.shape()[i];
  out << ')';
  return out.str();
}

}  // namespace minimodel
