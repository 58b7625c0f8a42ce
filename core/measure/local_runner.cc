#include "core/measure/local_runner.h"

#include <sched.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/args/random.h"
#include "core/collectors/collector_registry.h"
#include "core/collectors/nvml_collector.h"
#include "core/cuda/cuda_backend.h"
#include "core/host/cpu_info.h"
#include "core/host/environment.h"
#include "core/host/interference.h"
#include "core/measure/clock_watch.h"
#include "core/measure/gpu_sharing.h"
#include "core/measure/kept_layouts.h"
#include "core/measure/profiler.h"

namespace kprof::core {
namespace {

// Everything a job needs before its first call: the function and its arguments.
struct Prepared {
  ModuleFunction function;
  std::unique_ptr<Arguments> args;
  std::function<absl::Status()> launch;  // a bound CUDA kernel

  bool is_kernel() const { return static_cast<bool>(launch); }

  absl::Status Call() { return launch ? launch() : CallHost(); }

  absl::Status CallHost() {
    const int32_t code = function.function(args->tensors(), args->size());
    if (code != 0) {
      return absl::AbortedError(absl::StrCat("function '", function.name, "' returned ", code));
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<std::vector<std::unique_ptr<MetricCollector>>> MakeCollectors(
    const std::vector<std::string>& specs) {
  std::vector<std::unique_ptr<MetricCollector>> collectors;
  for (const std::string& spec : specs) {
    KPROF_ASSIGN_OR_RETURN(auto collector, CreateCollector(spec));
    collectors.push_back(std::move(collector));
  }
  return collectors;
}

std::vector<MetricCollector*> Pointers(const std::vector<std::unique_ptr<MetricCollector>>& owned) {
  std::vector<MetricCollector*> pointers;
  for (const auto& c : owned) pointers.push_back(c.get());
  return pointers;
}

// The GPU's part of the manifest of a run on `device` (cuda), added to `manifest`.
void AddDeviceManifest(base::Device device, report::MetricMap& manifest) {
  if (device.type == base::DeviceType::kCuda) {
    for (auto& [name, value] : CudaBackendManifest(device.id)) {
      manifest.emplace(name, std::move(value));
    }
  }
}

// The environment manifest of a run on `device`: the host's, and the GPU's on cuda.
report::MetricMap Manifest(base::Device device) {
  report::MetricMap manifest = EnvironmentManifest();
  AddDeviceManifest(device, manifest);
  return manifest;
}

// The run's own configuration plus the environment manifest.
report::MetricMap WithEnvironment(report::MetricMap configuration, base::Device device) {
  for (auto& [name, value] : Manifest(device)) configuration.emplace(name, std::move(value));
  return configuration;
}

// Timers for host functions on a device other than the CPU: such a function may queue work on
// any stream (or several), so the region is closed by synchronising the whole device.
TimerRegistry* SyncingTimers() {
  static TimerRegistry* const registry = [] {
    auto* r = new TimerRegistry();
    r->Register(base::DeviceType::kCpu, [](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
      return std::make_unique<CpuTimer>();
    });
    r->Register(base::DeviceType::kCuda,
                [](base::Device d) -> absl::StatusOr<std::unique_ptr<Timer>> {
                  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(d.type));
                  return MakeSyncingTimer(d, api);
                });
    return r;
  }();
  return registry;
}

// The timers for `prepared` on `device`: the device's own (CUDA events on the worker's
// stream) for kernels and CPU code, synchronising ones for host code driving a device.
TimerRegistry* TimersFor(const Prepared& prepared, base::Device device) {
  if (device.type != base::DeviceType::kCpu && !prepared.is_kernel()) return SyncingTimers();
  return &TimerRegistry::Global();
}

// Waits for the device's queued work, so that an asynchronous fault is this job's error.
absl::Status Finish(base::Device device) {
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(device.type));
  return api->Sync(device);
}

// `evaluated`, or Finish's error.
absl::StatusOr<TimeEvaluation> Finished(absl::StatusOr<TimeEvaluation> evaluated,
                                        base::Device device) {
  if (absl::Status finished = Finish(device); !finished.ok()) return finished;
  return evaluated;
}

// Arguments a function's stray work may still write into: never freed (a worker ends after
// such a job), and reachable, not leaked.
void KeepForever(std::unique_ptr<Arguments> args) {
  static auto* const kept = new std::vector<std::unique_ptr<Arguments>>();
  kept->push_back(std::move(args));
}

// The size of the two buffers whose copy evicts `device`'s caches (read one, write the other):
// CPU, its last-level cache (32 MiB when sysfs does not say); CUDA, its L2.
absl::StatusOr<int64_t> CacheBytes(base::Device device) {
  if (device.type == base::DeviceType::kCuda) return CudaL2Bytes(device.id);
  return LastLevelCacheBytes().value_or(int64_t{32} << 20);
}

absl::StatusOr<std::unique_ptr<Arguments>> AllocateArguments(const Job& job,
                                                             const PlacementOptions& placement) {
  std::vector<ArgSpec> specs;
  specs.reserve(job.arg_specs.size());
  for (const std::string& text : job.arg_specs) {
    KPROF_ASSIGN_OR_RETURN(ArgSpec spec, ParseArgSpec(text));
    specs.push_back(std::move(spec));
  }
  return Arguments::Allocate(specs, job.seed, job.device, job.limits, placement);
}

absl::StatusOr<Prepared> Prepare(const Job& job, const PlacementOptions& placement = {}) {
  if (job.module == nullptr) return absl::InvalidArgumentError("job without a module");
  Prepared prepared;
  KPROF_ASSIGN_OR_RETURN(prepared.function, job.module->GetFunction(job.function));
  KPROF_ASSIGN_OR_RETURN(prepared.args, AllocateArguments(job, placement));
  if (prepared.function.check_arguments) {
    KPROF_RETURN_IF_ERROR(
        prepared.function.check_arguments(prepared.args->tensors(), prepared.args->size()));
  }
  if (prepared.function.bind_kernel) {
    if (!job.launch.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel '", job.function,
                       "' needs a launch configuration: grid and block (and dynamic "
                       "shared memory, 0 by default)"));
    }
    KPROF_ASSIGN_OR_RETURN(prepared.launch,
                           prepared.function.bind_kernel(*job.launch, prepared.args->tensors(),
                                                         prepared.args->size()));
  } else if (job.launch.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a launch configuration applies to CUDA kernels; '", job.function,
                     "' is a host function (it launches its own work, if any)"));
  }
  return prepared;
}

