#include "core/measure/time_evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "report/statistics.h"

namespace kprof::core {
namespace {

constexpr double kGoldenRatio = 1.618;

// Two device buffers that are copied one onto the other to push everything else out of the
// caches; freed on every path.
class CacheFlusher {
 public:
  CacheFlusher(base::Device device, DeviceApi* api) : device_(device), api_(api) {}
  ~CacheFlusher() {
    api_->Free(device_, a_);
    api_->Free(device_, b_);
  }
  CacheFlusher(const CacheFlusher&) = delete;
  CacheFlusher& operator=(const CacheFlusher&) = delete;

  absl::Status Allocate(size_t bytes) {
    bytes_ = bytes;
    if (bytes == 0) return absl::OkStatus();
    KPROF_ASSIGN_OR_RETURN(a_, api_->Alloc(device_, bytes));
    KPROF_ASSIGN_OR_RETURN(b_, api_->Alloc(device_, bytes));
    return api_->Memset(device_, b_, 1, bytes);
  }

  absl::Status Flush() {
    if (bytes_ == 0) return absl::OkStatus();
    return api_->Copy(device_, a_, b_, bytes_, CopyKind::kDeviceToDevice);
  }

 private:
  base::Device device_;
  DeviceApi* api_;
  void* a_ = nullptr;
  void* b_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

// No spread is known without two repeats or when the clock read nothing, so nothing converges
// on it.
double KeptRelativeStdDev(const std::vector<double>& samples, OutlierFilter filter,
                          std::vector<size_t>* outliers) {
  outliers->clear();
  if (filter == OutlierFilter::kTukey) *outliers = report::TukeyOutliers(samples);
  const std::vector<double> kept = report::Without(samples, *outliers);
  const double mean = report::Mean(kept);
  if (kept.size() < 2 || !(mean > 0)) return std::numeric_limits<double>::quiet_NaN();
  double squares = 0;
  for (double x : kept) squares += (x - mean) * (x - mean);
  return std::sqrt(squares / static_cast<double>(kept.size() - 1)) / mean;
}

absl::StatusOr<OutlierFilter> ParseOutlierFilter(std::string_view name) {
  if (name.empty() || name == "none") return OutlierFilter::kNone;
  if (name == "iqr") return OutlierFilter::kTukey;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown outlier filter '", std::string(name), "' (accepted: none, iqr)"));
}

std::string_view OutlierFilterName(OutlierFilter filter) {
  return filter == OutlierFilter::kTukey ? "iqr" : "none";
}

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kConverged:
      return "converged";
    case StopReason::kTimeBudget:
      return "time budget";
    case StopReason::kRepeatCount:
      break;
  }
  return "repeat count";
}

int64_t NextNumber(int64_t number, double elapsed_ms, double min_repeat_ms) {
  if (!(elapsed_ms > 0)) return number;
  const double by_rate = min_repeat_ms / (elapsed_ms / static_cast<double>(number)) + 1;
  const double grown = std::max(by_rate, static_cast<double>(number) * kGoldenRatio);
  if (!(grown < static_cast<double>(kMaxNumber))) return kMaxNumber;
  return std::max(number, static_cast<int64_t>(grown));
}

absl::Status ValidateOptions(const TimeEvaluatorOptions& o) {
  const auto bad = [](std::string_view name, auto value, std::string_view accepted) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), " = ", value,
                     " is out of range (accepted: ", std::string(accepted), ")"));
  };
  if (o.number < 1 || o.number > kMaxNumber) {
    return bad("number", o.number, absl::StrCat("1 to ", kMaxNumber));
  }
  if (o.repeat < 1 || o.repeat > kMaxRepeat) {
    return bad("repeat", o.repeat, absl::StrCat("1 to ", kMaxRepeat));
  }
  if (o.min_repeat < absl::ZeroDuration()) {
    return bad("min_repeat_ms", absl::ToDoubleMilliseconds(o.min_repeat), "0 or more");
  }
  if (o.limit_zero_time_iterations < 0) {
    return bad("limit_zero_time_iterations", o.limit_zero_time_iterations, "0 or more");
  }
  if (o.cooldown_interval < absl::ZeroDuration()) {
    return bad("cooldown_interval_ms", absl::ToDoubleMilliseconds(o.cooldown_interval),
               "0 or more");
  }
  if (o.repeats_to_cooldown < 1) {
    return bad("repeats_to_cooldown", o.repeats_to_cooldown,
               "1 or more: cool down every N repeats");
  }
  if (o.cache_flush_bytes < 0) return bad("cache_flush_bytes", o.cache_flush_bytes, "0 or more");
  if (o.warmup < absl::ZeroDuration()) {
    return bad("warmup_ms", absl::ToDoubleMilliseconds(o.warmup), "0 or more");
  }
  if (o.cold && o.cache_flush_bytes == 0) {
    return bad("cache_flush_bytes", o.cache_flush_bytes, "more than 0 when cold: what evicts");
  }
  if (!(o.max_relative_stddev >= 0 && o.max_relative_stddev <= 1)) {
    return bad("max_relative_stddev", o.max_relative_stddev, "0 (off) or up to 1, e.g. 0.01");
  }
  if (o.max_relative_stddev > 0) {
    if (o.min_repeats < 2 || o.min_repeats > o.repeat) {
      return bad("min_repeats", o.min_repeats,
                 absl::StrCat("2 to repeat = ", o.repeat, ": a spread needs two repeats"));
    }
    if (o.max_time <= absl::ZeroDuration()) {
      return bad("max_time_ms", absl::ToDoubleMilliseconds(o.max_time), "more than 0");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TimeEvaluator> TimeEvaluator::Create(base::Device device) {
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device.type));
  return TimeEvaluator(
      device, api, [](base::Device d) { return TimerRegistry::Global().Create(d); },
      Clock::Steady());
}

