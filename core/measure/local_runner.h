// LocalRunner: one measurement of one module function, in this process — what a worker process
// runs for each job, and what the demo and the benchmarks call directly.
//
// It parses the argument specs, allocates and initialises the tensors on the job's device,
// checks them against the function (builtins say what they take), then either times the
// function (TimeEvaluator) or profiles it under collectors (Profiler), and frees everything.
//
//   LocalRunner runner;
//   Job job{&BuiltinModule(), "spin_us", {DeviceType::kCpu, 0}, {"float64:100"}};
//   TimeJob timing;
//   timing.options.repeat = 10;
//   KPROF_ASSIGN_OR_RETURN(TimeResult result, runner.Time(job, timing));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/device.h"
#include "core/args/arguments.h"
#include "core/host/throttle.h"
#include "core/measure/strict_checks.h"
#include "core/measure/time_evaluator.h"
#include "core/modules/module.h"
#include "report/report.h"
#include "report/statistics.h"

namespace kprof::core {

// The most launches one captured graph holds.
inline constexpr int64_t kMaxCudaGraph = 100'000;

// The named pre-processing steps a TimeEvaluate may ask for.
inline constexpr std::string_view kCacheFlushCpuNonFirstArg = "cache_flush_cpu_non_first_arg";

struct Job {
  const Module* module = nullptr;
  std::string function;
  base::Device device;
  std::vector<std::string> arg_specs;
  uint64_t seed = 0;
  ArgumentLimits limits;
  // A CUDA kernel's grid, block and dynamic shared memory: required for kernels, refused for
  // host functions.
  std::optional<LaunchConfig> launch;
  // Before the measurement (Time, Profile): call the function once on the arguments as
  // initialised, outside any timing, synchronise the device, and hand the arguments to
  // `checked`, which reads them out for a check of the answer.
  std::function<absl::Status(const Arguments&)> checked;
  // With `checked`: called with the arguments as initialised just before the checked call, so
  // that `checked` can tell what the call changed.
  std::function<absl::Status(const Arguments&)> before_checked;
  // A reference's run for a strict check (RunOnce): arguments poisoned after they are
  // initialised, as the candidate's were before its checked call.
  std::vector<uint32_t> poisoned;
};

struct TimeJob {
  TimeEvaluatorOptions options;  // its `preprocess` is set from `preprocess` below
  bool flush_l2 = false;         // cache_flush_bytes = the CUDA device's L2 size
  std::string preprocess;        // "" or kCacheFlushCpuNonFirstArg
  bool checksums = false;        // SHA-256 of each argument after the run
  PlacementOptions placement;    // where the arguments lie, or how they move between repeats
  // Caches flushed before every call, each call timed alone: two buffers the size of the CPU's
  // last-level cache (or of the CUDA device's L2), one copied onto the other, unless
  // cache_flush_bytes asks for more.
  bool cold = false;
  // Repeats taken while the measuring CPU's clock was below this fraction of its nominal clock
  // are marked throttled (0 < threshold <= 1); with discard_throttled, dropped.
  double throttle_threshold = kDefaultThrottleThreshold;
  bool discard_throttled = false;
  std::string sysfs_root = "/";  // where the CPU's clocks are read: tests give a fake tree
  // CUDA kernels: capture this many launches in a graph, time its replays and divide by it
  // (0: off; up to kMaxCudaGraph).
  int64_t cuda_graph = 0;
  // The result's `environment` holds the job's part of the manifest alone, and
  // `host_environment` the host's (ReadEnvironment): for a process that sends the host's part
  // once (a worker).
  bool host_environment_apart = false;
  // Strict checks among the timed repeats (StrictChecks): the job's seed is drawn afresh and its
  // `checked` hooks are not used; `send` takes the checked calls' arguments.
  std::optional<StrictOptions> strict;
};

// One placement of the arguments under randomize: the offset of each, the repeats it held
// for (`repeats` from first_repeat on), and the median of their seconds per call.
struct Layout {
  std::vector<uint64_t> offsets;
  int64_t index =
      0;  // the measurement's layout number: (first_layout_repeat + repeat) / per layout
  int64_t first_repeat = 0;
  int64_t repeats = 0;
  double median = 0;
};

struct TimeResult {
  TimeEvaluation evaluation;
  std::vector<TensorPlace> placement;  // each argument's, as the first repeat found it
  bool huge_pages = false;             // asked of the CPU's memory (madvise)
  std::vector<Layout> layouts;         // with placement.randomize: each placement in turn
  // Repeats taken below the throttle threshold: their indices in evaluation.seconds_per_call,
  // or, with discard_throttled, how many were dropped from it. throttle_check says why
  // throttling could not be told ("" when it could).
  std::vector<size_t> throttled;
  int64_t discarded_throttled = 0;
  std::string throttle_check;
  // On a CUDA device: each reason NVML gave for holding the GPU's clock back (GpuIdle left out)
  // and the repeats it was given for, as indices in evaluation.seconds_per_call.
  std::map<std::string, std::vector<int64_t>> clock_reasons;
  report::Summary summary;   // of evaluation.seconds_per_call, all of them
  report::Summary filtered;  // of the repeats the outlier filter kept; count 0 without a filter
  std::vector<std::string> warnings;  // InterferenceWarnings over the run
  double cpu_wait = -1;               // CpuWaitShare over the run; < 0 unknown
  std::string argument_shapes;
  std::vector<std::string> checksums;  // when asked for
  report::MetricMap environment;       // EnvironmentManifest() at the end of the run
  // With TimeJob::host_environment_apart: the host's part, and its generation.
  std::shared_ptr<const report::MetricMap> host_environment;
  uint64_t host_generation = 0;
};

struct ProfileJob {
  int64_t warmup = 0;                   // untimed calls first, >= 0
  int64_t number = 1;                   // calls measured together, >= 1
  std::vector<std::string> collectors;  // CreateCollector specs
  PlacementOptions placement;           // where the arguments lie (not randomized)
};

// A sequence of calls on one device, profiled together (a model, layer by layer).
struct SequenceJob {
  std::vector<Job> calls;  // run in this order; their `device`, `seed` and `limits` are ignored
  base::Device device;
  uint64_t seed = 0;
  ArgumentLimits limits;  // for all calls' arguments together
  int64_t warmup = 0;     // untimed runs of the sequence first, >= 0
  int64_t repeat = 1;     // profiled runs of the sequence, >= 1
  std::vector<std::string> collectors;
  PlacementOptions placement;  // for every call's arguments (not randomized)
};

// The checks of a job's options alone, before anything is prepared: what Time, Profile and
// ProfileSequence check first, for a caller that refuses a bad request early (the daemon's
// front, before queueing). INVALID_ARGUMENT naming the option and what is accepted.
absl::Status CheckTimeJob(const TimeJob& time, base::Device device);
absl::Status CheckProfileJob(const ProfileJob& profile);
absl::Status CheckSequenceJob(const SequenceJob& sequence);

class LocalRunner {
 public:
  // Times the function. A non-zero return is ABORTED: "function 'f' returned 3".
  absl::StatusOr<TimeResult> Time(const Job& job, const TimeJob& time);

  // Profiles `number` calls after `warmup`: one row with Count = number and the totals of
  // duration and collector metrics over those calls.
  absl::StatusOr<report::Report> Profile(const Job& job, const ProfileJob& profile);

  // Profiles the sequence: a row per call per repeat (the table aggregates them), Percent of
  // the device total, the device's totals over all repeats.
  absl::StatusOr<report::Report> ProfileSequence(const SequenceJob& sequence);

  // A reference's run: prepares the arguments, hands them to `before` as initialised, calls
  // the function once (none when job.function is empty), synchronises the device, and hands
  // them to `after`.
  using ArgumentsVisitor = std::function<absl::Status(const Arguments&)>;
  absl::Status RunOnce(const Job& job, const ArgumentsVisitor& before,
                       const ArgumentsVisitor& after);
};

}  // namespace kprof::core