// The job's checked call (Job::checked), when it asks for one: on the arguments as initialised,
// before anything is timed.
absl::Status CheckedCall(const Job& job, Prepared& prepared) {
  if (!job.checked) return absl::OkStatus();
  if (job.before_checked) KPROF_RETURN_IF_ERROR(job.before_checked(*prepared.args));
  KPROF_RETURN_IF_ERROR(prepared.Call());
  KPROF_RETURN_IF_ERROR(Finish(job.device));
  return job.checked(*prepared.args);
}

// Before repeat `repeat` of a randomized layout: at every repeats_per_layout-th repeat, moves
// each argument to a random offset (steps of RandomOffsetStep within a page, drawn from the
// job's seed and the repeat, so a run can be reproduced), binds a kernel to the new addresses,
// and notes the layout.
absl::Status PlaceAfresh(const Job& job, const PlacementOptions& placement, int64_t repeat,
                         Prepared& prepared, std::vector<Layout>& layouts) {
  // The repeat's place in the whole measurement, of which this job may take a part.
  const int64_t overall = placement.first_layout_repeat + repeat;
  if (repeat != 0 && overall % placement.repeats_per_layout != 0) return absl::OkStatus();
  const auto drawn = static_cast<uint64_t>(overall / placement.repeats_per_layout);
  const uint64_t step = RandomOffsetStep(placement);
  const uint64_t places = kPageBytes / step;
  Layout layout;
  layout.first_repeat = repeat;
  layout.index = static_cast<int64_t>(drawn);
  for (size_t k = 0; k < static_cast<size_t>(prepared.args->size()); ++k) {
    const uint64_t offset = RandomBits(job.seed ^ 0x6c61796f7574ULL, drawn, k) % places * step;
    KPROF_RETURN_IF_ERROR(prepared.args->MoveTo(k, offset));
    layout.offsets.push_back(offset);
  }
  if (prepared.is_kernel()) {
    KPROF_ASSIGN_OR_RETURN(prepared.launch,
                           prepared.function.bind_kernel(*job.launch, prepared.args->tensors(),
                                                         prepared.args->size()));
  }
  layouts.push_back(std::move(layout));
  return absl::OkStatus();
}

