#pragma once
// The machinery every checkpoint shares (lab 10's and lab 13's): a folder of files written all or
// nothing, the checkpoint it replaces kept as DIR.previous, and its config.json read safely.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/files.hpp"  // FileWriter

namespace workbench {

/// The file that makes a folder a checkpoint.
inline constexpr const char* kCheckpointConfigFile = "config.json";

/// Writes `files` (names inside the folder, each with its writer; one must be config.json) as the
/// folder `dir`: first into a new sibling folder DIR.partial-XXXXXX, then renamed into place, so
/// that `dir` is a whole checkpoint or absent, never half of one. A `dir` that already holds a
/// checkpoint (it has a config.json) is first renamed to DIR.previous, replacing an older
/// .previous; a `dir` that exists and is not a checkpoint, or a link where either would go, is
/// refused before anything is written. Missing parent folders are created; the folders that
/// earlier saves of `dir` left when they were killed are removed first.
/// @throws std::runtime_error naming the path and the reason (nothing is left half written).
void write_checkpoint_folder(const std::filesystem::path& dir,
                             const std::vector<std::pair<std::string, FileWriter>>& files);

/// Reads `dir`/config.json as a JSON object, refusing (with one message naming the file) a
/// missing folder or file, text that is not JSON, nesting deeper than kMaxJsonDepth, or a
/// "format" other than `format`.
/// @throws std::runtime_error.
nlohmann::json read_checkpoint_config(const std::filesystem::path& dir, const std::string& format);

}  // namespace workbench
