#include "server/frame_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"

namespace kprof::server {
namespace {

absl::Status Errno(std::string_view what) {
  return absl::UnavailableError(absl::StrCat(std::string(what), ": ", std::strerror(errno)));
}

}  // namespace

absl::Status FrameChannel::Write(const google::protobuf::MessageLite& message,
                                 absl::Span<const int> fds) {
  if (fds.size() > kMaxFds) {
    return absl::InvalidArgumentError(
        absl::StrCat(fds.size(), " descriptors for one frame (limit ", kMaxFds, ")"));
  }
  const size_t size = message.ByteSizeLong();
  if (size > max_frame_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("message of ", size, " bytes is over the frame limit of ", max_frame_bytes_));
  }
  std::string frame;
  frame.resize(google::protobuf::io::CodedOutputStream::VarintSize32(static_cast<uint32_t>(size)) +
               size);
  auto* out = reinterpret_cast<uint8_t*>(frame.data());
  out = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(size),
                                                                      out);
  if (!message.SerializeToArray(out, static_cast<int>(size))) {
    return absl::InternalError("cannot serialise a frame");
  }
  // The descriptors ride with the first send; the kernel delivers them with the first byte.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  for (size_t sent = 0; sent < frame.size();) {
    iovec iov{frame.data() + sent, frame.size() - sent};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {
      header.msg_control = control;
      header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&header);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    // MSG_NOSIGNAL: a dead peer is an error here, not a SIGPIPE for the whole process.
    const ssize_t n = sendmsg(fd_, &header, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("writing a frame");
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FrameChannel::ReadExactly(char* data, size_t size, bool at_frame_start,
                                       std::vector<int>* fds) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  for (size_t got = 0; got < size;) {
    iovec iov{data + got, size - got};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &header, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("reading a frame");
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (fds != nullptr) {
          fds->push_back(fd);
        } else {
          close(fd);  // not asked for: a peer cannot fill this process with descriptors
        }
      }
    }
    if (n == 0) {
      return absl::UnavailableError(at_frame_start && got == 0 ? "end of stream"
                                                               : "end of stream inside a frame");
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FrameChannel::Read(google::protobuf::MessageLite* message, std::vector<int>* fds) {
  uint64_t size = 0;
  for (int shift = 0;; shift += 7) {
    if (shift > 28) return absl::DataLossError("frame length is not a valid varint");
    char byte = 0;
    if (absl::Status s = ReadExactly(&byte, 1, shift == 0, fds); !s.ok()) return s;
    size |= uint64_t{static_cast<unsigned char>(byte) & 0x7Fu} << shift;
    if ((static_cast<unsigned char>(byte) & 0x80u) == 0) break;
  }
  if (size > max_frame_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("incoming frame of ", size, " bytes is over the limit of ", max_frame_bytes_));
  }
  std::string body(size, '\0');
  if (absl::Status s = ReadExactly(body.data(), body.size(), false, fds); !s.ok()) return s;
  if (!message->ParseFromString(body)) return absl::DataLossError("a frame does not parse");
  return absl::OkStatus();
}

absl::Status FrameChannel::WaitReadable(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    const int ms =
        left <= absl::ZeroDuration()
            ? 0
            : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno("waiting for a frame");
    if (r > 0) return absl::OkStatus();  // readable, or hung up: Read tells which
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("no frame in time");
  }
}

}  // namespace kprof::server
