// CheckPlan: how the front judges one checked measurement (AnswerCheck) — which arguments are
// outputs, their tolerances, the expected data — and the judging itself, against the reference's
// arguments, of the arguments a candidate's worker sent out. Pure: no process, no gRPC.
//
//   KPROF_ASSIGN_OR_RETURN(CheckPlan plan, CheckPlan::Make(request.check(), request.call()));
//   ... the reference's run gives ReferenceData, the candidate's worker its WorkerAnswer ...
//   kprof::v1::CheckVerdict verdict;
//   absl::Status judged = plan.Judge(reference, answer, &verdict);  // ABORTED: a wrong answer
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/args/arg_spec.h"
#include "core/check/answer_compare.h"
#include "kprof/v1/kprof.pb.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

// The type URL of a CheckVerdict detail on a status (a wrong answer, a reference's failure).
inline constexpr char kCheckVerdictType[] = "type.googleapis.com/kprof.v1.CheckVerdict";

// A reference's run: every argument's bytes after it, in order, and which it changed (all false
// for a run of no function: the initial data); and the initial bytes of those it changed.
struct ReferenceData {
  std::string bytes;
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  std::vector<bool> changed;
  std::vector<int64_t> initial_offsets;  // -1: not sent

  std::string_view Argument(size_t k) const {
    return std::string_view(bytes).substr(offsets[k], sizes[k]);
  }
  // Argument k as it was before the reference's call (the data every worker starts from), or
  // none where the run did not send it.
  std::optional<std::string_view> Initial(size_t k) const {
    if (!changed[k]) return Argument(k);
    if (initial_offsets[k] < 0) return std::nullopt;
    return std::string_view(bytes).substr(static_cast<size_t>(initial_offsets[k]), sizes[k]);
  }
  // From a reference job's answer (its argument bytes are moved out).
  static ReferenceData FromAnswer(kprof::worker::v1::WorkerAnswer& answer);
};

// A candidate's arguments as its worker sent them out (ArgumentData): each one's size, their
// bytes back to back, and which it left out (unchanged: their bytes are the initial data).
struct SentArguments {
  absl::Span<const uint64_t> sizes;
  std::string_view bytes;
  absl::Span<const bool> unsent;

  bool Unsent(size_t k) const { return k < unsent.size() && unsent[k]; }

  static SentArguments Of(const kprof::worker::v1::WorkerAnswer& answer) {
    const kprof::worker::v1::ArgumentData& data = answer.arguments();
    return {absl::MakeConstSpan(data.sizes().data(), static_cast<size_t>(data.sizes_size())),
            answer.argument_bytes(),
            absl::MakeConstSpan(data.unsent().data(), static_cast<size_t>(data.unsent_size()))};
  }
};

class CheckPlan {
 public:
  // INVALID_ARGUMENT naming what is wrong: no reference and no expected data, both, a
  // reference with arguments of its own, an output index out of range or repeated, a tolerance
  // below 0, expected data whose count, type or size does not fit the outputs.
  static absl::StatusOr<CheckPlan> Make(const kprof::v1::AnswerCheck& check,
                                        const kprof::v1::FunctionCall& call);

  // The reference's run as a worker's ReferenceJob call: the reference's function on the
  // candidate's arguments; no function with expected data (the run gives the initial data).
  kprof::v1::FunctionCall ReferenceRun(const kprof::v1::FunctionCall& candidate) const;
  // "builtin:add", "MODULE:function" (the id's first 12 digits) or "expected data".
  const std::string& reference_name() const { return reference_name_; }
  bool expected_data() const { return check_.expected_size() > 0; }

  // Judges the candidate's arguments (`answer.argument_bytes`, as its ArgumentData gives them)
  // against the reference's. OK (verdict PASSED); ABORTED for a wrong answer or a written input
  // (verdict WRONG, also as the status's detail); FAILED_PRECONDITION when the reference
  // changed no argument and none is named an output; INTERNAL for sizes that do not fit the
  // arguments. `what` names the candidate ("function 'f'").
  absl::Status Judge(const ReferenceData& reference, SentArguments got, const std::string& what,
                     kprof::v1::CheckVerdict* verdict) const;
  absl::Status Judge(const ReferenceData& reference, const kprof::worker::v1::WorkerAnswer& answer,
                     const std::string& what, kprof::v1::CheckVerdict* verdict) const {
    return Judge(reference, SentArguments::Of(answer), what, verdict);
  }

  // A strict job's probe wrote `written` (argument indices): OK when each is an output; ABORTED
  // (verdict WRONG) naming the first that is an input the reference leaves as it is.
  absl::Status CheckWritten(const ReferenceData& reference, absl::Span<const uint32_t> written,
                            const std::string& what, kprof::v1::CheckVerdict* verdict) const;

  bool strict() const { return check_.level() == kprof::v1::AnswerCheck::STRICT; }
  bool bitwise() const { return check_.bitwise(); }

  // How many arguments the checked call has.
  size_t arguments() const { return specs_.size(); }

 private:
  std::vector<int> Outputs(const ReferenceData& reference) const;
  core::Tolerance ToleranceOf(const core::ArgSpec& spec) const;

  kprof::v1::AnswerCheck check_;
  std::vector<core::ArgSpec> specs_;
  std::vector<int> default_outputs_;  // with expected data and no outputs named
  std::string reference_name_;
};

}  // namespace kprof::server
