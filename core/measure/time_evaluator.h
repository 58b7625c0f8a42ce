// TimeEvaluator: times a function the way a benchmark harness does, with every parameter of
// TVM's time evaluator.
//
// One discarded first call (lazy initialisation, first-touch faults), then untimed calls for
// `warmup` (steady state: caches, branch predictors, the memory behind fresh pages, the CPU's
// clock); then `repeat` repeats,
// each of `number` calls timed together. When a repeat lasts less than `min_repeat`, `number`
// grows (NextNumber) and the repeat is measured again, until it is long enough or the timer
// has read zero `limit_zero_time_iterations` times. Before each repeat the pre-processing step
// runs; before each timed attempt, two buffers of `cache_flush_bytes` are copied to evict the
// caches; after every `repeats_to_cooldown` repeats the evaluator sleeps `cooldown_interval`.
// None of these is inside a timed region. Cold (`cold`), every call is flushed before and timed
// alone, and a repeat's time is the sum of its calls'.
//
//   TimeEvaluatorOptions options;
//   options.repeat = 5;
//   options.min_repeat = absl::Milliseconds(10);
// With max_relative_stddev set, the number of repeats is not fixed: after min_repeats the
// evaluation stops as soon as the relative standard deviation of the repeats is at most
// max_relative_stddev (converged), or when max_time has passed (not converged), and `repeat`
// is only the most repeats it makes. An outlier filter sets repeats aside from that statistic
// — the raw repeats are always returned with it.
//
//   KPROF_ASSIGN_OR_RETURN(TimeEvaluator evaluator, TimeEvaluator::Create(cpu));
//   KPROF_ASSIGN_OR_RETURN(TimeEvaluation result,
//                          evaluator.Evaluate([&] { return Saxpy(); }, options));
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "core/device/clock.h"
#include "core/device/device_api.h"
#include "core/device/timer.h"

