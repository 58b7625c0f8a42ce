#include "server/front/daemon/daemon_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "core/host/placement.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "server/front/service/interceptors.h"

namespace kprof::server {

using base::Log;
using base::LogSeverity;

namespace {

// Adds `path`, resolved, to what no worker may read.
void KeepFromWorkers(const std::string& path, WorkerOptions* worker) {
  if (char resolved[PATH_MAX]; realpath(path.c_str(), resolved) != nullptr) {
    worker->unreadable.emplace_back(resolved);
  }
}

}  // namespace

absl::StatusOr<WorkerSetup> SetUpWorkers(const DaemonFlags& flags, const std::string& cache_dir) {
  WorkerSetup setup;
  WorkerOptions& worker = setup.options;
  worker.executable = flags.worker.empty() ? DefaultWorker() : flags.worker;
  if (access(worker.executable.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("the worker executable '", worker.executable,
                                                      "' is missing or not "
                                                      "executable (--worker sets it)"));
  }
  worker.max_frame_bytes = static_cast<size_t>(64) << 20;
  KPROF_ASSIGN_OR_RETURN(worker.placement, WorkerPlacement(flags));
  // Client code in the workers reads neither the daemon's secrets nor the cache (a job's modules
  // reach its worker as descriptors).
  for (const std::string& secret : {flags.token_file, flags.tls_key}) {
    if (!secret.empty()) KeepFromWorkers(secret, &worker);
  }
  KeepFromWorkers(cache_dir, &worker);
  // The state directory (a lease's clock journal): the daemon's alone, as the cache is.
  setup.state_dir = StateDir(flags, cache_dir);
  KPROF_RETURN_IF_ERROR(MakeDirectories(setup.state_dir, "--state-dir"));
  if (mkdir(setup.state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create the state directory ",
                                                      setup.state_dir, ": ", std::strerror(errno),
                                                      " (--state-dir sets it)"));
  }
  KeepFromWorkers(setup.state_dir, &worker);
  // Each worker writes only in a scratch directory of its own, beneath this one, which no
  // worker may read.
  KPROF_ASSIGN_OR_RETURN(worker.user, WorkerUserFor(flags));
  KPROF_ASSIGN_OR_RETURN(setup.scratch, ScratchRoot::Make(flags.scratch_dir, worker.user));
  worker.scratch_root = setup.scratch->path();
  worker.unreadable.push_back(setup.scratch->path());
  worker.max_open_modules = flags.worker_open_modules;
  // What the workers print goes to their jobs' clients, read off the CPUs they measure on.
  KPROF_ASSIGN_OR_RETURN(setup.output,
                         WorkerOutput::Start(flags.log_worker_output, worker.placement.cpus));
  worker.output = setup.output.get();
  // A busy poll needs a second CPU to be worth anything (on one, the poller only delays whoever
  // it waits for), and a SCHED_FIFO poller would keep ordinary threads off its CPU.
  if (core::AllowedCpus().size() >= 2 &&
      worker.placement.priority.policy != core::Priority::Policy::kFifo) {
    worker.busy_poll = flags.busy_poll;
  }
  worker.max_data_bytes =
      flags.worker_memory_limit > 0
          ? flags.worker_memory_limit
          : static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 4 * 3;
  // A memory cgroup per worker: the limit then holds for what RLIMIT_DATA does not count
  // (MAP_SHARED memory, files in the tmpfs scratch).
  if (absl::StatusOr<std::unique_ptr<WorkerCgroups>> made =
          WorkerCgroups::Make(worker.max_data_bytes);
      made.ok()) {
    setup.cgroups = *std::move(made);
    worker.cgroups = setup.cgroups.get();
    setup.memory_bound = setup.cgroups->Describe();
  } else {
    setup.memory_bound = absl::StrCat("no memory cgroup (", made.status().message(),
                                      "): RLIMIT_DATA alone, which shared mappings escape");
  }
  worker.device = {base::DeviceType::kCpu, 0};
  return setup;
}

absl::StatusOr<DescribedHost> StartExecutors(const DaemonFlags& flags, const WorkerSetup& workers,
                                             Executors* executors) {
  const WorkerOptions& worker = workers.options;
  const WorkerPool pool{static_cast<int>(flags.workers_per_device), flags.worker_idle_timeout};
  executors->emplace(worker.device,
                     std::make_unique<DeviceExecutor>(worker, static_cast<int>(flags.max_queue),
                                                      flags.job_timeout, pool));
  DescribedHost described = DescribeHost(worker, flags.describe_timeout);
  if (!described.cpu.ok()) {
    Log(LogSeverity::kWarning,
        absl::StrCat("the host's collectors are unknown: ", described.cpu.message()));
  }
  if (!described.cuda.ok()) Log(LogSeverity::kWarning, std::string(described.cuda.message()));
  if (described.cpu.ok()) {
    described.host.set_isolation("one worker per client; " + described.host.isolation() + "; " +
                                 workers.memory_bound);
  } else {
    described.host.set_isolation("unknown: no worker described the host");
  }
  Log(described.host.isolated() ? LogSeverity::kInfo : LogSeverity::kWarning,
      "worker isolation: " + described.host.isolation());
  if (flags.require_isolation && !described.host.isolated()) {
    return absl::FailedPreconditionError(
        "--require-isolation: workers would run without part of their sandbox (worker "
        "isolation: " +
        described.host.isolation() + ")");
  }
  // Each GPU gets its own queue and worker, which holds the device's primary context.
  for (const kprof::v1::DeviceInfo& info : described.host.devices()) {
    if (info.type() != base::DeviceTypeName(base::DeviceType::kCuda)) continue;
    WorkerOptions gpu_worker = worker;
    gpu_worker.device = {base::DeviceType::kCuda, info.id()};
    executors->emplace(gpu_worker.device,
                       std::make_unique<DeviceExecutor>(
                           gpu_worker, static_cast<int>(flags.max_queue), flags.job_timeout, pool));
  }
  return described;
}

