// PendingCheck: one checked job's judging. The candidate's answer and the reference's data meet
// here, whichever comes first, and the plan judges them: part by part, a part being one checked
// call (a profile's calls each have one; a strict job's checked repeats are its parts, known
// only from its answer, their reference runs started then).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/front/service/check_plan.h"
#include "server/front/service/reference_cache.h"

namespace kprof::server {

class PendingCheck : public std::enable_shared_from_this<PendingCheck> {
 public:
  // OK and the verdicts (PASSED, one per part; one for a strict job's), or the candidate's
  // failure: its first wrong part, or a reference's failure.
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
  // Starts the reference's run of a strict job's checked call: on the data of `seed`, the
  // arguments `poisoned` poisoned; `ready` gets its data (it may be called at once).
  using StartReference = std::function<void(uint64_t seed, std::vector<uint32_t> poisoned,
                                            ReferenceCache::Ready ready)>;

  explicit PendingCheck(std::vector<Part> parts);
  // A strict job's: `job` names it and holds its plan; its parts come with its answer.
  PendingCheck(Part job, StartReference start);

  // Part `part`'s reference data (ReferenceCache::Ready).
  void SetReference(size_t part, const ReferenceCache::Result& result, bool reused)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Judges the candidate's answer once every part's reference data are there: `done` runs on
  // the thread that brings the last of them.
  void Judge(kprof::worker::v1::WorkerAnswer answer, Done done) ABSL_LOCKS_EXCLUDED(mutex_);
  // A failed job's status, with a strict job's verdict (WRONG) as its detail when the worker's
  // own checks failed it (`answer.check_failed`): a wrong answer to every reader of verdicts.
  absl::Status Failed(absl::Status status, const kprof::worker::v1::WorkerAnswer& answer) const;

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
  // A strict job's answer: its parts from the checked calls it names, their references started.
  void JudgeStrict(kprof::worker::v1::WorkerAnswer answer, Done done) ABSL_LOCKS_EXCLUDED(mutex_);
  void Decide(const std::vector<Reference>& references, kprof::worker::v1::WorkerAnswer answer,
              const Done& done) const;
  // A bitwise strict job's checked calls on the same seed against the first on it: ABORTED
  // (verdict WRONG) naming the first that differs in its outputs' bits.
  absl::Status SameBits(const SentArguments& sent, const kprof::worker::v1::ArgumentData& data,
                        const std::vector<kprof::v1::CheckVerdict>& verdicts) const;
  // A strict job's verdict: its parts' in one, with the repeats that were checked.
  kprof::v1::CheckVerdict Merged(const std::vector<kprof::v1::CheckVerdict>& verdicts,
                                 const kprof::worker::v1::ArgumentData& data) const;

  // A strict job's (its parts are made once, from its answer, before any reference starts).
  const std::optional<Part> strict_;
  const StartReference start_;
  std::vector<Part> parts_;
  absl::Mutex mutex_;
  std::vector<Reference> references_ ABSL_GUARDED_BY(mutex_);
  size_t missing_ ABSL_GUARDED_BY(mutex_);
  std::optional<kprof::worker::v1::WorkerAnswer> answer_ ABSL_GUARDED_BY(mutex_);
  Done done_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kprof::server
