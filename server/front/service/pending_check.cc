#include "server/front/service/pending_check.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kprof::server {
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

// "checked repeat 7 of 20", or the call a run that stopped early made after its last repeat.
std::string CheckedName(const kprof::worker::v1::CheckedRepeat& checked) {
  if (checked.repeat() >= checked.repeats()) return "the checked call after the last repeat";
  return absl::StrCat("checked repeat ", checked.repeat() + 1, " of ", checked.repeats());
}

}  // namespace

PendingCheck::PendingCheck(std::vector<Part> parts)
    : parts_(std::move(parts)), references_(parts_.size()), missing_(parts_.size()) {}

PendingCheck::PendingCheck(Part job, StartReference start)
    : strict_(std::move(job)), start_(std::move(start)), missing_(0) {}

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
  if (strict_.has_value()) {
    JudgeStrict(std::move(answer), std::move(done));
    return;
  }
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

void PendingCheck::JudgeStrict(kprof::worker::v1::WorkerAnswer answer, Done done) {
  const kprof::worker::v1::ArgumentData& data = answer.arguments();
  if (data.checked_size() == 0) {
    done(absl::InternalError(
             absl::StrCat("the worker sent no checked call of ", strict_->what, " back")),
         {}, std::move(answer));
    return;
  }
  std::vector<std::pair<uint64_t, size_t>> starts;  // each part's seed
  const std::vector<uint32_t> poisoned(data.written().begin(), data.written().end());
  {
    absl::MutexLock lock(&mutex_);
    for (const kprof::worker::v1::CheckedRepeat& checked : data.checked()) {
      starts.emplace_back(checked.seed(), parts_.size());
      parts_.push_back(
          {strict_->plan, absl::StrCat(strict_->what, ", ", CheckedName(checked)), -1});
    }
    references_.resize(parts_.size());
    missing_ = parts_.size();
    answer_ = std::move(answer);
    done_ = std::move(done);
  }
  // Parts of one seed share its run: the cache runs a key once for every job that waits.
  for (const auto& [seed, part] : starts) {
    start_(seed, poisoned,
           [self = shared_from_this(), part = part](const ReferenceCache::Result& result,
                                                    bool reused) {
             self->SetReference(part, result, reused);
           });
  }
}

absl::Status PendingCheck::Failed(absl::Status status,
                                  const kprof::worker::v1::WorkerAnswer& answer) const {
  if (!strict_.has_value() || !answer.check_failed() || status.ok()) return status;
  kprof::v1::CheckVerdict verdict;
  verdict.set_outcome(kprof::v1::CheckVerdict::WRONG);
  verdict.set_reference(strict_->plan.reference_name());
  verdict.set_level(kprof::v1::AnswerCheck::STRICT);
  status.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
  return status;
}

absl::Status PendingCheck::SameBits(const SentArguments& sent,
                                    const kprof::worker::v1::ArgumentData& data,
                                    const std::vector<kprof::v1::CheckVerdict>& verdicts) const {
  // Each checked call's outputs as sent, by the seed of its inputs: the first call on a seed
  // is what the others on it must repeat.
  std::map<uint64_t, std::pair<size_t, std::vector<std::string_view>>> first_of_seed;
  size_t argument = 0, at = 0;
  for (size_t p = 0; p < parts_.size() && p < static_cast<size_t>(data.checked_size()); ++p) {
    std::vector<std::string_view> outputs;
    for (size_t k = 0; k < parts_[p].plan.arguments(); ++k, ++argument) {
      if (sent.Unsent(argument)) continue;
      const uint64_t bytes = sent.sizes[argument];
      const bool output = std::find(verdicts[p].outputs().begin(), verdicts[p].outputs().end(),
                                    static_cast<int>(k)) != verdicts[p].outputs().end();
      if (output) outputs.push_back(sent.bytes.substr(at, bytes));
      at += bytes;
    }
    const auto [it, first] =
        first_of_seed.try_emplace(data.checked(static_cast<int>(p)).seed(), p, outputs);
    if (first || it->second.second == outputs) continue;
    kprof::v1::CheckVerdict verdict = verdicts[p];
    verdict.set_outcome(kprof::v1::CheckVerdict::WRONG);
    absl::Status differ = absl::AbortedError(
        absl::StrCat("wrong answer: ", parts_[p].what, " differs bit for bit from ",
                     CheckedName(data.checked(static_cast<int>(it->second.first))),
                     " on the same inputs (bitwise checks)"));
    differ.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
    return differ;
  }
  return absl::OkStatus();
}