ServiceLimits LimitsFrom(const DaemonFlags& flags, absl::Duration busy_poll) {
  ServiceLimits limits;
  limits.max_argument_bytes = flags.max_argument_bytes;
  limits.max_queue = static_cast<int>(flags.max_queue);
  limits.job_timeout = flags.job_timeout;
  limits.upload_idle_timeout = flags.upload_idle_timeout;
  limits.busy_poll = busy_poll;
  if (flags.require_checks == "basic") limits.require_checks = kprof::v1::AnswerCheck::BASIC;
  if (flags.require_checks == "strict") limits.require_checks = kprof::v1::AnswerCheck::STRICT;
  return limits;
}

LeaseOptions LeasesFrom(const DaemonFlags& flags, const WorkerOptions& worker,
                        const std::string& state_dir) {
  LeaseOptions options;
  options.max_lease = flags.max_lease;
  options.helper = worker.executable;
  options.sysfs_root = flags.sysfs_root;
  options.cpus = worker.placement.cpus;
  options.floor_mhz = flags.lock_floor_mhz;
  options.state_dir = state_dir;
  options.budget = flags.lease_budget;
  if (flags.lease_clients == "*") {
    options.anyone = true;
  } else {
    for (absl::string_view label : absl::StrSplit(flags.lease_clients, ',', absl::SkipEmpty())) {
      options.clients.emplace(absl::StripAsciiWhitespace(label));
    }
  }
  if (absl::StatusOr<std::string> restored = LeaseManager::RestoreLeftovers(options);
      !restored.ok()) {
    Log(LogSeverity::kWarning,
        absl::StrCat("the clocks a lease left changed could not all be put back: ",
                     restored.status().message(), " (the journals in ", state_dir, ")"));
  } else if (!restored->empty()) {
    Log(LogSeverity::kInfo,
        absl::StrCat("put back the clocks a lease of an earlier run left changed: ", *restored));
  }
  return options;
}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> StartMetrics(const std::string& where,
                                                            const Executors& executors,
                                                            ModuleRegistry* modules,
                                                            ProfilerService* service,
                                                            const std::vector<int>& cpus) {
  if (where.empty()) return nullptr;
  // The levels a scrape reads: queues, cache, streams.
  KPROF_ASSIGN_OR_RETURN(
      std::unique_ptr<DaemonMetrics> metrics,
      DaemonMetrics::Serve(
          where,
          [&executors, modules, service] {
            DaemonLevels levels;
            for (const auto& [device, executor] : executors) {
              const DeviceExecutor::Stats stats = executor->stats();
              levels.devices.push_back(
                  {base::DeviceSpec(device), stats.queue_length, stats.busy, stats.workers});
            }
            const ModuleRegistry::Stats cache = modules->stats();
            levels.cache_bytes = cache.bytes;
            levels.cache_modules = cache.modules;
            levels.evictions = cache.evictions;
            levels.uploads = cache.uploads;
            levels.upload_bytes = cache.upload_bytes;
            levels.batch_streams = service->open_batch_streams();
            return levels;
          },
          cpus));
  for (const auto& [device, executor] : executors) executor->set_metrics(metrics.get());
  service->set_metrics_address(metrics->address());
  Log(LogSeverity::kInfo, absl::StrCat("metrics on http://", metrics->address(), "/metrics"));
  return metrics;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const DaemonFlags& flags, std::shared_ptr<grpc::ServerCredentials> credentials,
    ProfilerService* service, int* port) {
  // A port in use is said before gRPC tries it and logs its own tangle of words first.
  if (const std::string why = WhyCannotBind(flags.listen); why == kPortInUse) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", flags.listen, ": ", why, " (--listen)"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC binds with SO_REUSEPORT by default, and a second daemon on a port then shares its
  // clients with the first at random; one daemon per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping an open call that carries nothing for a while (a long job), to find a frozen
  // daemon (ClientOptions::keepalive, 20 s by default): taken every second, not answered with
  // a GOAWAY as gRPC's five-minute default for servers would.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddListeningPort(flags.listen, std::move(credentials), port);
  builder.RegisterService(service);
  builder.experimental().SetInterceptorCreators(ServerInterceptors(service->auth()));
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    const std::string why = WhyCannotBind(flags.listen);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", flags.listen,
                                               why.empty() ? "" : ": ", why, " (--listen)"));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus("kprof.v1.Profiler", true);
  return server;
}

}  // namespace kprof::server
