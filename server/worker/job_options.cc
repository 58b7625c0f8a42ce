#include "server/worker/job_options.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/args/arg_spec.h"
#include "core/args/arguments.h"
#include "core/measure/time_evaluator.h"

namespace kprof::server {
namespace {

// The convergence fields of a request onto the evaluator's options. They mean nothing without
// max_relative_stddev, so giving them alone is an error rather than silently ignored.
absl::Status ConvergenceOptions(const kprof::v1::TimeEvaluateRequest& r,
                                core::TimeEvaluatorOptions& options) {
  if (r.max_relative_stddev() == 0) {
    if (r.has_min_repeats() || r.max_time_ms() != 0) {
      return absl::InvalidArgumentError(
          "min_repeats and max_time_ms apply only with max_relative_stddev (e.g. 0.01), which "
          "turns convergence on");
    }
    return absl::OkStatus();
  }
  options.max_relative_stddev = r.max_relative_stddev();
  if (!r.has_repeat()) options.repeat = core::kDefaultConvergenceRepeats;
  options.min_repeats =
      r.has_min_repeats() ? r.min_repeats() : std::min(core::kDefaultMinRepeats, options.repeat);
  if (r.max_time_ms() != 0) {
    if (!(r.max_time_ms() > 0 && r.max_time_ms() < 1e12)) {
      return absl::InvalidArgumentError(absl::StrCat("max_time_ms = ", r.max_time_ms(),
                                                     " is out of range (accepted: more than 0)"));
    }
    options.max_time = absl::Milliseconds(r.max_time_ms());
  }
  return absl::OkStatus();
}

// The fixed placement fields every measuring request has.
template <typename Request>
void FixedPlacement(const Request& r, core::PlacementOptions& placement) {
  if (r.has_tensor_alignment()) placement.alignment = r.tensor_alignment();
  placement.offsets.assign(r.tensor_offset().begin(), r.tensor_offset().end());
  placement.huge_pages = r.huge_pages();
}

// The placement fields of a request, checked against its arguments.
absl::Status PlacementFromRequest(const kprof::v1::TimeEvaluateRequest& r,
                                  core::PlacementOptions& placement) {
  FixedPlacement(r, placement);
  placement.randomize = r.randomize_layout();
  if (r.has_repeats_per_layout()) placement.repeats_per_layout = r.repeats_per_layout();
  placement.first_layout_repeat = r.first_layout_repeat();
  return core::CheckPlacement(placement, static_cast<size_t>(r.call().args_size()));
}

// A request asking to be timed until its repeats agree, with the fields it leaves to that
// filled in; number and repeat are what it leaves to the daemon, so giving them is an error.
absl::StatusOr<kprof::v1::TimeEvaluateRequest> UntilStable(kprof::v1::TimeEvaluateRequest r,
                                                           bool strict) {
  if (r.has_number() || r.has_repeat()) {
    return absl::InvalidArgumentError(
        "until_stable chooses the calls per repeat and the repeats: leave out number and repeat, "
        "or until_stable for exactly those");
  }
  if (strict) {
    // Every call a repeat of its own, and a count known beforehand: strict checks draw their
    // checked repeats among it, and a run that converged early would end before most of them.
    if (r.max_relative_stddev() == 0) r.set_repeat(core::kStrictStableRepeats);
    return r;
  }
  if (r.min_repeat_ms() == 0 && r.cuda_graph() == 0) {
    r.set_min_repeat_ms(core::kStableMinRepeatMs);
  }
  if (r.max_relative_stddev() == 0) r.set_max_relative_stddev(core::kStableRelativeStddev);
  return r;
}

}  // namespace

absl::StatusOr<core::PlacementOptions> ProfilePlacement(
    const kprof::v1::ProfileFunctionRequest& r) {
  core::PlacementOptions placement;
  FixedPlacement(r, placement);
  KPROF_RETURN_IF_ERROR(core::CheckPlacement(placement, static_cast<size_t>(r.call().args_size())));
  return placement;
}

absl::StatusOr<core::PlacementOptions> ProfilePlacement(const kprof::v1::ProfileRequest& r) {
  core::PlacementOptions placement;
  FixedPlacement(r, placement);
  for (int i = 0; i < r.calls_size(); ++i) {
    if (absl::Status s =
            core::CheckPlacement(placement, static_cast<size_t>(r.calls(i).args_size()));
        !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("call ", i, " (", r.calls(i).function(), "): ", s.message()));
    }
  }
  return placement;
}