// The evaluator's options for `time` on `device`: the flush sized to the device's caches.
absl::StatusOr<TimeEvaluatorOptions> EvaluatorOptions(const TimeJob& time, base::Device device) {
  TimeEvaluatorOptions options = time.options;
  if (time.flush_l2) {
    KPROF_ASSIGN_OR_RETURN(const int64_t l2_bytes, CudaL2Bytes(device.id));
    options.cache_flush_bytes = std::max(options.cache_flush_bytes, l2_bytes);
  }
  if (time.cold) {
    KPROF_ASSIGN_OR_RETURN(const int64_t cache_bytes, CacheBytes(device));
    options.cache_flush_bytes = std::max(options.cache_flush_bytes, cache_bytes);
    options.cold = true;
  }
  // A strict repeat is one call: a zero reading is taken as it is, not tried again. Its probe
  // is the untimed first call.
  if (time.strict) {
    options.limit_zero_time_iterations = 0;
    options.called = true;
  }
  return options;
}

// What follows the timed repeats: per launch under a CUDA graph, the repeats dropped as
// throttled, the layouts, summaries, environment, shapes and checksums.
absl::Status Complete(const Job& job, const TimeJob& time, const TimeEvaluatorOptions& options,
                      const ClockWatch& throttle, const Prepared& prepared, TimeResult& result) {
  if (time.cuda_graph > 0) {
    // Each timed call replayed the graph: per launch, divide by the launches it holds.
    TimeEvaluation& e = result.evaluation;
    for (double& s : e.seconds_per_call) s /= static_cast<double>(time.cuda_graph);
    for (int64_t& n : e.numbers) n *= time.cuda_graph;
    e.final_number *= time.cuda_graph;
  }
  // Each layout's repeats, by their index before any is dropped as throttled.
  const std::vector<double> all_seconds = result.evaluation.seconds_per_call;
  KPROF_RETURN_IF_ERROR(SetThrottled(throttle, time, options.outliers, result));
  result.layouts = KeptLayouts(std::move(result.layouts), all_seconds, throttle, time, result);
  result.summary = report::Summarize(result.evaluation.seconds_per_call);
  if (options.outliers != OutlierFilter::kNone) {
    result.filtered = report::Summarize(
        report::Without(result.evaluation.seconds_per_call, result.evaluation.outliers));
  }
  if (time.host_environment_apart) {
    Environment environment = ReadEnvironment();
    result.environment = std::move(environment.job);
    AddDeviceManifest(job.device, result.environment);
    result.host_environment = std::move(environment.host);
    result.host_generation = environment.host_generation;
  } else {
    result.environment = Manifest(job.device);
  }
  result.argument_shapes = prepared.args->ShapeString();
  if (time.checksums) {
    KPROF_ASSIGN_OR_RETURN(result.checksums, prepared.args->Sha256());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TimeResult> LocalRunner::Time(const Job& given, const TimeJob& time) {
  KPROF_RETURN_IF_ERROR(CheckTimeJob(time, given.device));
  KPROF_ASSIGN_OR_RETURN(TimeEvaluatorOptions options, EvaluatorOptions(time, given.device));
  // A strict job's data come from a seed of its own that no one else knows.
  Job strict_job;
  if (time.strict) {
    strict_job = given;
    strict_job.seed = StrictChecks::DrawSeed();
  }
  const Job& job = time.strict ? strict_job : given;
  KPROF_ASSIGN_OR_RETURN(Prepared prepared, Prepare(job, time.placement));
  std::optional<StrictChecks> strict;
  if (time.strict) {
    strict.emplace(*time.strict, options.repeat, job.device);
    KPROF_RETURN_IF_ERROR(
        strict->Probe(job.seed, *prepared.args, [&prepared] { return prepared.Call(); }));
  } else {
    KPROF_RETURN_IF_ERROR(CheckedCall(job, prepared));
  }
  if (!time.preprocess.empty()) {
    options.preprocess = [&prepared] { return prepared.args->FlushFromCaches(1); };
  }
  if (time.cuda_graph > 0) {
    if (!prepared.is_kernel()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda_graph captures kernel launches; '", job.function,
                       "' is a host function (it launches its own work, if any)"));
    }
    KPROF_ASSIGN_OR_RETURN(prepared.launch,
                           CaptureCudaGraph(job.device.id, prepared.launch, time.cuda_graph));
  }
  TimeResult result;
  result.placement = prepared.args->Placement();
  result.huge_pages = prepared.args->huge_pages();
  ClockWatch throttle(job, time);
  result.throttle_check = throttle.Unavailable();
  options.before_repeat = [&](int64_t repeat) {
    if (time.placement.randomize) {
      KPROF_RETURN_IF_ERROR(PlaceAfresh(job, time.placement, repeat, prepared, result.layouts));
      if (repeat == 0) result.placement = prepared.args->Placement();
    }
    if (strict) KPROF_RETURN_IF_ERROR(strict->BeforeRepeat(repeat, *prepared.args));
    throttle.Before();
    return absl::OkStatus();
  };
  options.after_repeat = [&](int64_t repeat, double seconds) {
    throttle.After();
    return strict ? strict->AfterRepeat(repeat, seconds, *prepared.args) : absl::OkStatus();
  };
  KPROF_ASSIGN_OR_RETURN(DeviceApi * api, GetDeviceApi(job.device.type));
  TimerRegistry* timers = TimersFor(prepared, job.device);
  TimeEvaluator evaluator(
      job.device, api, [timers](base::Device d) { return timers->Create(d); }, Clock::Steady());

  GpuSharing sharing(job.device);
  sharing.Before();
  const SystemSample before = SampleSystem();
  // The loop calls one kind of function or the other, never a branch between them per call.
  absl::StatusOr<TimeEvaluation> evaluated =
      prepared.is_kernel()
          ? evaluator.Evaluate([&prepared] { return prepared.launch(); }, options)
          : evaluator.Evaluate([&prepared] { return prepared.CallHost(); }, options);
  if (evaluated.ok()) evaluated = Finished(std::move(evaluated), job.device);
  if (evaluated.ok() && strict) {
    const absl::Status finished =
        strict->Finish(static_cast<int64_t>(evaluated->seconds_per_call.size()), *prepared.args,
                       [&prepared] { return prepared.Call(); });
    if (!finished.ok()) evaluated = finished;
  }
  if (!evaluated.ok()) {
    // Work of the function's that goes on may still write into its arguments.
    if (strict && strict->work_outlived()) KeepForever(std::move(prepared.args));
    return evaluated.status();
  }
  result.evaluation = *std::move(evaluated);
  if (strict) {
    if (const std::string finding = strict->Finding(); !finding.empty() && time.strict->finding) {
      time.strict->finding(finding);
    }
  }
  const SystemSample after = SampleSystem("/", before.cpu);
  result.warnings = InterferenceWarnings(before, after);
  result.cpu_wait = CpuWaitShare(before, after);
  if (std::string shared = sharing.After(); !shared.empty()) {
    result.warnings.push_back(std::move(shared));
  }
  if (result.huge_pages) {
    if (const std::string why = HugePagesUnavailable(); !why.empty()) {
      result.warnings.push_back(absl::StrCat("huge pages were asked for, but ", why));
    }
  }
  KPROF_RETURN_IF_ERROR(Complete(job, time, options, throttle, prepared, result));
  return result;
}