namespace kprof::core {

// Which repeats the statistics set aside.
enum class OutlierFilter {
  kNone,
  kTukey,  // outside Q1 - 1.5·IQR .. Q3 + 1.5·IQR ("iqr")
};

// "none" or "iqr"; INVALID_ARGUMENT naming both for anything else ("" is none).
absl::StatusOr<OutlierFilter> ParseOutlierFilter(std::string_view name);
std::string_view OutlierFilterName(OutlierFilter filter);

// Why the repeats stopped.
enum class StopReason { kRepeatCount, kConverged, kTimeBudget };
std::string_view StopReasonName(StopReason reason);  // "repeat count", "converged", "time budget"

// Convergence's defaults: at least this many repeats (or `repeat`, when fewer), and no new one
// once this long has passed since the evaluation began (hyperfine's 10 runs; about a second).
inline constexpr int64_t kDefaultMinRepeats = 10;
inline constexpr double kDefaultMaxTimeMs = 1000;

struct TimeEvaluatorOptions {
  int64_t number = 1;  // calls per repeat to start with, >= 1
  int64_t repeat = 1;  // repeats, 1 to kMaxRepeat; with convergence, the most repeats
  absl::Duration min_repeat = absl::ZeroDuration();  // min_repeat_ms
  int64_t limit_zero_time_iterations = 100;          // >= 0
  absl::Duration cooldown_interval = absl::ZeroDuration();
  int64_t repeats_to_cooldown = 1;               // >= 1
  int64_t cache_flush_bytes = 0;                 // >= 0
  absl::Duration warmup = absl::ZeroDuration();  // untimed calls for this long, >= 0
  // The caller called the function already (a strict check's probe): no untimed first call.
  bool called = false;
  // Convergence: off at 0, else in (0, 1]. Then min_repeats (2 to `repeat`) repeats at least,
  // and no new repeat once max_time (> 0) has passed since the evaluation began.
  double max_relative_stddev = 0;
  int64_t min_repeats = kDefaultMinRepeats;
  absl::Duration max_time = absl::Milliseconds(kDefaultMaxTimeMs);
  OutlierFilter outliers = OutlierFilter::kNone;
  // Runs before each repeat, untimed (e.g. flush the arguments from the caches).
  std::function<absl::Status()> preprocess;
  // Runs before each repeat, before `preprocess`, untimed, given the repeat's index (from 0):
  // e.g. place the arguments afresh.
  std::function<absl::Status(int64_t repeat)> before_repeat;
  // Runs after each repeat is timed, untimed, given its index and its seconds per call (e.g.
  // read the CPU's clock).
  std::function<absl::Status(int64_t repeat, double seconds_per_call)> after_repeat;
  // Cold: the caches flushed (cache_flush_bytes, > 0) before every call, each call timed alone;
  // `number` grows until an attempt lasts min_repeat with its flushes.
  bool cold = false;
};

struct TimeEvaluation {
  std::vector<double> seconds_per_call;  // one per repeat
  std::vector<int64_t> numbers;          // calls per repeat, one per repeat
  int64_t final_number = 0;              // the number the last repeat used
  std::vector<size_t> outliers;          // repeats the filter set aside, by index
  // Sample standard deviation (n - 1) over the mean, of the repeats kept (all without a
  // filter); NaN for fewer than two.
  double rel_stddev = 0;
  bool converged = false;  // reached max_relative_stddev (convergence only)
  StopReason stop = StopReason::kRepeatCount;
};

// The most repeats one evaluation makes: each is kept, so this bounds its memory.
inline constexpr int64_t kMaxRepeat = 1'000'000;

// The most repeats a converging evaluation makes when the request names no `repeat`.
inline constexpr int64_t kDefaultConvergenceRepeats = 10'000;

// A measurement that runs until its repeats agree (the request's until_stable, what the clients
// ask by default): repeats of at least this long, until their relative standard deviation is at
// most this after the default min_repeats, or the default max_time has passed.
inline constexpr double kStableMinRepeatMs = 1;
inline constexpr double kStableRelativeStddev = 0.01;
// Under strict checks, this many repeats of one call each instead (the checks are drawn among
// a count known beforehand).
inline constexpr int64_t kStrictStableRepeats = 20;

// The largest number of calls per repeat: far beyond any measurement that finishes, and small
// enough that number × 1.618 + 1 stays exact in a double and within int64.
inline constexpr int64_t kMaxNumber = int64_t{1} << 50;

// How many calls the next attempt makes, after `number` calls took `elapsed_ms` and that was
// shorter than `min_repeat_ms`: max(min_repeat_ms / (elapsed_ms / number) + 1, number × 1.618),
// truncated, capped at kMaxNumber. `number` unchanged when elapsed_ms is not positive (the timer
// read zero; the zero-time limit decides when to stop).
int64_t NextNumber(int64_t number, double elapsed_ms, double min_repeat_ms);

// The sample relative standard deviation (n - 1) of the repeats `filter` keeps, which it set
// aside going to `outliers`; NaN for fewer than two repeats or a mean that is not positive.
double KeptRelativeStdDev(const std::vector<double>& samples, OutlierFilter filter,
                          std::vector<size_t>* outliers);

// INVALID_ARGUMENT naming the first option out of range and what is accepted.
absl::Status ValidateOptions(const TimeEvaluatorOptions& options);

class TimeEvaluator {
 public:
  // An evaluator for `device` with its DeviceApi, its registered timer and the steady clock.
  static absl::StatusOr<TimeEvaluator> Create(base::Device device);

  // For tests: explicit parts. `timers` creates the timer of each timed attempt; `clock` sleeps
  // the cool-downs.
  TimeEvaluator(base::Device device, DeviceApi* api, TimerFactory timers, Clock* clock);

  // Times `function`. Any error — bad options, the function's own, the device's — ends the
  // evaluation and is returned as it is. Each call starts from options.number.
  absl::StatusOr<TimeEvaluation> Evaluate(absl::FunctionRef<absl::Status()> function,
                                          const TimeEvaluatorOptions& options);

 private:
  base::Device device_;
  DeviceApi* api_;
  TimerFactory timers_;
  Clock* clock_;
};

}  // namespace kprof::core
