#include "server/worker/worker_job.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "core/cuda/cuda_backend.h"
#include "core/measure/local_runner.h"
#include "core/measure/strict_checks.h"
#include "core/modules/builtin_module.h"
#include "core/modules/module_format.h"
#include "core/modules/shared_library.h"
#include "kprof/config.h"
#include "proto/status.h"
#include "proto/wire.h"
#include "server/worker/host_description.h"
#include "server/worker/job_leftovers.h"
#include "server/worker/job_options.h"
#include "server/worker/throughput.h"

namespace kprof::server {
namespace {

using kprof::worker::v1::WorkerRequest;
using kprof::worker::v1::WorkerResponse;

absl::Status CheckDevice(const std::string& requested, base::Device mine) {
  KPROF_ASSIGN_OR_RETURN(base::Device device,
                         base::ParseDevice(requested.empty() ? "cpu:0" : requested));
  if (device != mine) {
    return absl::InternalError(absl::StrCat("job for ", base::DeviceSpec(device),
                                            " reached the worker of ", base::DeviceSpec(mine)));
  }
  return absl::OkStatus();
}

std::vector<std::string> CollectorTexts(
    const google::protobuf::RepeatedPtrField<kprof::v1::CollectorSpec>& specs) {
  std::vector<std::string> texts;
  for (const auto& spec : specs) texts.push_back(wire::CollectorSpecText(spec));
  return texts;
}

void ToProto(const report::Summary& summary, kprof::v1::TimeStatistics* out) {
  out->set_mean(summary.mean);
  out->set_median(summary.median);
  out->set_min(summary.min);
  out->set_max(summary.max);
  out->set_std(summary.stddev);
  out->set_cv(summary.cv);
}

// A time evaluation's result as its response (the host's part of the environment aside).
void ToProto(const core::TimeResult& result, const core::TimeJob& time, base::Device device,
             kprof::v1::TimeEvaluateResponse* out) {
  const core::TimeEvaluation& evaluation = result.evaluation;
  for (double s : evaluation.seconds_per_call) out->add_seconds_per_call(s);
  for (int64_t n : evaluation.numbers) out->add_numbers(n);
  ToProto(result.summary, out->mutable_statistics());
  out->set_final_number(evaluation.final_number);
  if (time.options.max_relative_stddev > 0) out->set_converged(evaluation.converged);
  out->set_rel_stddev(evaluation.rel_stddev);
  out->set_stop_reason(std::string(core::StopReasonName(evaluation.stop)));
  if (time.options.outliers != core::OutlierFilter::kNone) {
    for (size_t i : evaluation.outliers) out->add_outliers(static_cast<int32_t>(i));
    ToProto(result.filtered, out->mutable_filtered_statistics());
  }
  for (const std::string& w : result.warnings) out->add_warnings(w);
  if (result.cpu_wait >= 0) out->set_cpu_wait(result.cpu_wait);
  for (const core::TensorPlace& place : result.placement) {
    kprof::v1::TensorPlacement* p = out->add_placement();
    p->set_alignment(place.alignment);
    p->set_offset(place.offset);
  }
  out->set_huge_pages(result.huge_pages);
  for (const core::Layout& layout : result.layouts) {
    kprof::v1::Layout* l = out->add_layouts();
    for (uint64_t offset : layout.offsets) l->add_offsets(offset);
    l->set_first_repeat(static_cast<int32_t>(layout.first_repeat));
    l->set_repeats(static_cast<int32_t>(layout.repeats));
    l->set_median(layout.median);
    l->set_index(layout.index);
  }
  out->set_mode(time.cold ? "cold" : "hot");
  for (size_t i : result.throttled) out->add_throttled_repeats(static_cast<int32_t>(i));
  out->set_discarded_throttled(static_cast<int32_t>(result.discarded_throttled));
  out->set_throttle_check(result.throttle_check);
  for (const auto& [reason, repeats] : result.clock_reasons) {
    kprof::v1::ClockReason* c = out->add_clock_reasons();
    c->set_reason(reason);
    for (int64_t i : repeats) c->add_repeats(static_cast<int32_t>(i));
  }
  out->set_cuda_graph(time.cuda_graph);
  for (const std::string& c : result.checksums) out->add_checksums(c);
  out->set_device(base::DeviceSpec(device));
  out->set_argument_shapes(result.argument_shapes);
  wire::ToProto(result.environment, out->mutable_environment());
}

// Opens a module file in this worker: a host library with dlopen, CUDA code on the device.
absl::StatusOr<std::unique_ptr<core::Module>> Open(const kprof::worker::v1::ModuleFile& file,
                                                   base::Device device) {
  if (core::IsCudaFormat(file.format())) {
    if (device.type != base::DeviceType::kCuda) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.format(), " module for ", base::DeviceSpec(device)));
    }
    return core::LoadCudaModuleFile(file.path(), file.format(), device.id);
  }
  return core::SharedLibraryModule::OpenFile(file.path());
}

