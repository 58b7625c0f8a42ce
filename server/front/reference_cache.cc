#include "server/front/reference_cache.h"

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

PendingCheck::PendingCheck(std::vector<Part> parts)
    : parts_(std::move(parts)), references_(parts_.size()), missing_(parts_.size()) {}

void PendingCheck::SetReference(size_t part, const ReferenceCache::Result& result, bool reused) {
  std::vector<Reference> references;
  std::optional<kprof::worker::v1::WorkerAnswer> answer;
  Done done;
  {
    absl::MutexLock lock(&mutex_);
    references_[part] = {result, reused};
    --missing_;
    if (!Complete()) return;
    references = std::move(references_);
    answer = std::move(answer_);
    done = std::move(done_);
  }
  Decide(references, std::move(*answer), done);
}

void PendingCheck::Judge(kprof::worker::v1::WorkerAnswer answer, Done done) {
  std::vector<Reference> references;
  {
    absl::MutexLock lock(&mutex_);
    answer_ = std::move(answer);
    done_ = std::move(done);
    if (!Complete()) return;
    references = std::move(references_);
    answer = *std::move(answer_);
    done = std::move(done_);
  }
  Decide(references, std::move(answer), done);
}

namespace {

// Part `part`'s verdict when its reference failed: FAILED_PRECONDITION, the verdict its detail.
absl::Status ReferenceFailed(const PendingCheck::Part& part, const absl::Status& error,
                             kprof::v1::CheckVerdict* verdict) {
  verdict->set_outcome(kprof::v1::CheckVerdict::REFERENCE_FAILED);
  verdict->set_reference_error(
      absl::StrCat(absl::StatusCodeToString(error.code()), ": ", error.message()));
  return absl::FailedPreconditionError(
      absl::StrCat("the reference ", part.plan.reference_name(), " failed, so ", part.what,
                   " was not judged: ", verdict->reference_error()));
}

}  // namespace

void PendingCheck::Decide(const std::vector<Reference>& references,
                          kprof::worker::v1::WorkerAnswer answer, const Done& done) const {
  const SentArguments sent = SentArguments::Of(answer);
  std::vector<kprof::v1::CheckVerdict> verdicts(parts_.size());
  absl::Status first = absl::OkStatus();
  size_t argument = 0, at = 0;  // part p's first argument, and where its bytes begin
  // The worker's cost of sending the arguments out, shared by the parts.
  const double sending = answer.arguments().seconds() / static_cast<double>(parts_.size());
  for (size_t p = 0; p < parts_.size(); ++p) {
    const Part& part = parts_[p];
    kprof::v1::CheckVerdict& verdict = verdicts[p];
    verdict.set_reference(part.plan.reference_name());
    verdict.set_reference_reused(references[p].reused);
    if (part.call >= 0) verdict.set_call(static_cast<uint32_t>(part.call));
    const size_t count = part.plan.arguments();
    // This part's arguments and their bytes, whether it is judged or not: the next part's
    // begin after them.
    // This part's arguments as sent (its bytes from `at` on), and their bytes in the file.
    const SentArguments mine{sent.sizes.subspan(std::min(argument, sent.sizes.size()), count),
                             sent.bytes.substr(std::min(at, sent.bytes.size())),
                             sent.unsent.subspan(std::min(argument, sent.unsent.size()), count)};
    uint64_t bytes = 0;
    for (size_t k = 0; k < mine.sizes.size(); ++k) bytes += mine.Unsent(k) ? 0 : mine.sizes[k];
    absl::Status judged;
    if (!references[p].result.ok()) {
      judged = ReferenceFailed(part, references[p].result.status(), &verdict);
    } else if (mine.sizes.size() != count) {
      judged = absl::InternalError(absl::StrCat("the checked calls sent ", sent.sizes.size(),
                                                " arguments back, where ", part.what, " needs ",
                                                count, " from argument ", argument, " on"));
    } else {
      const absl::Time start = absl::Now();
      judged = part.plan.Judge(**references[p].result, mine, part.what, &verdict);
      verdict.set_check_seconds(sending + absl::ToDoubleSeconds(absl::Now() - start));
    }
    argument += count;
    at += bytes;
    // The detail carries the verdict with its cost.
    if (!judged.ok()) judged.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
    if (first.ok()) first = judged;
  }
  answer.clear_argument_bytes();
  done(std::move(first), std::move(verdicts), std::move(answer));
}

}  // namespace kprof::server