TimeEvaluator::TimeEvaluator(base::Device device, DeviceApi* api, TimerFactory timers, Clock* clock)
    : device_(device), api_(api), timers_(std::move(timers)), clock_(clock) {}

namespace {

// One evaluation, step by step: the untimed first call and warm-up, then repeats of timed
// attempts (each after the cache flush, `number` growing until an attempt lasts min_repeat),
// until the count, convergence or the time budget ends it.
class Evaluation {
 public:
  Evaluation(absl::FunctionRef<absl::Status()> function, const TimeEvaluatorOptions& options,
             base::Device device, DeviceApi* api, const TimerFactory& timers, Clock* clock)
      : function_(function),
        options_(options),
        device_(device),
        api_(api),
        timers_(timers),
        clock_(clock),
        flusher_(device, api),
        started_(clock->NowNanos()),
        converging_(options.max_relative_stddev > 0),
        number_(options.number) {}

  absl::StatusOr<TimeEvaluation> Run() {
    KPROF_RETURN_IF_ERROR(WarmUp());
    KPROF_RETURN_IF_ERROR(flusher_.Allocate(static_cast<size_t>(options_.cache_flush_bytes)));
    KPROF_RETURN_IF_ERROR(api_->Sync(device_));
    if (!converging_) {
      result_.seconds_per_call.reserve(static_cast<size_t>(options_.repeat));
      result_.numbers.reserve(static_cast<size_t>(options_.repeat));
    }
    for (int64_t i = 0; i < options_.repeat; ++i) {
      if (options_.before_repeat) KPROF_RETURN_IF_ERROR(options_.before_repeat(i));
      if (options_.preprocess) KPROF_RETURN_IF_ERROR(options_.preprocess());
      KPROF_ASSIGN_OR_RETURN(const double elapsed_ms, OneRepeat());
      result_.seconds_per_call.push_back(elapsed_ms / 1e3 / static_cast<double>(number_));
      result_.numbers.push_back(number_);
      if (options_.after_repeat) {
        KPROF_RETURN_IF_ERROR(options_.after_repeat(i, result_.seconds_per_call.back()));
      }
      if (Stopped(i + 1)) break;
      CoolDownAfter(i);
    }
    Conclude();
    return std::move(result_);
  }

 private:
  // The first call is not timed: it pays for lazy initialisation and first-touch faults. Then
  // untimed calls for `warmup`.
  absl::Status WarmUp() {
    if (!options_.called) KPROF_RETURN_IF_ERROR(function_());
    if (options_.warmup <= absl::ZeroDuration()) return absl::OkStatus();
    const int64_t warm_until = clock_->NowNanos() + absl::ToInt64Nanoseconds(options_.warmup);
    do {
      KPROF_RETURN_IF_ERROR(function_());
    } while (clock_->NowNanos() < warm_until);
    return api_->Sync(device_);
  }

  // One timed attempt of `calls` calls, after the flush: the flush and the synchronisation that
  // waits for it stay outside the timed region. Its nanoseconds.
  absl::StatusOr<int64_t> Timed(int64_t calls) {
    KPROF_RETURN_IF_ERROR(flusher_.Flush());
    KPROF_RETURN_IF_ERROR(api_->Sync(device_));
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Timer> timer, timers_(device_));
    timer->Start();
    for (int64_t j = 0; j < calls; ++j) KPROF_RETURN_IF_ERROR(function_());
    timer->Stop();
    const int64_t nanos = timer->ElapsedNanos();
    KPROF_RETURN_IF_ERROR(timer->status());
    return nanos;
  }

