#include "server/worker/argument_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

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

ArgumentFile::~ArgumentFile() { Discard(); }

void ArgumentFile::Discard() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  remembered_.clear();
  left_out_.clear();
}

absl::Status ArgumentFile::Remember(const core::Arguments& args) {
  const size_t count = args.specs().size();
  remembered_.assign(count, false);
  uint64_t total = 0;
  for (size_t k = 0; k < count; ++k) total += args.specs()[k].num_bytes;
  if (total > kRememberedBytes) return absl::OkStatus();
  if (before_.size() < count) before_.resize(count);
  for (size_t k = 0; k < count; ++k) {
    const char* from = static_cast<const char*>(args.HostData(k));
    if (from == nullptr) continue;  // device memory: sent whole, as it must be read back anyway
    before_[k].assign(from, args.specs()[k].num_bytes);
    remembered_[k] = true;
  }
  return absl::OkStatus();
}

absl::Status ArgumentFile::Write(const char* from, uint64_t bytes) {
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = write(fd_, from + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return FileError("write", -1);
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ArgumentFile::Append(const core::Arguments& args,
                                  kprof::worker::v1::ArgumentData* data,
                                  const std::vector<std::string>* before) {
  // The file goes out even empty (every argument left out): the answer says what it holds.
  if (fd_ < 0) {
    fd_ = memfd_create("kprof-arguments", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0) return FileError("make", -1);
  }
  // write(2) from the tensors themselves: the kernel fills the file's pages as it takes them,
  // without the page faults (and zeroing) a mapping of the new file would cost.
  std::string staging;  // device memory goes through the host
  for (size_t k = 0; k < args.specs().size(); ++k) {
    const uint64_t bytes = args.specs()[k].num_bytes;
    data->add_sizes(bytes);
    if (k < left_out_.size() && left_out_[k] && before == nullptr) {
      data->add_unsent(true);
      continue;
    }
    const char* from = static_cast<const char*>(args.HostData(k));
    if (from == nullptr) {
      staging.resize(bytes);
      KPROF_RETURN_IF_ERROR(args.ReadBack(k, staging.data()));
      from = staging.data();
    }
    // Left as it was: its bytes are the initial data, which the front has already.
    const bool unsent = k < remembered_.size() && remembered_[k] &&
                        std::memcmp(before_[k].data(), from, bytes) == 0;
    data->add_unsent(unsent);
    if (before != nullptr) {
      data->add_changed((*before)[k].size() != bytes ||
                        std::memcmp((*before)[k].data(), from, bytes) != 0);
    }
    if (!unsent) KPROF_RETURN_IF_ERROR(Write(from, bytes));
  }
  remembered_.clear();
  left_out_.clear();
  for (std::string& kept : before_) {
    if (kept.capacity() > (uint64_t{8} << 20)) std::string().swap(kept);  // not held for long
  }
  if (before == nullptr) return absl::OkStatus();
  // A reference's run: what it changed, as it was before, for the candidates that leave it so.
  const int first = data->changed_size() - static_cast<int>(args.specs().size());
  for (size_t k = 0; k < args.specs().size(); ++k) {
    if (!data->changed(first + static_cast<int>(k))) continue;
    data->add_initial(static_cast<uint32_t>(k));
    KPROF_RETURN_IF_ERROR(Write((*before)[k].data(), (*before)[k].size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ArgumentFile::Seal() {
  const int fd = std::exchange(fd_, -1);
  if (fd < 0) return -1;
  // EBUSY: the kernel found pages of the file still referenced after waiting some 150 ms for
  // them (seen once in 120 strict runs on a loaded 2-CPU host, the pages just written): the
  // references are the kernel's own and pass, so the seal is tried again, a few times.
  for (int attempt = 0;; ++attempt) {
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) == 0) {
      return fd;
    }
    if (errno != EBUSY || attempt == 3) return FileError("seal", fd);
  }
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
