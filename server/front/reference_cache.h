// ReferenceCache: the reference runs of checked jobs, each computed once per key (client,
// device, reference, arguments, seed) and kept for the jobs after it, up to a byte budget (the
// least recently used go first). A batch of candidates against one reference runs it once.
//
// PendingCheck: one checked job's judging — the candidate's answer and the reference's data
// meet here, whichever comes first, and the plan judges them.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/front/check_plan.h"

namespace kprof::server {

class ReferenceCache {
 public:
  using Result = absl::StatusOr<std::shared_ptr<const ReferenceData>>;
  // `reused`: the data were computed for another job (held, or run while this one waited).
  using Ready = std::function<void(const Result& result, bool reused)>;

  explicit ReferenceCache(uint64_t max_bytes = uint64_t{1} << 30) : max_bytes_(max_bytes) {}

  // Calls `ready` with the key's data: at once (on this thread) when held, else when its run
  // ends. True when the caller is the first to ask: it starts the run and calls Finish.
  bool Await(const std::string& key, Ready ready) ABSL_LOCKS_EXCLUDED(mutex_);
  // The run of `key` ended: its waiters get `result`; data are kept, a failure is not.
  void Finish(const std::string& key, Result result) ABSL_LOCKS_EXCLUDED(mutex_);

  uint64_t bytes() ABSL_LOCKS_EXCLUDED(mutex_);
  int64_t runs() ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Entry {
    std::shared_ptr<const ReferenceData> data;  // null while running
    std::vector<Ready> waiters;
    std::list<std::string>::iterator lru;
  };
  void Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const uint64_t max_bytes_;
  absl::Mutex mutex_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mutex_);  // held entries, most recent first
  uint64_t bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t runs_ ABSL_GUARDED_BY(mutex_) = 0;
};

class PendingCheck {
 public:
  // OK and the verdicts (PASSED, one per part), or the candidate's failure: its first wrong
  // part, or a reference's failure.
  using Done =
      std::function<void(absl::Status status, std::vector<kprof::v1::CheckVerdict> verdicts,
                         kprof::worker::v1::WorkerAnswer answer)>;
  // One checked call: its plan, how it is named ("function 'f'", "call 1 (function 'f')") and,
  // in a profile's sequence, its index (-1 for the job's one call). The parts of a job are in
  // call order, as their arguments lie in the answer.
  struct Part {
    CheckPlan plan;
    std::string what;
    int call = -1;
  };

  explicit PendingCheck(std::vector<Part> parts);

  // Part `part`'s reference data (ReferenceCache::Ready).
  void SetReference(size_t part, const ReferenceCache::Result& result, bool reused)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Judges the candidate's answer once every part's reference data are there: `done` runs on
  // the thread that brings the last of them.
  void Judge(kprof::worker::v1::WorkerAnswer answer, Done done) ABSL_LOCKS_EXCLUDED(mutex_);

  const std::vector<Part>& parts() const { return parts_; }

 private:
  struct Reference {
    ReferenceCache::Result result;
    bool reused = false;
  };
  // With the lock held: whether the answer and every part's reference are in (the caller then
  // moves them out for Decide).
  bool Complete() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return answer_.has_value() && missing_ == 0;
  }
  void Decide(const std::vector<Reference>& references, kprof::worker::v1::WorkerAnswer answer,
              const Done& done) const;

  const std::vector<Part> parts_;
  absl::Mutex mutex_;
  std::vector<Reference> references_ ABSL_GUARDED_BY(mutex_);
  size_t missing_ ABSL_GUARDED_BY(mutex_);
  std::optional<kprof::worker::v1::WorkerAnswer> answer_ ABSL_GUARDED_BY(mutex_);
  Done done_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kprof::server
