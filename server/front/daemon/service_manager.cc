#include "server/front/daemon/service_manager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"

namespace kprof::server {
namespace {

// `path` as a socket address: a file system path, or "@name" in the abstract namespace.
bool SocketAddress(std::string_view path, sockaddr_un* address, socklen_t* length) {
  *address = {};
  address->sun_family = AF_UNIX;
  if (path.size() < 2 || path.size() >= sizeof address->sun_path ||
      (path[0] != '/' && path[0] != '@')) {
    return false;
  }
  std::memcpy(address->sun_path, path.data(), path.size());
  if (path[0] == '@') address->sun_path[0] = '\0';
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                   (path[0] == '/' ? 1 : 0));
  return true;
}

// One unconnected datagram socket for the process's life, each message addressed: the kernel
// serialises sends on it, so threads share it without a lock.
int DatagramSocket() {
  static const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  return fd;
}

// The entry in the native protocol's wire form.
std::string Serialize(const std::vector<std::string>& fields) {
  std::string entry;
  for (const std::string& field : fields) {
    const size_t equals = field.find('=');
    if (equals == std::string::npos) continue;  // not KEY=value: nothing the journal takes
    const std::string_view value = std::string_view(field).substr(equals + 1);
    if (value.find('\n') == std::string_view::npos) {
      entry.append(field).push_back('\n');
      continue;
    }
    entry.append(field, 0, equals).push_back('\n');
    uint64_t size = value.size();
    char little_endian[8];
    for (char& byte : little_endian) {
      byte = static_cast<char>(size & 0xff);
      size >>= 8;
    }
    entry.append(little_endian, sizeof little_endian).append(value).push_back('\n');
  }
  return entry;
}

// The entry in a sealed memfd, passed as the datagram's only content.
bool SendAsMemfd(int socket_fd, const sockaddr_un& address, socklen_t length,
                 const std::string& entry) {
  const int memfd = memfd_create("kprofd-journal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return false;
  size_t written = 0;
  while (written < entry.size()) {
    const ssize_t n = write(memfd, entry.data() + written, entry.size() - written);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      close(memfd);
      return false;
    }
    written += static_cast<size_t>(n);
  }
  if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    close(memfd);
    return false;
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_name = const_cast<sockaddr_un*>(&address);
  message.msg_namelen = length;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &memfd, sizeof(int));
  const bool sent = sendmsg(socket_fd, &message, MSG_NOSIGNAL) >= 0;
  close(memfd);
  return sent;
}

}  // namespace

bool NotifyServiceManager(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  sockaddr_un address;
  socklen_t length = 0;
  if (path == nullptr || !SocketAddress(path, &address, &length)) return false;
  const int fd = DatagramSocket();
  if (fd < 0) return false;
  return sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                reinterpret_cast<const sockaddr*>(&address), length) >= 0;
}

std::optional<absl::Duration> WatchdogInterval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  uint64_t microseconds = 0;
  if (usec == nullptr || !absl::SimpleAtoi(usec, &microseconds) || microseconds == 0 ||
      microseconds > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  // Meant for this process, unless another's pid is named (a child that inherited it).
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr) {
    int64_t named = 0;
    if (!absl::SimpleAtoi(pid, &named) || named != getpid()) return std::nullopt;
  }
  return absl::Microseconds(static_cast<int64_t>(microseconds));
}

bool SendToJournal(const std::vector<std::string>& fields, const std::string& socket_path) {
  sockaddr_un address;
  socklen_t length = 0;
  if (!SocketAddress(socket_path, &address, &length)) return false;
  const int fd = DatagramSocket();
  if (fd < 0) return false;
  const std::string entry = Serialize(fields);
  if (sendto(fd, entry.data(), entry.size(), MSG_NOSIGNAL,
             reinterpret_cast<const sockaddr*>(&address), length) >= 0) {
    return true;
  }
  // Larger than a datagram may be: the same bytes by descriptor.
  if (errno != EMSGSIZE && errno != ENOBUFS) return false;
  return SendAsMemfd(fd, address, length, entry);
}

}  // namespace kprof::server
