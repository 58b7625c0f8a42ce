// ClientTurns: the jobs waiting for one device, by client, and the order they are served in —
// the executor's scheduling, apart from the workers that run the jobs. Clients take turns:
// each one's next job after every other waiting client's next, whatever number of jobs (or
// streams) each has queued. Jobs are known by id; ids grow with submission, and a client's jobs
// are served in id order, so a job taken back from a worker goes before its client's later ones.
// Not thread-safe: the executor holds its lock around every call.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kprof::server {

class ClientTurns {
 public:
  struct Next {
    std::string client;
    uint64_t job_id = 0;
  };

  // Queues job `job_id` of `client`, in id order among its jobs; a client with no job queued
  // takes its turn after the others waiting. `bounded`: the job counts against its client's
  // bound (Bounded).
  void Add(const std::string& client, uint64_t job_id, bool bounded = true);

  // The next job to run, clients in turn; `after`, the client just served, goes after the others
  // that wait. Nothing when no job waits.
  std::optional<Next> TakeNext(const std::string& after);

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
  bool empty() const { return turns_.empty(); }
  int size() const { return size_; }
  // The clients with jobs, the next to be served first.
  const std::deque<std::string>& turns() const { return turns_; }

 private:
  struct Entry {
    uint64_t job_id;
    bool bounded;
  };
  std::map<std::string, std::deque<Entry>> queues_;  // by client, in id order
  std::deque<std::string> turns_;                    // clients with jobs, next first
  int size_ = 0;
};

}  // namespace kprof::server