absl::StatusOr<report::Report> LocalRunner::Profile(const Job& job, const ProfileJob& profile) {
  KPROF_RETURN_IF_ERROR(CheckProfileJob(profile));
  KPROF_ASSIGN_OR_RETURN(auto collectors, MakeCollectors(profile.collectors));
  KPROF_ASSIGN_OR_RETURN(Prepared prepared, Prepare(job, profile.placement));
  KPROF_RETURN_IF_ERROR(CheckedCall(job, prepared));
  for (int64_t i = 0; i < profile.warmup; ++i) KPROF_RETURN_IF_ERROR(prepared.Call());

  KPROF_ASSIGN_OR_RETURN(
      std::unique_ptr<Profiler> profiler,
      Profiler::Create({job.device}, Pointers(collectors),
                       WithEnvironment({{"Warm-up Calls", report::Count{profile.warmup}},
                                        {"Seed", std::to_string(job.seed)}},
                                       job.device),
                       TimersFor(prepared, job.device)));
  KPROF_RETURN_IF_ERROR(profiler->Start());
  KPROF_RETURN_IF_ERROR(profiler->StartCall(
      job.function, job.device,
      {{std::string(report::kArgumentShapesMetric), prepared.args->ShapeString()},
       {std::string(report::kArgumentPlacementMetric),
        DescribePlacement(prepared.args->Placement())}}));
  for (int64_t i = 0; i < profile.number; ++i) KPROF_RETURN_IF_ERROR(prepared.Call());
  KPROF_RETURN_IF_ERROR(
      profiler->StopCall({{std::string(report::kCountMetric), report::Count{profile.number}}}));
  KPROF_RETURN_IF_ERROR(profiler->Stop());
  KPROF_RETURN_IF_ERROR(Finish(job.device));
  return profiler->GetReport();
}

