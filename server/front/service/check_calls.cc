// The checked measurement's part of the service: the plan, the reference's run in a worker of
// its own (never the candidate's), and the verdict joined to the candidate's result.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/modules/builtin_module.h"
#include "proto/status.h"
#include "server/front/service/profiler_service.h"
#include "server/ipc/wire.h"

namespace kprof::server {
namespace {

// `status` of reference `call`, named as the reference's ("reference 3fa9c1d2e4b5:f: ..."),
// its details kept: a client that holds the reference's bytes uploads it again.
absl::Status ReferenceError(const absl::Status& status, const kprof::v1::FunctionCall& call) {
  absl::Status named(status.code(), absl::StrCat("reference ", call.module_id().substr(0, 12), ":",
                                                 call.function(), ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view type, const absl::Cord& payload) { named.SetPayload(type, payload); });
  return named;
}

}  // namespace

std::vector<ProfilerService::CheckedCall> ProfilerService::CheckedCallsOf(
    const kprof::worker::v1::WorkerRequest& r) {
  if (r.has_time_evaluate() && r.time_evaluate().has_check()) {
    return {{&r.time_evaluate().check(), &r.time_evaluate().call(), r.time_evaluate().seed(), -1}};
  }
  if (r.has_profile_function() && r.profile_function().has_check()) {
    return {{&r.profile_function().check(), &r.profile_function().call(),
             r.profile_function().seed(), -1}};
  }
  std::vector<CheckedCall> calls;
  if (!r.has_profile()) return calls;
  for (int i = 0; i < r.profile().checks_size() && i < r.profile().calls_size(); ++i) {
    // An empty check leaves its call unchecked; each call has its own data (seed + i).
    if (r.profile().checks(i).ByteSizeLong() == 0) continue;
    calls.push_back({&r.profile().checks(i), &r.profile().calls(i),
                     r.profile().seed() + static_cast<uint64_t>(i), i});
  }
  return calls;
}

absl::Status ProfilerService::RequiredChecks(const kprof::worker::v1::WorkerRequest& request,
                                             const std::vector<CheckedCall>& calls) const {
  const kprof::v1::AnswerCheck::Level required = limits_.require_checks;
  if (required == kprof::v1::AnswerCheck::LEVEL_UNSPECIFIED) return absl::OkStatus();
  const bool strict = required == kprof::v1::AnswerCheck::STRICT;
  const auto refused = [strict](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this daemon measures only calls checked ", strict ? "strictly" : "against a reference",
        " (--require-checks ", strict ? "strict" : "basic", "): ", why));
  };
  const int count = request.has_profile() ? request.profile().calls_size() : 1;
  if (static_cast<int>(calls.size()) < count) {
    return refused(strict ? "give the job a reference function with checks strict (--reference "
                            "MODULE:FUNCTION --checks strict)"
                          : "give every call a reference function or expected data");
  }
  if (!strict) return absl::OkStatus();
  if (!request.has_time_evaluate()) {
    return refused(
        "strict checks are made among a time evaluation's repeats, and a profile "
        "cannot have them");
  }
  if (calls.front().check->level() != kprof::v1::AnswerCheck::STRICT) {
    return refused("the job's check is basic: ask for checks strict");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<PendingCheck>> ProfilerService::StartCheck(const std::string& client,
                                                                          PreparedJob& job,
                                                                          absl::Time deadline) {
  kprof::worker::v1::WorkerRequest& request = job.request;
  if (request.has_profile() && request.profile().checks_size() > request.profile().calls_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        request.profile().checks_size(), " checks for ", request.profile().calls_size(),
        " calls: checks[i] checks calls[i] (an empty one leaves its call unchecked)"));
  }
  const std::vector<CheckedCall> calls = CheckedCallsOf(request);
  KPROF_RETURN_IF_ERROR(RequiredChecks(request, calls));
  if (calls.empty()) return std::shared_ptr<PendingCheck>();
  // Every plan first: a bad check refuses the job before any reference runs.
  std::vector<PendingCheck::Part> parts;
  std::vector<kprof::worker::v1::WorkerRequest> references;
  for (const CheckedCall& checked : calls) {
    absl::StatusOr<CheckPlan> plan = CheckPlan::Make(*checked.check, *checked.call);
    if (!plan.ok() && checked.index >= 0) {
      return absl::Status(plan.status().code(),
                          absl::StrCat("checks[", checked.index, "]: ", plan.status().message()));
    }
    if (!plan.ok()) return plan.status();
    kprof::worker::v1::WorkerRequest& reference = references.emplace_back();
    kprof::worker::v1::ReferenceJob* run = reference.mutable_reference();
    *run->mutable_call() = plan->ReferenceRun(*checked.call);
    run->set_device(base::DeviceSpec(job.executor->device()));
    run->set_seed(checked.seed);
    if (const std::string& module = run->call().module_id();
        !run->call().function().empty() && module != core::kBuiltinModuleName) {
      // Outputs kept from an earlier run are the client's while it holds the reference's
      // module, as a new run would be.
      std::vector<StoredModule> held;
      const auto holds = registry_->Acquire(client, {module}, &held, /*open_files=*/false);
      if (!holds.ok()) return ReferenceError(holds.status(), run->call());
    }
    std::string what = checked.index < 0 ? job.what
                                         : absl::StrCat("call ", checked.index, " (function '",
                                                        checked.call->function(), "')");
    parts.push_back({*std::move(plan), std::move(what), checked.index});
  }
  if (parts.size() == 1 && parts.front().plan.strict()) {
    return StartStrictCheck(client, std::move(parts.front()),
                            std::move(*references.front().mutable_reference()), job, deadline);
  }
  for (const PendingCheck::Part& part : parts) {
    if (part.plan.strict()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checks[", part.call,
                       "]: strict checks are made among a time evaluation's repeats "
                       "(TimeEvaluate, a batch's jobs); a profile's calls take basic checks"));
    }
  }
  auto pending = std::make_shared<PendingCheck>(std::move(parts));
  // The candidate's worker gets none of it: expected data stay out of its reach.
  if (request.has_time_evaluate()) request.mutable_time_evaluate()->clear_check();
  if (request.has_profile_function()) request.mutable_profile_function()->clear_check();
  request.set_check_outputs(!request.has_profile());
  for (const CheckedCall& checked : calls) {
    if (checked.index >= 0) request.add_checked_calls(static_cast<uint32_t>(checked.index));
  }
  if (request.has_profile()) request.mutable_profile()->clear_checks();
  for (size_t p = 0; p < references.size(); ++p) {
    const std::string key =
        absl::StrCat(client, std::string(1, '\0'), references[p].reference().SerializeAsString());
    if (!references_.Await(key, [pending, p](const ReferenceCache::Result& result, bool reused) {
          pending->SetReference(p, result, reused);
        })) {
      continue;
    }
    if (absl::Status started = RunReference(client, key, std::move(references[p]), deadline);
        !started.ok()) {
      references_.Finish(key, started);
      return started;  // refused before the candidate runs, with the reference's own code
    }
  }
  return pending;
}

