#include "util/source_tree.hpp"

#ifndef MINIMODEL_SOURCE_DIR
#error "MINIMODEL_SOURCE_DIR must be defined by the build (see workbench/util/CMakeLists.txt)"
#endif

namespace workbench {

const std::filesystem::path& source_dir() {
  static const std::filesystem::path dir = MINIMODEL_SOURCE_DIR;
  return dir;
}

}  // namespace workbench
