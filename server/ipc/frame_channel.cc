#include "server/ipc/frame_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"

namespace kprof::server {
namespace {

using google::protobuf::io::CodedOutputStream;

// What one recvmsg asks for at least: a worker's answers and a front's jobs are mostly small,
// and several of them fit.
constexpr size_t kReadChunk = 64 << 10;
// A buffer grown past this for one large frame is given back once it is empty.
constexpr size_t kKeptBuffer = 1 << 20;

absl::Status Errno(std::string_view what) {
  return absl::UnavailableError(absl::StrCat(std::string(what), ": ", std::strerror(errno)));
}

// A varint of at most 32 bits at data[0..size): its length, 0 when incomplete, -1 when malformed.
int DecodeVarint(const char* data, size_t size, uint64_t* value) {
  *value = 0;
  for (int i = 0; i < 5; ++i) {
    if (static_cast<size_t>(i) >= size) return 0;
    const auto byte = static_cast<unsigned char>(data[i]);
    *value |= uint64_t{byte & 0x7Fu} << (7 * i);
    if ((byte & 0x80u) == 0) return i + 1;
  }
  return -1;
}

}  // namespace

FrameChannel::~FrameChannel() {
  for (int fd : received_) close(fd);
}

absl::Status FrameChannel::Write(const google::protobuf::MessageLite& message,
                                 absl::Span<const int> fds) {
  const Outgoing frame{&message, fds};
  return WriteMany({&frame, 1});
}

absl::Status FrameChannel::WriteMany(absl::Span<const Outgoing> frames) {
  std::vector<size_t> sizes;
  sizes.reserve(frames.size());
  size_t total = 0;
  for (const Outgoing& frame : frames) {
    if (frame.fds.size() > kMaxFds) {
      return absl::InvalidArgumentError(
          absl::StrCat(frame.fds.size(), " descriptors for one frame (limit ", kMaxFds, ")"));
    }
    const size_t size = frame.message->ByteSizeLong();
    if (size > max_frame_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "message of ", size, " bytes is over the frame limit of ", max_frame_bytes_));
    }
    sizes.push_back(size);
    total += CodedOutputStream::VarintSize32(static_cast<uint32_t>(frame.fds.size())) +
             CodedOutputStream::VarintSize32(static_cast<uint32_t>(size)) + size;
  }
  // All serialised first, so that a failure sends nothing; then sent in runs whose descriptors
  // fit one message, each run's going with its first byte.
  std::string bytes(total, '\0');
  std::vector<std::pair<size_t, std::vector<int>>> runs;  // (first byte, descriptors)
  auto* out = reinterpret_cast<uint8_t*>(bytes.data());
  for (size_t i = 0; i < frames.size(); ++i) {
    const Outgoing& frame = frames[i];
    const auto at = static_cast<size_t>(reinterpret_cast<char*>(out) - bytes.data());
    if (runs.empty() || runs.back().second.size() + frame.fds.size() > kMaxFds) {
      runs.emplace_back(at, std::vector<int>());
    }
    runs.back().second.insert(runs.back().second.end(), frame.fds.begin(), frame.fds.end());
    out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(frame.fds.size()), out);
    out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(sizes[i]), out);
    if (!frame.message->SerializeToArray(out, static_cast<int>(sizes[i]))) {
      return absl::InternalError("cannot serialise a frame");
    }
    out += sizes[i];
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const size_t end = r + 1 < runs.size() ? runs[r + 1].first : bytes.size();
    const std::string_view run = std::string_view(bytes).substr(runs[r].first, end - runs[r].first);
    if (absl::Status sent = Send(run, runs[r].second); !sent.ok()) return sent;
  }
  return absl::OkStatus();
}

bool FrameChannel::TryWriteSmall(const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  char bytes[64];
  if (size + 6 > sizeof bytes) return false;
  auto* out = reinterpret_cast<uint8_t*>(bytes);
  out = CodedOutputStream::WriteVarint32ToArray(0, out);
  out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(size), out);
  if (!message.SerializeToArray(out, static_cast<int>(size))) return false;
  const size_t total = static_cast<size_t>(reinterpret_cast<char*>(out) - bytes) + size;
  // A few bytes on a stream socket are taken whole or not at all (one buffer of the kernel's).
  ssize_t n;
  do {
    n = send(fd_, bytes, total, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  // Were it ever cut, the rest goes too: a frame is never left half sent.
  return static_cast<size_t>(n) == total ||
         Send(std::string_view(bytes + n, total - static_cast<size_t>(n)), {}).ok();
}

absl::Status FrameChannel::Send(std::string_view bytes, absl::Span<const int> fds) {
  // The descriptors ride with the first send; the kernel delivers them with the first byte.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  for (size_t sent = 0; sent < bytes.size();) {
    iovec iov{const_cast<char*>(bytes.data()) + sent, bytes.size() - sent};
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

absl::Status FrameChannel::Receive(bool block, size_t want, size_t* got) {
  *got = 0;
  if (start_ == end_) start_ = end_ = 0;
  want = std::max(want, kReadChunk);
  if (buffer_.size() - end_ < want) {
    if (start_ > 0) {  // what is left of the last frames to the front first
      std::memmove(buffer_.data(), buffer_.data() + start_, end_ - start_);
      end_ -= start_;
      start_ = 0;
    }
    if (buffer_.size() - end_ < want) buffer_.resize(end_ + want);
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  while (true) {
    iovec iov{buffer_.data() + end_, buffer_.size() - end_};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &header, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !block && (errno == EAGAIN || errno == EWOULDBLOCK)) return absl::OkStatus();
    if (n < 0) return Errno("reading a frame");
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        // A peer that sends descriptors no frame claims cannot fill this process with them.
        if (received_.size() >= 4 * kMaxFds) {
          close(fd);
        } else {
          received_.push_back(fd);
        }
      }
    }
    if (n == 0) {
      ended_ = true;
      return absl::UnavailableError(start_ == end_ ? "end of stream"
                                                   : "end of stream inside a frame");
    }
    end_ += static_cast<size_t>(n);
    *got = static_cast<size_t>(n);
    return absl::OkStatus();
  }
}

