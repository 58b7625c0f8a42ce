#include "core/read_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

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
