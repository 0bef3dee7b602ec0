#pragma once

namespace minimodel {

/// "learner" or "reference": which implementation of the API this program is linked against.
/// CMake generates the definition into each library.
const char* implementation_name();

}  // namespace minimodel
