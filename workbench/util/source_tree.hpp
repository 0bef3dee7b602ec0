#pragma once
// Where the source tree this program was built from is.
#include <filesystem>

namespace workbench {

/// The source tree the build was configured from (the repository's root). Compiled into
/// source_tree.cpp alone, so that no other file's compile command names an absolute path: a clone
/// elsewhere compiles every other file identically, and a compiler cache can share them.
const std::filesystem::path& source_dir();

}  // namespace workbench
