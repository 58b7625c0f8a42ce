// What the daemon says of its host: the description a worker gave before serving (SetHost),
// and GetInfo's answer from it, the executors and the limits.
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/collectors/rusage_collector.h"
#include "core/host/placement.h"
#include "core/host/platform.h"
#include "kprof/config.h"
#include "server/front/scheduling/lease_manager.h"
#include "server/front/service/profiler_service.h"

namespace kprof::server {
namespace {

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

}  // namespace

void ProfilerService::SetHost(DescribedHost host) {
  for (kprof::v1::DeviceInfo& info : *host.host.mutable_devices()) {
    devices_[info.device()] = std::move(info);
  }
  if (!host.cpu.ok()) {
    // What the daemon knows without the worker; the collectors it could not ask about are
    // listed with the reason.
    const std::string why =
        absl::StrCat("kprofd could not describe this host: ", host.cpu.message());
    kprof::v1::DeviceInfo& cpu = devices_["cpu:0"];
    cpu.set_device("cpu:0");
    cpu.set_type("cpu");
    cpu.set_name("cpu");
    cpu.set_cpu_model("unknown");
    cpu.set_cpus(static_cast<int32_t>(core::AllowedCpus().size()));
    kprof::v1::CollectorInfo* rusage = cpu.add_collectors();
    rusage->set_name("rusage");
    rusage->set_available(true);
    for (std::string_view m : core::kRusageMetrics) {
      rusage->add_metrics(std::string(m));
    }
    for (const char* name : {"perf", "papi"}) {
      kprof::v1::CollectorInfo* collector = cpu.add_collectors();
      collector->set_name(name);
      collector->set_reason(why);
    }
  }
  if (host.cuda.ok()) {
    cuda_line_ = host.host.cuda();
    cuda_unavailable_ = host.host.cuda_unavailable();
  } else {
    cuda_unavailable_ = std::string(host.cuda.message());
  }
  if (!cuda_unavailable_.empty()) cuda_line_ = "no CUDA devices: " + cuda_unavailable_;
  isolation_ = host.host.isolation();
}

grpc::ServerUnaryReactor* ProfilerService::GetInfo(grpc::CallbackServerContext* context,
                                                   const kprof::v1::GetInfoRequest*,
                                                   kprof::v1::GetInfoResponse* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  response->set_version(KPROF_VERSION);
  response->set_build(KPROF_BUILD);
  response->set_metrics(metrics_address_);
  response->set_host(HostName());
  // Read once: neither the release files nor the kernel change while the daemon runs.
  static const std::string* const os = new std::string(core::DescribeOs());
  static const std::string* const jetson = new std::string(core::DescribeJetson());
  response->set_os(*os);
  response->set_jetson(*jetson);
  for (const auto& [device, executor] : *executors_) {
    kprof::v1::DeviceInfo* info = response->add_devices();
    const std::string spec = base::DeviceSpec(device);
    if (const auto described = devices_.find(spec); described != devices_.end()) {
      *info = described->second;
    } else {
      info->set_device(spec);
      info->set_type(std::string(base::DeviceTypeName(device.type)));
      info->set_id(device.id);
    }
    const DeviceExecutor::Stats stats = executor->stats();
    info->set_queue_length(stats.queue_length);
    info->set_busy(stats.busy);
    info->set_jobs_completed(stats.completed);
    info->set_jobs_failed(stats.failed);
    info->set_workers(stats.workers);
    info->set_workers_started(stats.workers_started);
    info->set_jobs_quick(stats.quick_jobs);
    info->set_running_client(stats.running_client);
    info->set_running_seconds(absl::ToDoubleSeconds(stats.running_for));
    if (leases_ != nullptr) {
      if (std::optional<kprof::v1::LeaseInfo> lease = leases_->Held(device)) {
        // Its id only to a call made under it: on a loopback daemon every caller is "local",
        // and the id is what tells the holder's calls from the others'.
        const auto carried = context->client_metadata().find("kprof-lease");
        const bool under_it =
            carried != context->client_metadata().end() && lease->holder() == client &&
            std::string_view(carried->second.data(), carried->second.size()) == lease->lease_id();
        if (!under_it) lease->clear_lease_id();
        *info->mutable_lease() = *std::move(lease);
      }
    }
    for (const auto& [who, jobs] : stats.queued) {
      kprof::v1::ClientQueue* q = info->add_queued();
      q->set_client(who);
      q->set_jobs(jobs);
    }
  }
  response->set_cuda(cuda_line_);
  response->set_isolation(isolation_);
  kprof::v1::Limits* limits = response->mutable_limits();
  limits->set_max_module_bytes(registry_->options().max_module_bytes);
  limits->set_max_cache_bytes(registry_->options().max_cache_bytes);
  limits->set_max_argument_bytes(limits_.max_argument_bytes);
  limits->set_max_queue(limits_.max_queue);
  limits->set_job_timeout_seconds(absl::ToDoubleSeconds(limits_.job_timeout));
  limits->set_busy_poll_us(absl::ToInt64Microseconds(limits_.busy_poll));
  kprof::v1::ListModulesResponse first;
  (void)ListPage(client, kprof::v1::ListModulesRequest(), &first);
  response->mutable_modules()->Swap(first.mutable_modules());
  response->set_more_modules(!first.next_page_token().empty());
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kprof::server