absl::Status LocalRunner::RunOnce(const Job& job, const ArgumentsVisitor& before,
                                  const ArgumentsVisitor& after) {
  if (job.function.empty()) {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Arguments> args, AllocateArguments(job, {}));
    KPROF_RETURN_IF_ERROR(before(*args));
    return after(*args);
  }
  KPROF_ASSIGN_OR_RETURN(Prepared prepared, Prepare(job));
  for (const uint32_t k : job.poisoned) {
    if (k >= static_cast<uint32_t>(prepared.args->size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("poisoned argument ", k, " of ", prepared.args->size()));
    }
    KPROF_RETURN_IF_ERROR(prepared.args->Poison(k));
  }
  KPROF_RETURN_IF_ERROR(before(*prepared.args));
  KPROF_RETURN_IF_ERROR(prepared.Call());
  KPROF_RETURN_IF_ERROR(Finish(job.device));
  return after(*prepared.args);
}

absl::StatusOr<report::Report> LocalRunner::ProfileSequence(const SequenceJob& sequence) {
  KPROF_RETURN_IF_ERROR(CheckSequenceJob(sequence));
  KPROF_ASSIGN_OR_RETURN(auto collectors, MakeCollectors(sequence.collectors));

  std::vector<Prepared> calls;
  std::vector<std::string> shapes, placements;
  ArgumentLimits remaining = sequence.limits;
  for (size_t i = 0; i < sequence.calls.size(); ++i) {
    Job job = sequence.calls[i];
    job.device = sequence.device;
    job.seed = sequence.seed + i;  // each call's data differs, reproducibly
    job.limits = remaining;
    absl::StatusOr<Prepared> prepared = Prepare(job, sequence.placement);
    if (!prepared.ok()) {
      return absl::Status(prepared.status().code(),
                          absl::StrCat("call ", i, " (", job.function,
                                       "): ", std::string(prepared.status().message())));
    }
    // A checked call runs on its own data as initialised, before any call is timed.
    if (absl::Status checked = CheckedCall(job, *prepared); !checked.ok()) {
      return absl::Status(checked.code(), absl::StrCat("call ", i, " (", job.function,
                                                       "), its checked call: ", checked.message()));
    }
    // What it took, placement room included, is what the next calls may not.
    const uint64_t bytes = prepared->args->allocated_bytes();
    remaining.max_total_bytes -= std::min(bytes, remaining.max_total_bytes);
    shapes.push_back(prepared->args->ShapeString());
    placements.push_back(DescribePlacement(prepared->args->Placement()));
    calls.push_back(*std::move(prepared));
  }
  for (int64_t w = 0; w < sequence.warmup; ++w) {
    for (Prepared& call : calls) KPROF_RETURN_IF_ERROR(call.Call());
  }
  // Device-synchronising timers as soon as one call is host code driving the device.
  TimerRegistry* timers = &TimerRegistry::Global();
  for (const Prepared& call : calls) {
    if (TimersFor(call, sequence.device) != timers) timers = TimersFor(call, sequence.device);
  }
  KPROF_ASSIGN_OR_RETURN(
      std::unique_ptr<Profiler> profiler,
      Profiler::Create({sequence.device}, Pointers(collectors),
                       WithEnvironment({{"Warm-up Runs", report::Count{sequence.warmup}},
                                        {"Repeats", report::Count{sequence.repeat}},
                                        {"Seed", std::to_string(sequence.seed)}},
                                       sequence.device),
                       timers));
  KPROF_RETURN_IF_ERROR(profiler->Start());
  for (int64_t r = 0; r < sequence.repeat; ++r) {
    for (size_t i = 0; i < calls.size(); ++i) {
      KPROF_RETURN_IF_ERROR(
          profiler->StartCall(calls[i].function.name, sequence.device,
                              {{std::string(report::kArgumentShapesMetric), shapes[i]},
                               {std::string(report::kArgumentPlacementMetric), placements[i]}}));
      KPROF_RETURN_IF_ERROR(calls[i].Call());
      KPROF_RETURN_IF_ERROR(profiler->StopCall());
    }
  }
  KPROF_RETURN_IF_ERROR(profiler->Stop());
  KPROF_RETURN_IF_ERROR(Finish(sequence.device));
  return profiler->GetReport();
}

}  // namespace kprof::core
