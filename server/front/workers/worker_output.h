// WorkerOutput: the standard output and error of every worker, read by one thread of the
// daemon's as they come, so that what a module prints reaches the client whose job printed it,
// never the daemon's own log (where a module could forge the daemon's lines or flood the
// journal), and never stalls a module that prints a lot.
//
// Each worker's fds 1 and 2 are the write end of a pipe of its own (Open); the reader keeps the
// last kKeptBytes of what came through it, and counts the rest. When the daemon takes a job's
// answer, or learns that its worker died, it takes what the worker wrote since the last answer
// (Take): the result's `output`, or the end of a crash's message. With `log_bytes` the reader
// also writes each line into the daemon's log, escaped and tagged with the worker, up to that
// many bytes between two answers.
//
//   auto output = *WorkerOutput::Start(/*log_bytes=*/0, pinned_cpus);
//   auto [key, write_end] = *output->Open("cpu:0 worker 1234");  // write_end: the worker's 1, 2
//   ...
//   AttachOutput(output->Take(key), &answer);                    // with each answer
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

class WorkerOutput {
 public:
  // What is kept of a worker's output between two answers: its end.
  static constexpr size_t kKeptBytes = 16 << 10;

  struct Taken {
    std::string tail;    // the last kKeptBytes at most, escaped (EscapeOutput)
    uint64_t bytes = 0;  // all the worker wrote
  };

  // The reader's thread runs off `measuring_cpus` (at the daemon's priority: the front waits
  // for the lock it holds while it reads). INTERNAL when the system refuses an epoll or an
  // eventfd.
  static absl::StatusOr<std::unique_ptr<WorkerOutput>> Start(
      uint64_t log_bytes, const std::vector<int>& measuring_cpus = {});
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // A pipe for a new worker, read from now on: its key, and the write end (close-on-exec) to
  // hand the worker as its fds 1 and 2 and close once it has started. `label` tags its lines in
  // the log.
  absl::StatusOr<std::pair<int, int>> Open(std::string label);
  // What the worker of `key` wrote since the last Take, the pipe read to its end first (what a
  // worker wrote before it answered is in the pipe by the time its answer is read).
  Taken Take(int key);
  // Names the worker of `key` in the log ("cpu:0 worker 1234").
  void Label(int key, std::string label);
  // Stops reading the pipe of `key` and closes it.
  void Close(int key);

 private:
  struct Stream {
    std::string label;
    std::string kept;     // the end of what came, up to 2 * kKeptBytes before it is cut
    std::string partial;  // a line begun and not ended, for the log
    uint64_t bytes = 0;   // since the last Take
    uint64_t logged = 0;  // bytes written into the log since the last Take
    bool ended = false;   // the write end is closed everywhere
  };

  WorkerOutput(int epoll, int wake, uint64_t log_bytes)
      : epoll_(epoll), wake_(wake), log_bytes_(log_bytes) {}
  void Loop(const std::vector<int>& measuring_cpus);
  // Reads what the pipe of `key` holds, at most `budget` bytes; whether it is at its end. The
  // lines for the log go to `lines`, to be written once the lock is let go.
  bool Drain(int key, Stream& stream, size_t budget, std::vector<std::string>& lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Keep(Stream& stream, const char* data, size_t size, std::vector<std::string>& lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int epoll_, wake_;
  const uint64_t log_bytes_;
  absl::Mutex mutex_;
  std::map<int, Stream> streams_ ABSL_GUARDED_BY(mutex_);  // by the pipe's read end
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

// A job's answer with what its worker printed: the result's `output`, and the end of it in the
// message of an answer that is an error.
void AttachOutput(const WorkerOutput::Taken& taken, kprof::worker::v1::WorkerAnswer* answer);
// "; its output ended: ..." (its last lines, 300 characters at most), or "" when it printed
// nothing: for the message of a worker that died.
std::string OutputEnding(const WorkerOutput::Taken& taken);

// `text` as valid UTF-8 with no control characters but newline and tab: any other byte below
// 0x20, DEL and bytes that are not UTF-8 as \xNN, C1 controls as \u00NN.
std::string EscapeOutput(std::string_view text);

}  // namespace kprof::server
