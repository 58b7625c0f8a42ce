#include "server/front/service/reference_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/status.h"

namespace kprof::server {

bool ReferenceCache::Await(const std::string& key, Ready ready) {
  std::shared_ptr<const ReferenceData> held;
  {
    absl::MutexLock lock(&mutex_);
    auto [it, inserted] = entries_.try_emplace(key);
    Entry& entry = it->second;
    if (inserted) {
      ++runs_;
      entry.waiters.push_back(std::move(ready));
      return true;
    }
    if (entry.data == nullptr) {
      entry.waiters.push_back(std::move(ready));
      return false;
    }
    lru_.splice(lru_.begin(), lru_, entry.lru);
    held = entry.data;
  }
  ready(held, true);
  return false;
}

void ReferenceCache::Finish(const std::string& key, Result result, bool keep) {
  std::vector<Ready> waiters;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return;
    waiters = std::move(it->second.waiters);
    if (result.ok() && keep) {
      it->second.data = *result;
      lru_.push_front(key);
      it->second.lru = lru_.begin();
      bytes_ += (*result)->bytes.size();
      Evict();
    } else {
      entries_.erase(it);  // a later job runs it again
    }
  }
  // The job that started the run computed the data; the others waited for them (reused).
  for (size_t i = 0; i < waiters.size(); ++i) waiters[i](result, i > 0);
}

void ReferenceCache::Evict() {
  // The newest stays, however large: the jobs waiting for it have it already.
  while (bytes_ > max_bytes_ && lru_.size() > 1) {
    const auto it = entries_.find(lru_.back());
    bytes_ -= it->second.data->bytes.size();
    entries_.erase(it);
    lru_.pop_back();
  }
}

uint64_t ReferenceCache::bytes() {
  absl::MutexLock lock(&mutex_);
  return bytes_;
}

int64_t ReferenceCache::runs() {
  absl::MutexLock lock(&mutex_);
  return runs_;
}

}  // namespace kprof::server