// Opens a module from a descriptor the daemon opened (the worker's sandbox does not let it open
// the cache's path): a host library through its descriptor (SharedLibraryModule makes its own
// sealed copy), CUDA code read whole from it.
absl::StatusOr<std::unique_ptr<core::Module>> OpenDescriptor(
    const kprof::worker::v1::ModuleFile& file, int fd, base::Device device) {
  if (!core::IsCudaFormat(file.format())) return core::SharedLibraryModule::OpenDescriptor(fd);
  if (device.type != base::DeviceType::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.format(), " module for ", base::DeviceSpec(device)));
  }
  KPROF_ASSIGN_OR_RETURN(std::string bytes, base::ReadDescriptor(fd));
  return core::LoadCudaModule(std::move(bytes), file.format(), device.id);
}

}  // namespace

absl::StatusOr<const core::Module*> WorkerJobs::ResolveModule(const std::string& id,
                                                              const WorkerRequest& request,
                                                              absl::Span<const int> module_fds) {
  if (id == core::kBuiltinModuleName) return &core::BuiltinModule();
  if (const auto it = modules_.find(id); it != modules_.end()) {
    it->second.last_used = jobs_;
    return it->second.module.get();
  }
  for (int i = 0; i < request.modules_size(); ++i) {
    const kprof::worker::v1::ModuleFile& file = request.modules(i);
    if (file.id() != id) continue;
    std::unique_ptr<core::Module> module;
    if (static_cast<size_t>(i) < module_fds.size()) {
      KPROF_ASSIGN_OR_RETURN(module,
                             OpenDescriptor(file, module_fds[static_cast<size_t>(i)], device_));
    } else {
      KPROF_ASSIGN_OR_RETURN(module, Open(file, device_));
    }
    const core::Module* raw = module.get();
    modules_[id] = {std::move(module), jobs_};
    return raw;
  }
  return absl::NotFoundError(absl::StrCat("module '", id, "' was not sent to the worker"));
}

void WorkerJobs::CloseIdleModules(const WorkerRequest& request) {
  while (modules_.size() > max_open_modules_) {
    auto oldest = modules_.end();
    for (auto it = modules_.begin(); it != modules_.end(); ++it) {
      const bool named = std::any_of(request.modules().begin(), request.modules().end(),
                                     [&](const auto& file) { return file.id() == it->first; });
      if (!named && (oldest == modules_.end() || it->second.last_used < oldest->second.last_used)) {
        oldest = it;
      }
    }
    if (oldest == modules_.end()) return;  // all in use by this job
    closed_.push_back(oldest->first);
    modules_.erase(oldest);
  }
}

