#include "base/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kprof::core {

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", std::string(what), " '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

absl::StatusOr<std::string> ReadDescriptor(int fd) {
  std::string bytes;
  char buffer[1 << 16];
  for (off_t offset = 0;;) {
    const ssize_t n = pread(fd, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the module: ", std::strerror(errno)));
    }
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
}

}  // namespace kprof::core

namespace kprof::core {

std::string ReadKeptOpen(const std::string& path) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const open_files = new std::map<std::string, int>;
  int fd = -1;
  {
    absl::MutexLock lock(&mutex);
    auto [it, added] = open_files->emplace(path, -1);
    if (it->second < 0) it->second = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    fd = it->second;
  }
  char text[4096];
  for (int attempt = 0; fd >= 0 && attempt < 2; ++attempt) {
    const ssize_t n = pread(fd, text, sizeof text, 0);
    if (n >= 0) return std::string(text, static_cast<size_t>(n));
    // Closed under us (by a function the worker ran, say), so that the number may be someone
    // else's now: not closed here; opened again, once.
    absl::MutexLock lock(&mutex);
    int& kept = (*open_files)[path];
    if (kept == fd) kept = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    fd = kept;
  }
  return "";
}

}  // namespace kprof::core
