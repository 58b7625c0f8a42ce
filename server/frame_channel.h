// FrameChannel: length-delimited protobuf messages over a stream socket — the wire between the
// daemon's front and a worker. Each frame is a varint length and the message bytes; a frame
// over the size cap is refused on both ends. gRPC-free: the worker links it.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"

namespace kprof::server {

class FrameChannel {
 public:
  // Uses `fd` (not owned, not closed) with frames of at most `max_frame_bytes`.
  FrameChannel(int fd, size_t max_frame_bytes) : fd_(fd), max_frame_bytes_(max_frame_bytes) {}

  // The most descriptors one frame carries (the kernel's SCM_MAX_FD).
  static constexpr size_t kMaxFds = 253;

  // Writes one frame, all of it, with `fds` (at most kMaxFds; duplicated into the peer, still
  // the caller's here) passed along with its first byte. UNAVAILABLE when the peer is gone.
  absl::Status Write(const google::protobuf::MessageLite& message, absl::Span<const int> fds = {});

  // Reads one frame into `message`, blocking. UNAVAILABLE on end of stream (the peer closed or
  // died), RESOURCE_EXHAUSTED for a frame over the cap, DATA_LOSS for bytes that do not parse.
  // Descriptors that came with the frame are appended to `fds` (close-on-exec, the caller's to
  // close), or closed when `fds` is null.
  absl::Status Read(google::protobuf::MessageLite* message, std::vector<int>* fds = nullptr);

  // Waits until a frame can be read, up to `timeout`. DEADLINE_EXCEEDED when none arrives.
  absl::Status WaitReadable(absl::Duration timeout);

  int fd() const { return fd_; }

 private:
  absl::Status ReadExactly(char* data, size_t size, bool at_frame_start, std::vector<int>* fds);

  int fd_;
  size_t max_frame_bytes_;
};

}  // namespace kprof::server