void WorkerJobs::AddCheckedHooks(core::Job& job, WorkerResponse* response) {
  // The time both take is the check's (ArgumentData.seconds).
  job.before_checked = [this, response](const core::Arguments& args) -> absl::Status {
    const absl::Time start = absl::Now();
    KPROF_RETURN_IF_ERROR(arguments_.Remember(args));
    kprof::worker::v1::ArgumentData* data = response->mutable_arguments();
    data->set_seconds(data->seconds() + absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  };
  job.checked = [this, response](const core::Arguments& args) -> absl::Status {
    const absl::Time start = absl::Now();
    KPROF_RETURN_IF_ERROR(arguments_.Append(args, response->mutable_arguments()));
    kprof::worker::v1::ArgumentData* data = response->mutable_arguments();
    data->set_seconds(data->seconds() + absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  };
}

absl::Status WorkerJobs::SetThroughput(const WorkerRequest& request, const core::Job& job,
                                       double median, bool strict, WorkerResponse* response) const {
  kprof::v1::TimeEvaluateResponse* out = response->mutable_time_evaluate();
  std::vector<core::ArgSpec> specs;
  for (const std::string& text : job.arg_specs) {
    KPROF_ASSIGN_OR_RETURN(core::ArgSpec spec, core::ParseArgSpec(text));
    specs.push_back(std::move(spec));
  }
  *out->mutable_throughput() =
      ThroughputOf(specs, request.time_evaluate().counts(), median,
                   PeaksOf(request.memory_bandwidth(), request.cache_bandwidth(), device_));
  if (!strict) return absl::OkStatus();
  // A finding, as the times' is: a wrong answer is the plainer one, and the daemon judges the
  // answers first.
  if (const absl::Status possible = CheckPossible(out->throughput(), device_); !possible.ok()) {
    kprof::worker::v1::ArgumentData* data = response->mutable_arguments();
    data->set_finding(data->finding().empty()
                          ? std::string(possible.message())
                          : absl::StrCat(data->finding(), "; ", possible.message()));
  }
  return absl::OkStatus();
}

core::StrictOptions WorkerJobs::StrictHooks(WorkerResponse* response) {
  core::StrictOptions strict;
  // Every thread, named as the driver names its own or not: those that were there before a
  // checked call are no finding, and a name is anyone's to choose ("cuda-..." hides nothing here,
  // unlike at a job's end, where the driver's lazily started threads are no job's leftovers).
  strict.threads = [] { return ThreadIds(/*skip_cuda=*/false); };
  strict.send = [this, response](const core::Arguments& args,
                                 const core::CheckedRepeat& checked) -> absl::Status {
    const absl::Time start = absl::Now();
    kprof::worker::v1::ArgumentData* data = response->mutable_arguments();
    if (data->checked_size() == 0) {
      for (size_t k = 0; k < checked.written.size(); ++k) {
        if (checked.written[k]) data->add_written(static_cast<uint32_t>(k));
      }
    }
    kprof::worker::v1::CheckedRepeat* sent = data->add_checked();
    sent->set_repeat(checked.repeat);
    sent->set_repeats(checked.repeats);
    sent->set_seed(checked.seed);
    sent->set_fresh(checked.fresh);
    arguments_.LeaveOut(checked.unchanged);
    KPROF_RETURN_IF_ERROR(arguments_.Append(args, data));
    data->set_seconds(data->seconds() + absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  };
  strict.finding = [response](const std::string& finding) {
    response->mutable_arguments()->set_finding(finding);
  };
  return strict;
}

absl::Status WorkerJobs::RunReference(const WorkerRequest& request,
                                      absl::Span<const int> module_fds, WorkerResponse* response) {
  const kprof::worker::v1::ReferenceJob& r = request.reference();
  KPROF_RETURN_IF_ERROR(CheckDevice(r.device(), device_));
  core::Job job;
  job.function = r.call().function();
  job.module = &core::BuiltinModule();
  if (!job.function.empty()) {
    KPROF_ASSIGN_OR_RETURN(job.module, ResolveModule(r.call().module_id(), request, module_fds));
  }
  job.device = device_;
  job.arg_specs.assign(r.call().args().begin(), r.call().args().end());
  job.seed = r.seed();
  job.poisoned.assign(r.poisoned().begin(), r.poisoned().end());
  if (request.max_argument_bytes() > 0) job.limits.max_total_bytes = request.max_argument_bytes();
  if (r.call().has_launch()) {
    KPROF_ASSIGN_OR_RETURN(job.launch, LaunchFromProto(r.call().launch()));
  }
  std::vector<std::string> before;
  core::LocalRunner runner;
  return runner.RunOnce(
      job,
      [&before](const core::Arguments& args) -> absl::Status {
        KPROF_ASSIGN_OR_RETURN(before, CopyArguments(args));
        return absl::OkStatus();
      },
      [&](const core::Arguments& args) -> absl::Status {
        return arguments_.Append(args, response->mutable_arguments(), &before);
      });
}

absl::Status WorkerJobs::RunJob(const WorkerRequest& request, absl::Span<const int> module_fds,
                                WorkerResponse* response) {
  ++jobs_;
  // Before resolving: a module this job resolves stays open until the job ends.
  CloseIdleModules(request);
  core::LocalRunner runner;
  core::ArgumentLimits limits;
  if (request.max_argument_bytes() > 0) limits.max_total_bytes = request.max_argument_bytes();

  // `checked`: whether the call sends its arguments out (check_outputs, checked_calls).
  const auto make_job = [&](const kprof::v1::FunctionCall& call, uint64_t seed,
                            bool checked) -> absl::StatusOr<core::Job> {
    core::Job job;
    KPROF_ASSIGN_OR_RETURN(job.module, ResolveModule(call.module_id(), request, module_fds));
    job.function = call.function();
    job.device = device_;
    job.arg_specs.assign(call.args().begin(), call.args().end());
    job.seed = seed;
    job.limits = limits;
    if (call.has_launch()) {
      KPROF_ASSIGN_OR_RETURN(job.launch, LaunchFromProto(call.launch()));
    }
    if (checked) AddCheckedHooks(job, response);
    return job;
  };

  switch (request.job_case()) {
    case WorkerRequest::kTimeEvaluate: {
      const kprof::v1::TimeEvaluateRequest& r = request.time_evaluate();
      KPROF_RETURN_IF_ERROR(CheckDevice(r.device(), device_));
      const bool strict = request.check_outputs() && request.strict();
      KPROF_ASSIGN_OR_RETURN(core::Job job,
                             make_job(r.call(), r.seed(), request.check_outputs() && !strict));
      KPROF_ASSIGN_OR_RETURN(core::TimeJob time,
                             TimeJobFromRequest(r, device_, limits.max_total_bytes, strict));
      time.host_environment_apart = true;  // the front attaches the host's part
      if (strict) time.strict = StrictHooks(response);
      KPROF_ASSIGN_OR_RETURN(core::TimeResult result, runner.Time(job, time));
      ToProto(result, time, device_, response->mutable_time_evaluate());
      KPROF_RETURN_IF_ERROR(SetThroughput(request, job, result.summary.median, strict, response));
      if (result.host_environment != nullptr && result.host_generation != sent_host_generation_) {
        wire::ToProto(*result.host_environment, response->mutable_host_environment());
        sent_host_generation_ = result.host_generation;
      }
      return absl::OkStatus();
    }
    case WorkerRequest::kProfileFunction: {
      const kprof::v1::ProfileFunctionRequest& r = request.profile_function();
      KPROF_RETURN_IF_ERROR(CheckDevice(r.device(), device_));
      KPROF_ASSIGN_OR_RETURN(core::Job job, make_job(r.call(), r.seed(), request.check_outputs()));
      core::ProfileJob profile;
      profile.warmup = r.warmup();
      if (r.has_number()) profile.number = r.number();
      profile.collectors = CollectorTexts(r.collectors());
      KPROF_ASSIGN_OR_RETURN(profile.placement, ProfilePlacement(r));
      KPROF_ASSIGN_OR_RETURN(report::Report report, runner.Profile(job, profile));
      *response->mutable_profile_function()->mutable_report() = wire::ToProto(report);
      return absl::OkStatus();
    }
    case WorkerRequest::kProfile: {
      const kprof::v1::ProfileRequest& r = request.profile();
      KPROF_RETURN_IF_ERROR(CheckDevice(r.device(), device_));
      core::SequenceJob sequence;
      for (int i = 0; i < r.calls_size(); ++i) {
        const bool checked =
            std::find(request.checked_calls().begin(), request.checked_calls().end(),
                      static_cast<uint32_t>(i)) != request.checked_calls().end();
        KPROF_ASSIGN_OR_RETURN(core::Job job, make_job(r.calls(i), r.seed(), checked));
        sequence.calls.push_back(std::move(job));
      }
      sequence.device = device_;
      sequence.seed = r.seed();
      sequence.limits = limits;
      sequence.warmup = r.warmup();
      if (r.has_repeat()) sequence.repeat = r.repeat();
      sequence.collectors = CollectorTexts(r.collectors());
      KPROF_ASSIGN_OR_RETURN(sequence.placement, ProfilePlacement(r));
      KPROF_ASSIGN_OR_RETURN(report::Report report, runner.ProfileSequence(sequence));
      *response->mutable_profile()->mutable_report() = wire::ToProto(report);
      return absl::OkStatus();
    }
    case WorkerRequest::kReference:
      return RunReference(request, module_fds, response);
    case WorkerRequest::kDescribe:
      *response->mutable_host() = request.describe().cuda() ? DescribeCuda() : DescribeCpu();
      if (!request.describe().cuda()) {
        response->mutable_host()->set_isolation(isolation_);
        response->mutable_host()->set_isolated(isolated_);
      }
      return absl::OkStatus();
    case WorkerRequest::kWithdraw:  // the worker's loop handles these
    case WorkerRequest::kPark:
    case WorkerRequest::kYield:
    case WorkerRequest::JOB_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a worker request without a job");
}

std::string WorkerJobs::Describe(const WorkerRequest& request) {
  switch (request.job_case()) {
    case WorkerRequest::kTimeEvaluate:
      return absl::StrCat("function '", request.time_evaluate().call().function(), "'");
    case WorkerRequest::kProfileFunction:
      return absl::StrCat("function '", request.profile_function().call().function(), "'");
    case WorkerRequest::kReference:
      return absl::StrCat("reference '", request.reference().call().function(), "'");
    default:
      return "the profiled sequence";
  }
}

void WorkerJobs::ReportClosed(const WorkerRequest& request, WorkerResponse* response) {
  for (std::string& id : closed_) {
    if (modules_.count(id) == 0) response->add_closed_modules(std::move(id));
  }
  closed_.clear();
  for (const kprof::worker::v1::ModuleFile& file : request.modules()) {
    if (file.id() != core::kBuiltinModuleName && modules_.count(file.id()) == 0 &&
        std::find(response->closed_modules().begin(), response->closed_modules().end(),
                  file.id()) == response->closed_modules().end()) {
      response->add_closed_modules(file.id());
    }
  }
}

WorkerResponse WorkerJobs::Run(const WorkerRequest& request, absl::Span<const int> module_fds) {
  WorkerResponse response;
  response.set_job_id(request.job_id());
  if (request.module_files_withheld() &&
      std::any_of(request.modules().begin(), request.modules().end(), [this](const auto& file) {
        return file.id() != core::kBuiltinModuleName && modules_.count(file.id()) == 0;
      })) {
    // Closed before the front heard of it: the job comes again with its modules' files.
    response.set_withdrawn(true);
    ReportClosed(request, &response);
    return response;
  }
  absl::Status status = RunJob(request, module_fds, &response);
  if (status.ok()) {
    absl::StatusOr<int> sealed = arguments_.Seal();
    if (sealed.ok()) argument_fd_ = *sealed;
    status = sealed.status();
  }
  arguments_.Discard();
  if (!status.ok()) {
    response.Clear();
    response.set_job_id(request.job_id());
    response.set_code(wire::ToWireCode(status.code()));
    response.set_message(std::string(status.message()));
    response.set_check_failed(core::StrictCheckFailed(status));
  }
  ReportClosed(request, &response);
  return response;
}

}  // namespace kprof::server
