// Farm::Batch: one Farm::MeasureBatch. It learns each daemon's devices, places each job on the
// least loaded live daemon with its device (at most `window` jobs a daemon, more as the pace of
// its answers says its jobs are short), sends a module
// with its first job there (small ones on the stream, large ones by LoadModule, started ahead
// of the jobs that need them), reads every daemon's updates on a thread of that daemon's, and
// hands a lost or draining daemon's unfinished jobs to the others. A daemon that stops answering
// is lost: its channel's keepalive pings go unanswered (a frozen process), or a job it said was
// running has no answer long after the daemon's own limit for a job. Updates for ids that are no
// job of the batch are ignored. All placement runs on the caller's thread; the readers only
// queue what they read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/farm.h"

namespace kprof::client {

class Farm::Batch {
 public:
  using OnUpdate = std::function<void(const kprof::v1::BatchUpdate&)>;

  Batch(const Farm& farm, const std::vector<kprof::v1::BatchJob>& jobs, const OnUpdate& on_update,
        size_t window, const std::function<void()>& on_pause);
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Runs the batch to its end (Farm::MeasureBatch).
  absl::Status Run();

 private:
  // One daemon during the batch: its stream, the jobs it holds, and its reader thread.
  struct Daemon {
    std::string address;
    Client* client = nullptr;
    std::set<std::string> devices;                // "cpu:0", "cuda:1"
    std::set<std::string> uploaded;               // module ids it holds
    std::map<std::string, absl::Status> refused;  // module ids whose upload it refused, and why
    std::unique_ptr<Client::BatchStream> batch;
    std::thread reader;
    std::set<size_t> holding;  // jobs sent, not yet finished
    bool alive = false;
    bool closing = false;
    bool finished = false;   // its stream's Finish() called (once only)
    bool draining = false;   // it refused a job as shutting down: no new ones
    double job_timeout = 0;  // seconds its jobs may run (GetInfo's limits); 0: not said
    size_t strays = 0;       // updates it sent for ids that are no job of the batch
    // The most jobs it may hold: the batch's window, more where its jobs are short (Answered).
    size_t window = 0;
    size_t answers = 0;  // its final updates in this batch
    std::optional<std::chrono::steady_clock::time_point> first_sent;  // of its first job
  };
  using SteadyTime = std::chrono::steady_clock::time_point;
  // A job a daemon said was running, and since when.
  struct Running {
    size_t daemon = 0;
    SteadyTime since;
  };
  // What reader threads hand to the placing thread.
  struct Event {
    size_t daemon = 0;
    bool ended = false;  // the stream has no more updates
    kprof::v1::BatchUpdate update;
  };
  // What became of a job's module on its way to the daemon the job was placed on: it is there
  // (the job goes too), the job is to be placed again, or the job is taken care of (answered
  // with the module's refusal, or queued again ahead of a lost daemon's jobs).
  enum class ModuleSent { kThere, kPlaceAgain, kHandled };

  // Each daemon's devices (GetInfo); UNAVAILABLE when none answers.
  absl::Status Meet();
  // Queues the jobs with usable ids; answers the others at once.
  void Queue();
  // Opens daemon `i`'s stream and its reader.
  void Open(size_t i);
  // A daemon that failed: its stream is finished, and its jobs go back to the queue.
  void Lose(size_t i, const std::string& why);
  // Hands `update` on, once per job.
  void Deliver(const kprof::v1::BatchUpdate& update);
  // The least loaded live daemon with `device` (holding fewer jobs than its window, when
  // `within_window`), or daemons_.size().
  size_t LeastLoaded(const std::string& device, bool within_window) const;
  // Counts an answer of daemon `d`'s and sets its window from the pace of its answers: as many
  // jobs as it answers in kAheadSeconds, at least the batch's window, at most kMaxWindow. Short
  // jobs then go out, and their answers come back, many to a message.
  void Answered(Daemon& d);
  // The daemon job `j` would go to were it placed now (room or not), or daemons_.size().
  size_t LikelyDaemon(size_t j) const;
  // Starts the uploads the next pending jobs will need, up to kUploadsAhead at once, looking
  // at most kLookAhead jobs ahead.
  void UploadAhead();
  // The upload of `module` to daemon `i`: the one started ahead (waited for), or one now.
  absl::Status Upload(size_t i, const std::string& module);
  // Takes in the uploads ahead that ended.
  void TakeFinishedUploads();
  // Sends each daemon the jobs placed on it since the last flush, in one message.
  void Flush();
  // Places what fits, each job on a live daemon with its device.
  void Place();
  // Gets job `j`'s modules (its call's, its check's reference's) to daemon `best`, on the
  // stream or by an upload, where it lacks them.
  ModuleSent SendModules(size_t j, size_t best);
  ModuleSent SendModule(size_t j, size_t best, const std::string& module);
  // Waits for the next updates (or the next job's deadline) and takes them in.
  void Receive();
  void Handle(Event& event);
  // When a job a daemon said was running must have its answer: the daemon's limit for a job
  // six times over (a strict job's references run after it, in jobs of their own) and 2 s;
  // SteadyTime::max() for a daemon that names no limit.
  SteadyTime DeadlineOf(const Running& running) const;
  // Loses each daemon with a running job past its deadline: its jobs go to the others.
  void LoseTheSilent();
  // Every job has its answer: closes the streams and waits for their readers.
  void Close();

  const std::map<std::string, Module>& modules_;
  const std::vector<kprof::v1::BatchJob>& jobs_;
  const OnUpdate& on_update_;
  const size_t window_;
  const std::function<void()>& on_pause_;

  std::vector<Daemon> daemons_;
  std::vector<std::string> unreachable_;  // why each daemon lost was lost

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Event> events_;  // guarded by mutex_

  std::deque<size_t> pending_;                             // jobs to place, the next first
  std::map<size_t, int> reuploads_;                        // by job
  std::map<size_t, Running> running_;                      // by job
  std::set<std::string> finished_;                         // ids answered
  size_t unique_ = 0;                                      // jobs to answer
  std::unordered_map<std::string_view, size_t> index_of_;  // by id, of the jobs that run
  std::vector<std::string> device_of_;                     // each job's, read once
  // Uploads started ahead of their jobs' placement, by daemon and module: while one module
  // uploads (most of it waiting on the daemon's store), the next ones do too, and the jobs
  // placed before them are measured meanwhile.
  std::map<std::pair<size_t, std::string>, std::future<absl::Status>> uploading_;
  // The jobs placed and not sent yet, by daemon: each daemon's go in one message, with the
  // bytes of the modules that travel with them.
  std::map<size_t, kprof::v1::BatchRequest> outgoing_;
  std::map<size_t, size_t> inline_bytes_;
};

}  // namespace kprof::client
