#include "core/measure/clock_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/collectors/nvml_collector.h"

namespace kprof::core {

absl::Status SetThrottled(const ClockWatch& watch, const TimeJob& time, OutlierFilter outliers,
                          TimeResult& result) {
  TimeEvaluation& evaluation = result.evaluation;
  const std::vector<bool> flags = watch.Throttled();
  for (size_t i = 0; i < flags.size() && i < evaluation.seconds_per_call.size(); ++i) {
    if (flags[i]) result.throttled.push_back(i);
  }
  const bool drop = time.discard_throttled && !result.throttled.empty();
  const std::vector<uint64_t> reasons = watch.Reasons();
  for (size_t i = 0, kept = 0; i < reasons.size() && i < evaluation.seconds_per_call.size(); ++i) {
    if (drop && i < flags.size() && flags[i]) continue;
    for (const std::string& name : ThrottleReasonNames(reasons[i])) {
      result.clock_reasons[name].push_back(static_cast<int64_t>(kept));
    }
    ++kept;
  }
  if (!drop) return absl::OkStatus();
  if (result.throttled.size() == evaluation.seconds_per_call.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all ", result.throttled.size(), " repeats were throttled (", watch.Describe(),
        "), so discard_throttled leaves none: cool the host, or lower throttle_threshold"));
  }
  std::vector<double> seconds;
  std::vector<int64_t> numbers;
  for (size_t i = 0, t = 0; i < evaluation.seconds_per_call.size(); ++i) {
    if (t < result.throttled.size() && result.throttled[t] == i) {
      ++t;
      continue;
    }
    seconds.push_back(evaluation.seconds_per_call[i]);
    numbers.push_back(evaluation.numbers[i]);
  }
  evaluation.seconds_per_call = std::move(seconds);
  evaluation.numbers = std::move(numbers);
  evaluation.rel_stddev =
      KeptRelativeStdDev(evaluation.seconds_per_call, outliers, &evaluation.outliers);
  result.discarded_throttled = static_cast<int64_t>(result.throttled.size());
  result.throttled.clear();
  return absl::OkStatus();
}

}  // namespace kprof::core
