#pragma once
// What a learner stub throws until its lab is done. Tests, verify programs and the workbook
// runner recognise it by the message prefix "TODO(lab NN, Block X)".
#include <stdexcept>

namespace minimodel {

class Todo : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace minimodel