kprof::v1::CheckVerdict PendingCheck::Merged(const std::vector<kprof::v1::CheckVerdict>& verdicts,
                                             const kprof::worker::v1::ArgumentData& data) const {
  kprof::v1::CheckVerdict merged = verdicts.front();
  merged.set_level(kprof::v1::AnswerCheck::STRICT);
  double seconds = 0;
  for (const kprof::v1::CheckVerdict& v : verdicts) {
    merged.set_max_abs_error(std::max(merged.max_abs_error(), v.max_abs_error()));
    merged.set_max_rel_error(std::max(merged.max_rel_error(), v.max_rel_error()));
    seconds += v.check_seconds();
  }
  merged.set_check_seconds(seconds);
  merged.set_reference_reused(false);
  for (const kprof::worker::v1::CheckedRepeat& checked : data.checked()) {
    merged.add_checked_repeats(checked.repeat());
    merged.set_fresh_inputs(merged.fresh_inputs() + (checked.fresh() ? 1 : 0));
  }
  return merged;
}

void PendingCheck::Decide(const std::vector<Reference>& references,
                          kprof::worker::v1::WorkerAnswer answer, const Done& done) const {
  const SentArguments sent = SentArguments::Of(answer);
  std::vector<kprof::v1::CheckVerdict> verdicts(parts_.size());
  absl::Status first = absl::OkStatus();
  size_t argument = 0, at = 0;  // part p's first argument, and where its bytes begin
  // The worker's cost of sending the arguments out, shared by the parts.
  const double sending = answer.arguments().seconds() / static_cast<double>(parts_.size());
  const absl::Span<const uint32_t> written(answer.arguments().written().data(),
                                           static_cast<size_t>(answer.arguments().written_size()));
  for (size_t p = 0; p < parts_.size(); ++p) {
    const Part& part = parts_[p];
    kprof::v1::CheckVerdict& verdict = verdicts[p];
    verdict.set_reference(part.plan.reference_name());
    verdict.set_reference_reused(references[p].reused);
    verdict.set_level(strict_.has_value() ? kprof::v1::AnswerCheck::STRICT
                                          : kprof::v1::AnswerCheck::BASIC);
    if (part.call >= 0) verdict.set_call(static_cast<uint32_t>(part.call));
    const size_t count = part.plan.arguments();
    // This part's arguments as sent (its bytes from `at` on), and their bytes in the file,
    // whether it is judged or not: the next part's begin after them.
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
      // A strict job's probe said which arguments it writes: each must be an output.
      if (strict_.has_value()) {
        judged = part.plan.CheckWritten(**references[p].result, written, strict_->what, &verdict);
      }
      if (judged.ok()) judged = part.plan.Judge(**references[p].result, mine, part.what, &verdict);
      verdict.set_check_seconds(sending + absl::ToDoubleSeconds(absl::Now() - start));
    }
    argument += count;
    at += bytes;
    // The detail carries the verdict with its cost.
    if (!judged.ok()) judged.SetPayload(kCheckVerdictType, absl::Cord(verdict.SerializeAsString()));
    if (first.ok()) first = judged;
  }
  if (strict_.has_value() && first.ok() && strict_->plan.bitwise()) {
    first = SameBits(sent, answer.arguments(), verdicts);
  }
  if (strict_.has_value() && first.ok()) {
    verdicts = {Merged(verdicts, answer.arguments())};
    if (const std::string& finding = answer.arguments().finding(); !finding.empty()) {
      verdicts.front().set_outcome(kprof::v1::CheckVerdict::WRONG);
      first = absl::AbortedError(absl::StrCat(strict_->what, ": ", finding));
      first.SetPayload(kCheckVerdictType, absl::Cord(verdicts.front().SerializeAsString()));
    }
  }
  answer.clear_argument_bytes();
  done(std::move(first), std::move(verdicts), std::move(answer));
}

}  // namespace kprof::server