  // Attempts until one lasts min_repeat (or the zero-time limit or kMaxNumber ends the growth):
  // the milliseconds its calls took.
  absl::StatusOr<double> OneRepeat() {
    const double min_repeat_ms = absl::ToDoubleMilliseconds(options_.min_repeat);
    int64_t zero_times = 0;
    while (true) {
      int64_t nanos = 0;
      double attempt_ms = 0;  // what min_repeat is compared with
      if (options_.cold) {
        const int64_t wall_start = clock_->NowNanos();
        for (int64_t j = 0; j < number_; ++j) {
          KPROF_ASSIGN_OR_RETURN(const int64_t call, Timed(1));
          nanos += call;
        }
        // Cold, every call costs its flush too, untimed: the attempt grows until it lasts
        // min_repeat in all, flushes included, or a 1 us function with min_repeat_ms 100 would
        // make 100000 flushes of the last-level cache per repeat.
        attempt_ms = static_cast<double>(std::max(clock_->NowNanos() - wall_start, nanos)) / 1e6;
      } else {
        KPROF_ASSIGN_OR_RETURN(nanos, Timed(number_));
        attempt_ms = static_cast<double>(nanos) / 1e6;
      }
      if (nanos == 0) ++zero_times;
      // Unlike the reference, a limit of 0 means "stop at the first zero reading", not "never
      // grow number".
      const bool zero_limit_reached =
          nanos == 0 && zero_times >= options_.limit_zero_time_iterations;
      if (attempt_ms >= min_repeat_ms || zero_limit_reached || number_ == kMaxNumber) {
        return static_cast<double>(nanos) / 1e6;
      }
      number_ = NextNumber(number_, attempt_ms, min_repeat_ms);
    }
  }

  // Whether `done` repeats end a converging evaluation: their spread within the bound, or the
  // time budget spent. Testing convergence sorts the repeats: every repeat up to 100, then at
  // every 1% more, so that thousands of repeats cost O(n log n) each time, not each repeat.
  bool Stopped(int64_t done) {
    if (!converging_) return false;
    if (done >= options_.min_repeats && done >= next_check_) {
      next_check_ = done <= 100 ? done + 1 : done + done / 100;
      result_.rel_stddev =
          KeptRelativeStdDev(result_.seconds_per_call, options_.outliers, &result_.outliers);
      if (result_.rel_stddev <= options_.max_relative_stddev) {
        result_.converged = true;
        result_.stop = StopReason::kConverged;
        return true;
      }
    }
    if (clock_->NowNanos() - started_ >= absl::ToInt64Nanoseconds(options_.max_time)) {
      result_.stop = StopReason::kTimeBudget;
      return true;
    }
    return false;
  }

  // Cools down after every `repeats_to_cooldown` repeats, but not after the last one.
  void CoolDownAfter(int64_t i) {
    const bool due = (i + 1) % options_.repeats_to_cooldown == 0 && i + 1 < options_.repeat;
    if (options_.cooldown_interval > absl::ZeroDuration() && due) {
      clock_->SleepFor(options_.cooldown_interval);
    }
  }

  // The spread of what was not judged on the way. The last repeats may have gone untested
  // (past 100 the test runs at every 1% more, and the budget or the count can end it first): a
  // spread under the threshold is converged.
  void Conclude() {
    result_.final_number = number_;
    if (result_.converged) return;
    result_.rel_stddev =
        KeptRelativeStdDev(result_.seconds_per_call, options_.outliers, &result_.outliers);
    if (converging_ &&
        static_cast<int64_t>(result_.seconds_per_call.size()) >= options_.min_repeats &&
        result_.rel_stddev <= options_.max_relative_stddev) {
      result_.converged = true;
      result_.stop = StopReason::kConverged;
    }
  }

  const absl::FunctionRef<absl::Status()> function_;
  const TimeEvaluatorOptions& options_;
  const base::Device device_;
  DeviceApi* const api_;
  const TimerFactory& timers_;
  Clock* const clock_;
  CacheFlusher flusher_;
  const int64_t started_;
  const bool converging_;
  int64_t number_;  // grows within this evaluation only
  int64_t next_check_ = 0;
  TimeEvaluation result_;
};

}  // namespace

absl::StatusOr<TimeEvaluation> TimeEvaluator::Evaluate(absl::FunctionRef<absl::Status()> function,
                                                       const TimeEvaluatorOptions& options) {
  KPROF_RETURN_IF_ERROR(ValidateOptions(options));
  return Evaluation(function, options, device_, api_, timers_, clock_).Run();
}

}  // namespace kprof::core
