#include "base/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kprof::base {

namespace {

// Every byte of `fd` from its current offset; false (errno set) when a read fails or the bytes
// do not fit in memory (ENOMEM).
bool ReadToEnd(int fd, std::string& bytes) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    try {
      bytes.append(buffer, static_cast<size_t>(n));
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error
      errno = ENOMEM;
      return false;
    }
  }
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", std::string(what), " '", path, "': ", std::strerror(errno)));
  }
  struct stat info {};
  if (fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", std::string(what), " '", path,
                                                   "': it is a directory, not a file"));
  }
  std::string bytes;
  // Up front for a regular file of a sane size; a larger or sparse one grows as it is read (and
  // fails as a status, not an exception, when memory runs out).
  constexpr off_t kReserveAtMost = off_t{1} << 30;
  if (S_ISREG(info.st_mode) && info.st_size > 0 && info.st_size <= kReserveAtMost) {
    bytes.reserve(static_cast<size_t>(info.st_size));
  }
  const bool read_all = ReadToEnd(fd, bytes);
  const int error = errno;
  close(fd);
  if (!read_all) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", std::string(what), " '", path, "': ", std::strerror(error)));
  }
  return bytes;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  const bool read_all = ReadToEnd(fd, text);
  close(fd);
  if (!read_all) return std::nullopt;
  return text;
}

std::optional<std::string> ReadFirstLine(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  const absl::string_view line = absl::string_view(*text).substr(0, text->find('\n'));
  return std::string(absl::StripAsciiWhitespace(line));
}

std::optional<uint64_t> ReadCountFile(const std::string& path) {
  const std::optional<std::string> text = ReadFirstLine(path);
  uint64_t value = 0;
  if (!text || !absl::SimpleAtoi(*text, &value)) return std::nullopt;
  return value;
}

std::optional<double> ReadDecimalFile(const std::string& path) {
  const std::optional<std::string> text = ReadFirstLine(path);
  double value = 0;
  if (!text || !absl::SimpleAtod(*text, &value) || !(value >= 0) || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::filesystem::path> DirectoryEntries(const std::filesystem::path& dir,
                                                    std::string_view prefix) {
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  return found;
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

}  // namespace kprof::base

namespace kprof::base {

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

}  // namespace kprof::base
