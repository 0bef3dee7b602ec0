#pragma once
// The run manifest every verify program writes: what ran, on what, with which result.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace workbench {

/// Build and machine facts for a manifest:
///   git_sha, git_dirty (of the source tree this binary was built from; "unknown"/null outside
///   git), versions {compiler, cxx_standard, xtensor, xtensor_blas, blas {library, config,
///   threads},
///             cmake, build_type},
///   hardware {cpu_model, cores, ram_bytes}.
nlohmann::json environment_facts();

/// Writes `doc` as pretty JSON to `path` atomically (workbench::write_file_atomically).
/// @throws std::runtime_error if it cannot be written.
void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& doc);

}  // namespace workbench
