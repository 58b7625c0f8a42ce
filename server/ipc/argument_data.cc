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
  uint64_t total = 0;
  for (uint64_t size : answer->arguments().sizes()) total += size;
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
