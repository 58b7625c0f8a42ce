// BatchOutbox: a batch stream's updates on their way to its client — the stream's progress
// figures stamped on each, and several put in one message when the client takes them so
// (BatchRequest.updates_per_message). gRPC-free and not thread-safe: the stream's reactor holds
// its lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/time/time.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

class BatchOutbox {
 public:
  // Updates as they are written: the results are the bytes of the workers' answers.
  using Update = kprof::worker::v1::BatchUpdateWire;

  // Updates sharing one message at most, and the bytes past which a message takes no more: some
  // 60 short jobs' results, while results of many repeats go in messages of their own. A
  // message is serialised on the thread that kicks, often an executor's, which meanwhile hands
  // on no job and takes none back: a megabyte held it for a millisecond, ten under
  // AddressSanitizer.
  static constexpr size_t kMaxUpdatesPerMessage = 4096;
  static constexpr size_t kMaxMessageBytes = size_t{64} << 10;
  // While more jobs are coming, updates wait for company (a message of one or two costs the
  // daemon a write and the client a wake-up each, more than the job itself): written once there
  // are this many, or a message's bytes, or the oldest has waited kHeldAtMost.
  static constexpr size_t kHeldFor = 64;
  static constexpr absl::Duration kHeldAtMost = absl::Milliseconds(1);

  // The stream's jobs by state, as each update carries them.
  struct Progress {
    int64_t queued = 0;
    int64_t running = 0;
    int64_t done = 0;
    int64_t failed = 0;
  };

  // Counts a job's move to `state`: QUEUED one more queued, RUNNING one from queued to running,
  // DONE and FAILED one more of each (Leave took it from queued or running first).
  void Count(Update::State state);
  // A job left the queue (`was_running`: the device) without the update that says so.
  void Leave(bool was_running);
  const Progress& progress() const { return progress_; }

  // Stamps `update` with the job's `id`, its `state` and the progress, and queues it.
  void Push(const std::string& id, Update::State state, Update update, absl::Time now);

  // The client takes up to `count` updates in a message (1 to kMaxUpdatesPerMessage).
  void SetUpdatesPerMessage(uint32_t count);
  size_t updates_per_message() const { return per_message_; }

  // Whether the queued updates wait for more (`more_coming`: the stream has jobs running and
  // more waiting); `flush_at` says until when.
  bool Hold(bool more_coming, absl::Time now, absl::Time* flush_at) const;

  // The next message: the first queued update, with as many more as the client takes in one and
  // kMaxMessageBytes allows in its `more`. Counted as being written until Written.
  Update TakeMessage();
  // The write of the message ended; not `ok`: the client is gone, and every update is dropped.
  void Written(bool ok);

  bool empty() const { return queued_.empty(); }
  size_t size() const { return queued_.size(); }
  size_t writing_count() const { return writing_count_; }
  // The bytes of the queued updates and of the message being written.
  size_t bytes() const { return bytes_; }

 private:
  Progress progress_;
  std::deque<Update> queued_;
  absl::Time oldest_;  // when the oldest queued update came
  size_t per_message_ = 1;
  size_t bytes_ = 0;
  size_t writing_count_ = 0;
  size_t writing_bytes_ = 0;
};

}  // namespace kprof::server
