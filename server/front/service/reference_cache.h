// ReferenceCache: the reference runs of checked jobs, each computed once per key (client,
// device, reference, arguments, seed) and kept for the jobs after it, up to a byte budget (the
// least recently used go first). A batch of candidates against one reference runs it once.
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
#include "server/front/service/check_plan.h"

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
  // The run of `key` ended: its waiters get `result`; data are kept unless `keep` is false (a
  // strict check's, whose seed no other job draws), a failure never.
  void Finish(const std::string& key, Result result, bool keep = true) ABSL_LOCKS_EXCLUDED(mutex_);

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

}  // namespace kprof::server