bool FrameChannel::Parse(size_t* header, uint64_t* fd_count, uint64_t* size,
                         absl::Status* status) const {
  const char* data = buffer_.data() + start_;
  const size_t available = end_ - start_;
  const int count_length = DecodeVarint(data, available, fd_count);
  const int size_length = count_length <= 0
                              ? count_length
                              : DecodeVarint(data + count_length, available - count_length, size);
  if (count_length < 0 || size_length < 0) {
    *status = absl::DataLossError("a frame's header is not a valid varint");
    return false;
  }
  if (count_length == 0 || size_length == 0) return false;
  if (*fd_count > kMaxFds) {
    *status = absl::DataLossError(
        absl::StrCat("a frame says it carries ", *fd_count, " descriptors (limit ", kMaxFds, ")"));
    return false;
  }
  if (*size > max_frame_bytes_) {
    *status = absl::ResourceExhaustedError(absl::StrCat(
        "incoming frame of ", *size, " bytes is over the limit of ", max_frame_bytes_));
    return false;
  }
  *header = static_cast<size_t>(count_length + size_length);
  return available >= *header + *size;
}

bool FrameChannel::HasFrame() const {
  size_t header = 0;
  uint64_t fd_count = 0, size = 0;
  absl::Status ignored;
  return Parse(&header, &fd_count, &size, &ignored);
}

absl::Status FrameChannel::Take(google::protobuf::MessageLite* message, std::vector<int>* fds,
                                size_t header, uint64_t fd_count, uint64_t size) {
  const bool parsed =
      message->ParseFromArray(buffer_.data() + start_ + header, static_cast<int>(size));
  start_ += header + size;
  if (start_ == end_) {
    start_ = end_ = 0;
    if (buffer_.size() > kKeptBuffer) std::string().swap(buffer_);
  }
  if (fds == nullptr) {
    // A reader that takes no descriptors takes none at all: whatever a peer sent, with this
    // frame or claimed by none, is closed, so that it cannot fill this process with them.
    for (int fd : received_) close(fd);
    received_.clear();
  } else if (received_.size() < fd_count) {
    return absl::DataLossError(
        absl::StrCat("a frame's ", fd_count, " descriptors did not come with it"));
  } else {
    for (uint64_t i = 0; i < fd_count; ++i) {
      fds->push_back(received_.front());
      received_.pop_front();
    }
  }
  if (!parsed) return absl::DataLossError("a frame does not parse");
  return absl::OkStatus();
}

absl::Status FrameChannel::Read(google::protobuf::MessageLite* message, std::vector<int>* fds) {
  while (true) {
    size_t header = 0;
    uint64_t fd_count = 0, size = 0;
    absl::Status status;
    if (Parse(&header, &fd_count, &size, &status)) {
      return Take(message, fds, header, fd_count, size);
    }
    if (!status.ok()) return status;
    if (ended_) {
      return absl::UnavailableError(start_ == end_ ? "end of stream"
                                                   : "end of stream inside a frame");
    }
    // A large frame's header says how much is still to come: room for all of it at once.
    const size_t want = header > 0 || size > 0 ? static_cast<size_t>(size) + 10 : 0;
    size_t got = 0;
    if (absl::Status s = Receive(true, want, &got); !s.ok()) return s;
  }
}

bool FrameChannel::TryRead(google::protobuf::MessageLite* message, std::vector<int>* fds,
                           absl::Status* status) {
  *status = absl::OkStatus();
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t header = 0;
    uint64_t fd_count = 0, size = 0;
    if (Parse(&header, &fd_count, &size, status)) {
      *status = Take(message, fds, header, fd_count, size);
      return status->ok();
    }
    if (!status->ok() || ended_ || attempt == 1) return false;
    size_t got = 0;
    *status = Receive(false, size > 0 ? static_cast<size_t>(size) + 10 : 0, &got);
    if (!status->ok() || got == 0) return false;
  }
  return false;
}

bool FrameChannel::Poll() {
  if (ended_) return true;
  size_t header = 0;
  uint64_t fd_count = 0, size = 0;
  absl::Status status;
  if (Parse(&header, &fd_count, &size, &status) || !status.ok()) return true;
  size_t got = 0;
  status = Receive(false, size > 0 ? static_cast<size_t>(size) + 10 : 0, &got);
  if (!status.ok()) return true;
  return got > 0 && HasFrame();
}

absl::Status FrameChannel::WaitReadable(absl::Duration timeout) {
  if (HasFrame() || ended_) return absl::OkStatus();
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
