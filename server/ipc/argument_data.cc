#include "server/ipc/argument_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kprof::server {

absl::Status ReadArgumentFile(int fd, kprof::worker::v1::WorkerAnswer* answer) {
  constexpr int kSeals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSeals) != kSeals) {
    return absl::DataLossError("the arguments' file is not sealed against change");
  }
  // Each argument's bytes but the unsent ones', then the initial bytes a reference's run sent.
  const kprof::worker::v1::ArgumentData& data = answer->arguments();
  if (data.unsent_size() > data.sizes_size()) {
    return absl::DataLossError(absl::StrCat("the arguments' file leaves out ", data.unsent_size(),
                                            " of ", data.sizes_size(), " arguments"));
  }
  uint64_t total = 0;
  bool overflow = false;  // sizes that wrap the sum around would make any file fit
  const auto add = [&](uint64_t size) {
    overflow |= total + size < total;
    total += size;
  };
  for (int k = 0; k < data.sizes_size(); ++k) {
    if (k >= data.unsent_size() || !data.unsent(k)) add(data.sizes(k));
  }
  for (uint32_t k : data.initial()) {
    if (k >= static_cast<uint32_t>(data.sizes_size())) {
      return absl::DataLossError(absl::StrCat("the arguments' file holds the initial bytes of ",
                                              "argument ", k, " of ", data.sizes_size()));
    }
    add(data.sizes(static_cast<int>(k)));
  }
  if (overflow) return absl::DataLossError("the arguments' sizes add up past 2^64 bytes");
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != total) {
    return absl::DataLossError(absl::StrCat("the arguments' file holds ", st.st_size,
                                            " bytes where their sizes add up to ", total));
  }
  std::string* bytes = answer->mutable_argument_bytes();
  bytes->resize(total);
  for (uint64_t done = 0; done < total;) {
    const ssize_t n = pread(fd, bytes->data() + done, total - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat("cannot read the arguments' file: ",
                                              n < 0 ? std::strerror(errno) : "it ended early"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace kprof::server
