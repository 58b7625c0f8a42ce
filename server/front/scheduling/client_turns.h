// ClientTurns: the jobs waiting for one device, by client, and the order they are served in —
// the executor's scheduling, apart from the workers that run the jobs.
//
// Clients share the device by weight (stride scheduling): each served job moves its client's
// pass on by 1/weight, and the waiting client of the lowest pass goes next, so that a client of
// weight 3 gets three jobs to another's one, in a smooth interleaving, whatever number of jobs
// (or streams) each has queued. A client that had nothing queued joins at the pass of the
// clients waiting: time idle earns no credit. Equal passes go in turn, the client just served
// after the others.
//
// A job's priority orders its client's own jobs, never one client's against another's (a
// client cannot buy a larger share by calling its jobs interactive): within a client,
// interactive jobs go ahead of batch ones, but never more than kInteractiveStreak in a row while
// one of its batch jobs waits, so that its batch jobs are never starved.
//
// Jobs are known by id; ids grow with submission, and a client's jobs of one priority are served
// in id order, so a job taken back from a worker goes before its client's later ones. A job
// taken back keeps the pass it took: the newcomer it makes room for joined at the pass those
// handed-on jobs had raised, so the two stay level. Not thread-safe: the executor holds its
// lock around every call.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kprof::server {

class ClientTurns {
 public:
  // A client's interactive jobs served in a row at most while one of its batch jobs waits.
  static constexpr int kInteractiveStreak = 4;

  struct Next {
    std::string client;
    uint64_t job_id = 0;
  };

  // Each client's weight (1 to kMaxWeight; others are clamped); by default every client's is 1.
  static constexpr int kMaxWeight = 1000;
  void SetWeights(std::function<int(const std::string&)> weight_of) {
    weight_of_ = std::move(weight_of);
  }

  // Queues job `job_id` of `client`, in id order among its jobs of the same priority.
  // `bounded`: the job counts against its client's bound (Bounded).
  void Add(const std::string& client, uint64_t job_id, bool bounded = true,
           bool interactive = true);

  // The next job to run; `after`, the client just served, goes after others of an equal pass.
  // Nothing when no job waits.
  std::optional<Next> TakeNext(const std::string& after);

  // `client`'s next job alone (a lease's holder), interactive first; others' passes and the
  // client's own are left as they are: a lease is not a turn. Nothing when it has none.
  std::optional<Next> TakeNextOf(const std::string& client);

  // Takes a queued job out; its client, or nothing when the job is not queued.
  std::optional<std::string> Remove(uint64_t job_id);

  // Every queued job, in the order TakeNext would give them (a drain refuses them in it).
  std::vector<Next> TakeAll();

  // Whether a client other than `client` has a job waiting.
  bool OthersWaiting(const std::string& client) const;
  bool HasJobs(const std::string& client) const { return queues_.count(client) > 0; }
  // `client`'s queued jobs; those that count against its bound.
  int Queued(const std::string& client) const;
  int Bounded(const std::string& client) const;
  bool empty() const { return size_ == 0; }
  int size() const { return size_; }
  // The clients with jobs, in turn order (ties of pass go to the earlier).
  const std::deque<std::string>& turns() const { return turns_; }
  // Each waiting client's queued jobs, for GetInfo.
  std::map<std::string, int> QueuedByClient() const;

 private:
  struct Entry {
    uint64_t job_id;
    bool bounded;
    bool interactive;
  };
  // A pass step of weight 1: divisible by every weight up to 16, so small weights step exactly.
  static constexpr uint64_t kStride = 720720;

  uint64_t StrideOf(const std::string& client) const;
  // The job of `queue` (a client's, not empty) to serve next: its first interactive one,
  // unless `streak` of them went in a row while a batch one waited.
  static std::deque<Entry>::iterator NextOf(std::deque<Entry>& queue, int streak);

  std::map<std::string, std::deque<Entry>> queues_;  // by client, in id order
  std::deque<std::string> turns_;                    // clients with jobs
  std::map<std::string, uint64_t> pass_;             // of clients seen (kept while idle)
  uint64_t virtual_time_ = 0;                        // the pass of the last job served
  // By client with jobs: its interactive jobs served in a row while a batch one of it waited.
  std::map<std::string, int> streak_;
  int size_ = 0;
  std::function<int(const std::string&)> weight_of_;
};

}  // namespace kprof::server
