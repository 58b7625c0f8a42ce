#include "server/worker/argument_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kprof::server {
namespace {

absl::Status FileError(const char* what, int fd) {
  const int error = errno;
  if (fd >= 0) close(fd);
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot ", what, " the file of the checked call's arguments: ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<int> WriteArgumentFile(const core::Arguments& args,
                                      kprof::worker::v1::ArgumentData* data,
                                      const std::vector<std::string>* before) {
  uint64_t total = 0;
  for (const core::ArgSpec& spec : args.specs()) {
    data->add_sizes(spec.num_bytes);
    total += spec.num_bytes;
  }
  const int fd = memfd_create("kprof-arguments", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return FileError("make", -1);
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) return FileError("size", fd);
  if (total > 0) {
    void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return FileError("map", fd);
    auto* out = static_cast<unsigned char*>(map);
    absl::Status read = absl::OkStatus();
    for (size_t k = 0; k < args.specs().size() && read.ok(); ++k) {
      const uint64_t bytes = args.specs()[k].num_bytes;
      read = args.ReadBack(k, out);
      if (before != nullptr && read.ok()) {
        data->add_changed((*before)[k].size() != bytes ||
                          std::memcmp((*before)[k].data(), out, bytes) != 0);
      }
      out += bytes;
    }
    munmap(map, total);
    if (!read.ok()) {
      close(fd);
      return read;
    }
  }
  if (before != nullptr && total == 0) data->mutable_changed()->Resize(args.size(), false);
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    return FileError("seal", fd);
  }
  return fd;
}

absl::StatusOr<std::vector<std::string>> CopyArguments(const core::Arguments& args) {
  std::vector<std::string> copies;
  copies.reserve(args.specs().size());
  for (size_t k = 0; k < args.specs().size(); ++k) {
    std::string bytes(args.specs()[k].num_bytes, '\0');
    KPROF_RETURN_IF_ERROR(args.ReadBack(k, bytes.data()));
    copies.push_back(std::move(bytes));
  }
  return copies;
}

}  // namespace kprof::server
