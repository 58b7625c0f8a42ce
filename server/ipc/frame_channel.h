// FrameChannel: length-delimited protobuf messages over a stream socket — the wire between the
// daemon's front and a worker. Each frame is a varint count of the descriptors that travel with
// it, a varint length and the message bytes; a frame over the size cap is refused on both ends.
// Reads are buffered: one recvmsg takes in the frames the peer has written so far, up to and
// including the next that carries descriptors (the kernel stops there), and later reads parse
// them from the buffer.
// gRPC-free: the worker links it.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
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
  ~FrameChannel();  // closes descriptors received and not claimed by a frame yet
  FrameChannel(const FrameChannel&) = delete;
  FrameChannel& operator=(const FrameChannel&) = delete;

  // The most descriptors one frame carries (the kernel's SCM_MAX_FD).
  static constexpr size_t kMaxFds = 253;

  // Writes one frame, all of it, with `fds` (at most kMaxFds; duplicated into the peer, still
  // the caller's here) passed along with its first byte. UNAVAILABLE when the peer is gone.
  absl::Status Write(const google::protobuf::MessageLite& message, absl::Span<const int> fds = {});

  // Writes several frames, in order, with one sendmsg where their descriptors fit one (more
  // when they carry over kMaxFds together): a front handing a worker four jobs wakes it, and
  // pays the system call, once. UNAVAILABLE when the peer is gone (some of the frames may have
  // gone before); any other failure (a frame too large, too many descriptors) before anything
  // is sent.
  struct Outgoing {
    const google::protobuf::MessageLite* message;
    absl::Span<const int> fds;
  };
  absl::Status WriteMany(absl::Span<const Outgoing> frames);

  // Writes one small frame without descriptors only if the socket takes it at once: false (and
  // nothing sent) when the peer is slow to read, gone, or the frame is not small.
  bool TryWriteSmall(const google::protobuf::MessageLite& message);

  // Reads one frame into `message`, blocking. UNAVAILABLE on end of stream (the peer closed or
  // died), RESOURCE_EXHAUSTED for a frame over the cap, DATA_LOSS for bytes that do not parse
  // or descriptors that did not come with their frame. The frame's descriptors are appended to
  // `fds` (close-on-exec, the caller's to close), or closed when `fds` is null.
  absl::Status Read(google::protobuf::MessageLite* message, std::vector<int>* fds = nullptr);

  // Like Read, without blocking: false (and nothing read) when no whole frame has arrived yet;
  // a failure is in `status`.
  bool TryRead(google::protobuf::MessageLite* message, std::vector<int>* fds, absl::Status* status);

  // Waits until a frame can be read, up to `timeout`: at once when one is buffered already.
  // DEADLINE_EXCEEDED when none arrives.
  absl::Status WaitReadable(absl::Duration timeout);

  // Whether a whole frame is buffered (Read returns it without a system call).
  bool HasFrame() const;

  // Takes in what has arrived, without blocking: whether a whole frame is buffered now, or the
  // peer has closed its end (or the socket failed), so that a Read would not block.
  bool Poll();

  // Whether the peer has closed its end (frames still buffered can be read).
  bool ended() const { return ended_; }

  int fd() const { return fd_; }

 private:
  // One recvmsg into the buffer; `block` false: MSG_DONTWAIT. OK with nothing new only when
  // not blocking and nothing is there (`*got` 0); UNAVAILABLE at the end of the stream.
  absl::Status Receive(bool block, size_t want, size_t* got);
  // The frame at the buffer's start: its descriptor count and body, or false when incomplete.
  // A malformed or oversized header fails `status`.
  // Sends `bytes`, with `fds` along with their first byte.
  absl::Status Send(std::string_view bytes, absl::Span<const int> fds);
  bool Parse(size_t* header, uint64_t* fd_count, uint64_t* size, absl::Status* status) const;
  absl::Status Take(google::protobuf::MessageLite* message, std::vector<int>* fds, size_t header,
                    uint64_t fd_count, uint64_t size);

  int fd_;
  size_t max_frame_bytes_;
  std::string buffer_;  // its size is its capacity
  size_t start_ = 0;    // buffer_[start_, end_): received, not parsed yet
  size_t end_ = 0;
  std::deque<int> received_;  // descriptors received, in order, not claimed by a frame yet
  bool ended_ = false;        // the peer closed its end
};

}  // namespace kprof::server
