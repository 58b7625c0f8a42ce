// FrameChannel: length-delimited protobuf messages over a stream socket — the wire between the
// daemon's front and a worker. Each frame is a varint length and the message bytes; a frame
// over the size cap is refused on both ends. gRPC-free: the worker links it.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace kprof::server {

class FrameChannel {
 public:
  // Uses `fd` (not owned, not closed) with frames of at most `max_frame_bytes`.
  FrameChannel(int fd, size_t max_frame_bytes) : fd_(fd), max_frame_bytes_(max_frame_bytes) {}

  // Writes one frame, all of it. UNAVAILABLE when the peer is gone.
  absl::Status Write(const google::protobuf::MessageLite& message);

  // Reads one frame into `message`, blocking. UNAVAILABLE on end of stream (the peer closed or
  // died), RESOURCE_EXHAUSTED for a frame over the cap, DATA_LOSS for bytes that do not parse.
  absl::Status Read(google::protobuf::MessageLite* message);

  // Waits until a frame can be read, up to `timeout`. DEADLINE_EXCEEDED when none arrives.
  absl::Status WaitReadable(absl::Duration timeout);

  int fd() const { return fd_; }

 private:
  absl::Status ReadExactly(char* data, size_t size, bool at_frame_start);

  int fd_;
  size_t max_frame_bytes_;
};

}  // namespace kprof::server
