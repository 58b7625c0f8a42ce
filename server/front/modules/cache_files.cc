#include "server/front/modules/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kprof::server::cache_files {

absl::Status ErrnoError(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(std::string(what), " '", path, "': ", std::strerror(errno)));
}

bool IsModuleId(std::string_view id) {
  return id.size() == 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::Status MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0750) != 0 && errno != EEXIST) return ErrnoError("cannot create", path);
  return absl::OkStatus();
}

// Writes `data` to a new temporary file in `dir`, read-only (not synced); returns its path. A
// crash leaves only a ".upload-" file, which the next start removes.
absl::StatusOr<std::string> WriteTemporary(const std::string& dir, const std::string& data) {
  std::string temp = dir + "/.upload-XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create a temporary file in", dir);
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status status = ErrnoError("cannot write", temp);
      close(fd);
      unlink(temp.c_str());
      return status;
    }
    written += static_cast<size_t>(n);
  }
  // No fsync, as for uploads (Upload::Append).
  if (fchmod(fd, 0444) != 0) {
    const absl::Status status = ErrnoError("cannot make read-only", temp);
    close(fd);
    unlink(temp.c_str());
    return status;
  }
  close(fd);
  return temp;
}

// Renames a temporary file into place: readers see the whole module or none of it.
absl::Status Commit(const std::string& temp, const std::string& path) {
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const absl::Status status = ErrnoError("cannot rename into", path);
    unlink(temp.c_str());
    return status;
  }
  return absl::OkStatus();
}

// Removes DIR's files and the files of its subdirectories, then those, then DIR: the views/
// directory of hard links that older caches gave each client's workers.
void RemoveOldViews(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string view = dir + "/" + name;
    if (DIR* v = opendir(view.c_str())) {
      while (dirent* f = readdir(v)) {
        if (f->d_name[0] != '.') unlink((view + "/" + f->d_name).c_str());
      }
      closedir(v);
      rmdir(view.c_str());
    } else {
      unlink(view.c_str());
    }
  }
  closedir(d);
  rmdir(dir.c_str());
}

// What every answer listing a module's functions can carry: GetInfo and ListModules hold them
// all, and one module of 17,000 long names took such answers past gRPC's 64 MiB.
constexpr size_t kMaxExports = 4096;
constexpr size_t kMaxExportNameBytes = 256 << 10;

absl::Status CheckExports(const core::ModuleDescription& info) {
  if (info.functions.size() > kMaxExports) {
    return absl::InvalidArgumentError(absl::StrCat("the module exports ", info.functions.size(),
                                                   " functions (limit ", kMaxExports,
                                                   "); export only the kernels to measure"));
  }
  size_t bytes = 0;
  for (const std::string& name : info.functions) bytes += name.size();
  if (bytes > kMaxExportNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the module's exported names take ", bytes,
                                                   " bytes together (limit ", kMaxExportNameBytes,
                                                   "); export only the kernels to measure"));
  }
  return absl::OkStatus();
}

}  // namespace kprof::server::cache_files
