#include "core/local_runner.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/collectors/collector_registry.h"
#include "core/profiler.h"
#include "core/status_macros.h"

namespace kprof::core {
namespace {

// Everything a job needs before its first call: the function and its arguments.
struct Prepared {
  ModuleFunction function;
  std::unique_ptr<Arguments> args;

  absl::Status Call() {
    const int32_t code = function.function(args->tensors(), args->size());
    if (code != 0) {
      return absl::AbortedError(absl::StrCat("function '", function.name, "' returned ", code));
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<Prepared> Prepare(const Job& job) {
  if (job.module == nullptr) return absl::InvalidArgumentError("job without a module");
  Prepared prepared;
  KPROF_ASSIGN_OR_RETURN(prepared.function, job.module->GetFunction(job.function));
  std::vector<ArgSpec> specs;
  specs.reserve(job.arg_specs.size());
  for (const std::string& text : job.arg_specs) {
    KPROF_ASSIGN_OR_RETURN(ArgSpec spec, ParseArgSpec(text));
    specs.push_back(std::move(spec));
  }
  KPROF_ASSIGN_OR_RETURN(prepared.args,
                         Arguments::Allocate(specs, job.seed, job.device, job.limits));
  if (prepared.function.check_arguments) {
    KPROF_RETURN_IF_ERROR(
        prepared.function.check_arguments(prepared.args->tensors(), prepared.args->size()));
  }
  return prepared;
}

}  // namespace

absl::StatusOr<TimeResult> LocalRunner::Time(const Job& job, const TimeJob& time) {
  TimeEvaluatorOptions options = time.options;
  KPROF_RETURN_IF_ERROR(ValidateOptions(options));
  if (!time.preprocess.empty() && time.preprocess != kCacheFlushCpuNonFirstArg) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown pre-processing step '", time.preprocess,
                     "' (accepted: ", std::string(kCacheFlushCpuNonFirstArg), ", or none)"));
  }
  if (!time.preprocess.empty() && job.device.type != DeviceType::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(time.preprocess, " flushes CPU caches; device ",
                                                   DeviceSpec(job.device), " is not a CPU"));
  }
  KPROF_ASSIGN_OR_RETURN(Prepared prepared, Prepare(job));
  if (!time.preprocess.empty()) {
    options.preprocess = [&prepared] { return prepared.args->FlushFromCaches(1); };
  }
  KPROF_ASSIGN_OR_RETURN(TimeEvaluator evaluator, TimeEvaluator::Create(job.device));

  TimeResult result;
  KPROF_ASSIGN_OR_RETURN(result.evaluation,
                         evaluator.Evaluate([&prepared] { return prepared.Call(); }, options));
  result.summary = Summarize(result.evaluation.seconds_per_call);
  result.argument_shapes = prepared.args->ShapeString();
  if (time.checksums) {
    KPROF_ASSIGN_OR_RETURN(result.checksums, prepared.args->Sha256());
  }
  return result;
}

absl::StatusOr<Report> LocalRunner::Profile(const Job& job, const ProfileJob& profile) {
  if (profile.warmup < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup = ", profile.warmup, " is out of range (accepted: 0 or more)"));
  }
  if (profile.number < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("number = ", profile.number, " is out of range (accepted: 1 or more)"));
  }
  std::vector<std::unique_ptr<MetricCollector>> collectors;
  std::vector<MetricCollector*> collector_pointers;
  for (const std::string& spec : profile.collectors) {
    KPROF_ASSIGN_OR_RETURN(auto collector, CreateCollector(spec));
    collector_pointers.push_back(collector.get());
    collectors.push_back(std::move(collector));
  }
  KPROF_ASSIGN_OR_RETURN(Prepared prepared, Prepare(job));
  for (int64_t i = 0; i < profile.warmup; ++i) KPROF_RETURN_IF_ERROR(prepared.Call());

  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Profiler> profiler,
                         Profiler::Create({job.device}, collector_pointers,
                                          {{"Warm-up Calls", Count{profile.warmup}},
                                           {"Seed", std::to_string(job.seed)}}));
  KPROF_RETURN_IF_ERROR(profiler->Start());
  KPROF_RETURN_IF_ERROR(
      profiler->StartCall(job.function, job.device,
                          {{std::string(kArgumentShapesMetric), prepared.args->ShapeString()}}));
  for (int64_t i = 0; i < profile.number; ++i) KPROF_RETURN_IF_ERROR(prepared.Call());
  KPROF_RETURN_IF_ERROR(profiler->StopCall({{std::string(kCountMetric), Count{profile.number}}}));
  KPROF_RETURN_IF_ERROR(profiler->Stop());
  return profiler->GetReport();
}

}  // namespace kprof::core
