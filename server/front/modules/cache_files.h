// The module cache's files: written whole or not at all, named by their SHA-256, and what a
// module must be to be kept (ModuleRegistry's, on opening the cache and on each store).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/modules/module_format.h"

namespace kprof::server::cache_files {

// INTERNAL naming `what`, `path` and errno's text.
absl::Status ErrnoError(std::string_view what, const std::string& path);

// Whether `id` is a module id: 64 lowercase hex digits (a SHA-256).
bool IsModuleId(std::string_view id);

// mkdir mode 0750; an existing directory is fine.
absl::Status MakeDirectory(const std::string& path);

// Writes `data` to a new read-only temporary file (".upload-XXXXXX") in `dir`; its path.
absl::StatusOr<std::string> WriteTemporary(const std::string& dir, const std::string& data);

// Renames `temp` to `path` (removing `temp` when it cannot): readers see all or nothing.
absl::Status Commit(const std::string& temp, const std::string& path);

// Removes the views/ directory of hard links that older caches kept, with what it holds.
void RemoveOldViews(const std::string& dir);

// A module's exported names fit every answer that lists them (GetInfo, ListModules): at most
// 4096 functions and 256 KiB of names.
absl::Status CheckExports(const core::ModuleDescription& info);

}  // namespace kprof::server::cache_files
