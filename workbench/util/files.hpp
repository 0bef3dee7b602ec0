#pragma once
// Reading a whole file, and the one way every tool writes one: atomically.
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace workbench {

/// The bytes of `path`. @throws std::runtime_error naming the file if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// What a file of `type` is, as a refusal says it: "a directory", "a character device", "a FIFO".
const char* file_type_name(std::filesystem::file_type type);

/// Refuses, before anything is written, a `path` that exists and is not a regular file: a folder,
/// a device (/dev/null), a FIFO, a socket, or a symbolic link, which is refused rather than
/// followed (dangling or not). The writers below replace regular files only, and call this first.
/// @throws std::runtime_error "cannot write /dev/null: it is a character device, not a regular
/// file".
void check_replaceable(const std::filesystem::path& path);

/// Writes `content` to `path` atomically: into a new temporary file beside it (a unique name, so
/// no other file is touched), then a rename. Readers see the old file or the new one, never half
/// of one; on failure `path` is unchanged and the temporary is gone. Creates missing folders.
/// @throws std::runtime_error naming `path` and the reason, among them check_replaceable's.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

/// Writes several files all or nothing: each content goes to a temporary beside its path, and
/// only when every one is written are they renamed into place. If a write fails, no path has been
/// touched and every temporary is gone; nothing that existed before is ever removed. Every path
/// passes check_replaceable before any is written.
/// @throws std::runtime_error naming the path that failed and the reason.
void write_files_atomically(
    const std::vector<std::pair<std::filesystem::path, std::string>>& files);

/// Writes a file's content to a stream; a failed stream fails the write.
using FileWriter = std::function<void(std::ostream& out)>;

/// The same, each file's content written by its writer straight into the temporary: for large
/// outputs, which then never exist twice in memory.
void write_files_atomically(const std::vector<std::pair<std::filesystem::path, FileWriter>>& files);

}  // namespace workbench
