#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/measure/local_runner.h"
#include "core/measure/time_evaluator.h"

// The checks of a job's options (local_runner.h), in an object of their own: the daemon's front
// checks requests with them, and must not link the runner, whose collectors load PAPI.
namespace kprof::core {
namespace {

absl::Status CheckCount(std::string_view name, int64_t value, int64_t minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(name), " = ", value, " is out of range (accepted: ", minimum, " or more)"));
}

// Strict checks time every call as a repeat of its own, so that no call rides on the work of
// the one before it: number 1, and no option that makes a repeat more than one call.
absl::Status CheckStrict(const TimeJob& time) {
  if (!time.strict) return absl::OkStatus();
  const auto refused = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("strict checks time every call as a repeat of its own; ", std::string(what),
                     " (ask for more repeats instead)"));
  };
  if (time.options.number != 1) {
    return refused(absl::StrCat("number = ", time.options.number, " is not accepted (only 1)"));
  }
  if (time.options.min_repeat > absl::ZeroDuration()) {
    return refused("min_repeat_ms would grow number past 1");
  }
  if (time.cuda_graph > 0) return refused("cuda_graph replays many launches in one call");
  if (time.strict->checks < 1 || time.strict->fresh < 1) {
    return absl::InvalidArgumentError(absl::StrCat("strict checks = ", time.strict->checks,
                                                   ", fresh = ", time.strict->fresh,
                                                   " (accepted: 1 or more of each)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTimeJob(const TimeJob& time, base::Device device) {
  KPROF_RETURN_IF_ERROR(ValidateOptions(time.options));
  KPROF_RETURN_IF_ERROR(CheckStrict(time));
  if (!time.preprocess.empty() && time.preprocess != kCacheFlushCpuNonFirstArg) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown pre-processing step '", time.preprocess,
                     "' (accepted: ", std::string(kCacheFlushCpuNonFirstArg), ", or none)"));
  }
  if (!time.preprocess.empty() && device.type != base::DeviceType::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(time.preprocess, " flushes CPU caches; device ",
                                                   base::DeviceSpec(device), " is not a CPU"));
  }
  if (!(time.throttle_threshold > 0 && time.throttle_threshold <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("throttle_threshold = ", time.throttle_threshold,
                     " is out of range (accepted: more than 0 and up to 1, a fraction of the "
                     "nominal clock; default 0.75)"));
  }
  if (time.placement.randomize && time.placement.repeats_per_layout > 0 &&
      time.options.repeat / time.placement.repeats_per_layout > kMaxLayouts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "randomize_layout with repeat = ", time.options.repeat,
        " and repeats_per_layout = ", time.placement.repeats_per_layout, " makes more than ",
        kMaxLayouts, " layouts (accepted: up to that many; raise repeats_per_layout)"));
  }
  if (time.cuda_graph < 0 || time.cuda_graph > kMaxCudaGraph) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_graph = ", time.cuda_graph,
                                                   " is out of range (accepted: 0, off, to ",
                                                   kMaxCudaGraph, " launches per graph)"));
  }
  if (time.cuda_graph > 0 && device.type != base::DeviceType::kCuda) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_graph captures CUDA kernel launches; ",
                                                   base::DeviceSpec(device),
                                                   " is not a CUDA device"));
  }
  if (time.cuda_graph > 0 && time.placement.randomize) {
    return absl::InvalidArgumentError(
        "randomize_layout moves the arguments between repeats, and a captured graph holds their "
        "addresses: not both");
  }
  if (time.placement.huge_pages && device.type != base::DeviceType::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("huge_pages asks for transparent huge pages of CPU memory; device ",
                     base::DeviceSpec(device), " is not a CPU"));
  }
  if (time.flush_l2 && device.type != base::DeviceType::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("flush_l2 sizes the cache flush to a CUDA device's L2; on ",
                     base::DeviceSpec(device), " give cache_flush_bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckProfileJob(const ProfileJob& profile) {
  if (profile.placement.randomize) {
    return absl::InvalidArgumentError(
        "randomize_layout moves the arguments between a time evaluation's repeats; a profile "
        "measures one placement");
  }
  KPROF_RETURN_IF_ERROR(CheckCount("warmup", profile.warmup, 0));
  return CheckCount("number", profile.number, 1);
}

absl::Status CheckSequenceJob(const SequenceJob& sequence) {
  if (sequence.placement.randomize) {
    return absl::InvalidArgumentError(
        "randomize_layout moves the arguments between a time evaluation's repeats; a profile "
        "measures one placement");
  }
  KPROF_RETURN_IF_ERROR(CheckCount("warmup", sequence.warmup, 0));
  KPROF_RETURN_IF_ERROR(CheckCount("repeat", sequence.repeat, 1));
  if (sequence.calls.empty()) {
    return absl::InvalidArgumentError("a profile needs at least one call");
  }
  return absl::OkStatus();
}

}  // namespace kprof::core