absl::StatusOr<std::shared_ptr<PendingCheck>> ProfilerService::StartStrictCheck(
    const std::string& client, PendingCheck::Part part, kprof::worker::v1::ReferenceJob reference,
    PreparedJob& job, absl::Time deadline) {
  kprof::worker::v1::WorkerRequest& request = job.request;
  if (!request.has_time_evaluate()) {
    return absl::InvalidArgumentError(
        "strict checks are made among a time evaluation's repeats (TimeEvaluate, a batch's "
        "jobs); a profile takes basic checks");
  }
  request.mutable_time_evaluate()->clear_check();
  request.set_check_outputs(true);
  request.set_strict(true);
  // Each checked call's reference runs once its seed is known (the candidate's answer names
  // it), on those data: never kept, as no other job draws the seed.
  auto start = [this, client, reference = std::move(reference), deadline](
                   uint64_t seed, std::vector<uint32_t> poisoned, ReferenceCache::Ready ready) {
    kprof::worker::v1::WorkerRequest run;
    *run.mutable_reference() = reference;
    run.mutable_reference()->set_seed(seed);
    for (const uint32_t k : poisoned) run.mutable_reference()->add_poisoned(k);
    const std::string key =
        absl::StrCat(client, std::string(1, '\0'), run.reference().SerializeAsString());
    if (!references_.Await(key, std::move(ready))) return;
    if (absl::Status started = RunReference(client, key, std::move(run), deadline, false);
        !started.ok()) {
      references_.Finish(key, started);
    }
  };
  return std::make_shared<PendingCheck>(std::move(part), std::move(start));
}

absl::Status ProfilerService::RunReference(const std::string& client, const std::string& key,
                                           kprof::worker::v1::WorkerRequest request,
                                           absl::Time deadline, bool keep) {
  const kprof::v1::FunctionCall call = request.reference().call();
  const std::string device = request.reference().device();
  PreparedJob job;
  if (call.function().empty()) {  // the initial data only: no module to hold
    KPROF_ASSIGN_OR_RETURN(job.executor, FindExecutor(device));
    request.set_max_argument_bytes(limits_.max_argument_bytes);
    request.set_job_id(next_job_id_++);
    job.request = std::move(request);
  } else {
    absl::StatusOr<PreparedJob> prepared = PrepareJob(client, device, {&call}, std::move(request));
    if (!prepared.ok()) return ReferenceError(prepared.status(), call);
    job = *std::move(prepared);
  }
  const std::string what = absl::StrCat("reference '", call.function(), "'");
  return job.executor->Submit(
      std::move(job.request), DeviceExecutor::ReferenceKey(client), deadline,
      [this, key, what, keep](absl::StatusOr<kprof::worker::v1::WorkerAnswer> result, JobTiming) {
        absl::Status status = ResultStatus(result, what);
        if (status.ok() && !result->has_arguments()) {
          status = absl::InternalError("the reference's run sent no arguments back");
        }
        if (status.ok() && std::count(result->arguments().unsent().begin(),
                                      result->arguments().unsent().end(), true) > 0) {
          status = absl::InternalError("the reference's run left arguments out of its file");
        }
        if (!status.ok()) {
          references_.Finish(key, status);
          return;
        }
        references_.Finish(
            key, std::make_shared<const ReferenceData>(ReferenceData::FromAnswer(*result)), keep);
      },
      // `started` keeps it off the quick path: a batch stream asks while it holds its lock.
      std::move(job.pin), [] {}, /*beyond_bound=*/true, std::move(job.module_fds));
}

void ProfilerService::AppendVerdicts(const std::vector<kprof::v1::CheckVerdict>& verdicts,
                                     kprof::worker::v1::WorkerAnswer* answer) {
  for (const kprof::v1::CheckVerdict& verdict : verdicts) {
    if (answer->has_time_evaluate()) {
      AppendField(kprof::v1::TimeEvaluateResponse::kCheckFieldNumber, verdict,
                  answer->mutable_time_evaluate());
    } else if (answer->has_profile_function()) {
      AppendField(kprof::v1::ProfileFunctionResponse::kCheckFieldNumber, verdict,
                  answer->mutable_profile_function());
    } else if (answer->has_profile()) {
      AppendField(kprof::v1::ProfileResponse::kChecksFieldNumber, verdict,
                  answer->mutable_profile());
    }
  }
}

}  // namespace kprof::server