absl::StatusOr<core::TimeJob> TimeJobFromRequest(const kprof::v1::TimeEvaluateRequest& request,
                                                 base::Device device, uint64_t max_argument_bytes,
                                                 bool strict) {
  strict = strict || request.check().level() == kprof::v1::AnswerCheck::STRICT;
  std::optional<kprof::v1::TimeEvaluateRequest> stable;
  if (request.until_stable()) {
    KPROF_ASSIGN_OR_RETURN(stable, UntilStable(request, strict));
  }
  const kprof::v1::TimeEvaluateRequest& r = stable.has_value() ? *stable : request;
  core::TimeJob time;
  if (r.has_number()) time.options.number = r.number();
  if (r.has_repeat()) time.options.repeat = r.repeat();
  for (const auto& [what, ms] : {std::pair{"min_repeat_ms", r.min_repeat_ms()},
                                 std::pair{"cooldown_interval_ms", r.cooldown_interval_ms()},
                                 std::pair{"warmup_ms", r.warmup_ms()}}) {
    if (!(ms >= 0 && ms <= static_cast<double>(kMaxOptionMs))) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " = ", ms, " is out of range (accepted: 0 to ", kMaxOptionMs, ")"));
    }
  }
  time.options.min_repeat = absl::Milliseconds(r.min_repeat_ms());
  time.options.warmup = absl::Milliseconds(r.warmup_ms());
  if (r.has_limit_zero_time_iterations()) {
    time.options.limit_zero_time_iterations = r.limit_zero_time_iterations();
  }
  time.options.cooldown_interval = absl::Milliseconds(r.cooldown_interval_ms());
  if (r.has_repeats_to_cooldown()) time.options.repeats_to_cooldown = r.repeats_to_cooldown();
  time.options.cache_flush_bytes = r.cache_flush_bytes();
  // The flush buffers count like arguments: a request may not size them beyond the limit.
  if (r.cache_flush_bytes() > 0 && max_argument_bytes > 0 &&
      static_cast<uint64_t>(r.cache_flush_bytes()) > max_argument_bytes / 2) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cache_flush_bytes = ", r.cache_flush_bytes(), " needs two buffers of that size, over the ",
        "limit of ", max_argument_bytes, " bytes per job"));
  }
  time.flush_l2 = r.flush_l2();
  time.cold = r.cold();
  if (r.has_throttle_threshold()) time.throttle_threshold = r.throttle_threshold();
  time.discard_throttled = r.discard_throttled();
  time.cuda_graph = r.cuda_graph();
  KPROF_RETURN_IF_ERROR(PlacementFromRequest(r, time.placement));
  time.preprocess = r.preprocess();
  time.checksums = r.checksums();
  KPROF_RETURN_IF_ERROR(ConvergenceOptions(r, time.options));
  KPROF_ASSIGN_OR_RETURN(time.options.outliers, core::ParseOutlierFilter(r.outlier_filter()));
  // The front sees the check (its options are checked there); the worker gets the level alone.
  if (strict) time.strict.emplace();
  KPROF_RETURN_IF_ERROR(core::CheckTimeJob(time, device));
  return time;
}

absl::StatusOr<core::LaunchConfig> LaunchFromProto(const kprof::v1::LaunchConfig& launch) {
  core::LaunchConfig config;
  for (const auto& [what, from, to] : {std::tuple{"grid", &launch.grid(), &config.grid},
                                       std::tuple{"block", &launch.block(), &config.block}}) {
    if (from->empty() || from->size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat("launch.", what, " has ", from->size(),
                                                     " dimensions (accepted: 1 to 3, x first)"));
    }
    for (int i = 0; i < from->size(); ++i) (*to)[static_cast<size_t>(i)] = from->Get(i);
  }
  config.shared_bytes = launch.shared_bytes();
  return config;
}

absl::Status CheckCallOptions(const kprof::v1::FunctionCall& call) {
  for (const std::string& spec : call.args()) {
    KPROF_RETURN_IF_ERROR(core::ParseArgSpec(spec).status());
  }
  if (call.has_launch()) KPROF_RETURN_IF_ERROR(LaunchFromProto(call.launch()).status());
  return absl::OkStatus();
}

namespace {

absl::Status CheckTime(const kprof::v1::TimeEvaluateRequest& r, base::Device device,
                       uint64_t max_argument_bytes) {
  KPROF_RETURN_IF_ERROR(CheckCallOptions(r.call()));
  // 0 is the worker's default limit, which it applies (worker_job.cc).
  if (max_argument_bytes == 0) max_argument_bytes = core::ArgumentLimits{}.max_total_bytes;
  return TimeJobFromRequest(r, device, max_argument_bytes).status();
}

absl::Status CheckProfileFunction(const kprof::v1::ProfileFunctionRequest& r) {
  KPROF_RETURN_IF_ERROR(CheckCallOptions(r.call()));
  KPROF_RETURN_IF_ERROR(ProfilePlacement(r).status());
  core::ProfileJob profile;
  profile.warmup = r.warmup();
  if (r.has_number()) profile.number = r.number();
  return core::CheckProfileJob(profile);
}

}  // namespace

absl::Status CheckBatchJobOptions(const kprof::v1::BatchJob& job, base::Device device,
                                  uint64_t max_argument_bytes) {
  if (job.has_time_evaluate()) return CheckTime(job.time_evaluate(), device, max_argument_bytes);
  if (job.has_profile_function()) return CheckProfileFunction(job.profile_function());
  return absl::OkStatus();
}

absl::Status CheckJobOptions(const kprof::worker::v1::WorkerRequest& request, base::Device device) {
  using kprof::worker::v1::WorkerRequest;
  switch (request.job_case()) {
    case WorkerRequest::kTimeEvaluate:
      return CheckTime(request.time_evaluate(), device, request.max_argument_bytes());
    case WorkerRequest::kProfileFunction:
      return CheckProfileFunction(request.profile_function());
    case WorkerRequest::kProfile: {
      const kprof::v1::ProfileRequest& r = request.profile();
      for (int i = 0; i < r.calls_size(); ++i) {
        if (absl::Status s = CheckCallOptions(r.calls(i)); !s.ok()) {
          return absl::Status(
              s.code(), absl::StrCat("call ", i, " (", r.calls(i).function(), "): ", s.message()));
        }
      }
      KPROF_RETURN_IF_ERROR(ProfilePlacement(r).status());
      core::SequenceJob sequence;
      sequence.calls.resize(static_cast<size_t>(r.calls_size()));
      sequence.warmup = r.warmup();
      if (r.has_repeat()) sequence.repeat = r.repeat();
      return core::CheckSequenceJob(sequence);
    }
    case WorkerRequest::kReference:
      return CheckCallOptions(request.reference().call());
    default:
      return absl::OkStatus();
  }
}

}  // namespace kprof::server
