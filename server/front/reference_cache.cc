#include "server/front/reference_cache.h"

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

void ReferenceCache::Finish(const std::string& key, Result result) {
  std::vector<Ready> waiters;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return;
    waiters = std::move(it->second.waiters);
    if (result.ok()) {
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

void PendingCheck::SetReference(const ReferenceCache::Result& result, bool reused) {
  std::optional<kprof::worker::v1::WorkerAnswer> answer;
  Done done;
  {
    absl::MutexLock lock(&mutex_);
    if (!answer_.has_value()) {
      reference_ = result;
      reused_ = reused;
      return;
    }
    answer = std::move(answer_);
    done = std::move(done_);
  }
  Decide(result, reused, std::move(*answer), done);
}

void PendingCheck::Judge(kprof::worker::v1::WorkerAnswer answer, Done done) {
  std::optional<ReferenceCache::Result> reference;
  bool reused = false;
  {
    absl::MutexLock lock(&mutex_);
    if (!reference_.has_value()) {
      answer_ = std::move(answer);
      done_ = std::move(done);
      return;
    }
    reference = std::move(reference_);
    reused = reused_;
  }
  Decide(*reference, reused, std::move(answer), done);
}

void PendingCheck::Decide(const ReferenceCache::Result& reference, bool reused,
                          kprof::worker::v1::WorkerAnswer answer, const Done& done) const {
  kprof::v1::CheckVerdict verdict;
  verdict.set_reference(plan_.reference_name());
  verdict.set_reference_reused(reused);
  if (!reference.ok()) {
    verdict.set_outcome(kprof::v1::CheckVerdict::REFERENCE_FAILED);
    verdict.set_reference_error(absl::StrCat(absl::StatusCodeToString(reference.status().code()),
                                             ": ", reference.status().message()));
    absl::Status failed = absl::FailedPreconditionError(
        absl::StrCat("the reference ", plan_.reference_name(), " failed, so ", what_,
                     " was not judged: ", verdict.reference_error()));
    failed.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
    done(std::move(failed), std::move(verdict), std::move(answer));
    return;
  }
  const absl::Time start = absl::Now();
  absl::Status judged = plan_.Judge(**reference, answer, what_, &verdict);
  verdict.set_check_seconds(answer.arguments().seconds() +
                            absl::ToDoubleSeconds(absl::Now() - start));
  // The detail carries the verdict with its cost.
  if (!judged.ok()) judged.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
  answer.clear_argument_bytes();
  done(std::move(judged), std::move(verdict), std::move(answer));
}

}  // namespace kprof::server
