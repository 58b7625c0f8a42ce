// The steps kprofd takes from its flags to serving, each a function of its own so that Serve
// (kprofd_main.cc) reads as the list of them: the workers' options and what they own, the
// device executors with the host their first worker describes, the service's limits, the
// leases' options, the metrics endpoint and the gRPC server.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "server/front/daemon/daemon_metrics.h"
#include "server/front/daemon/daemon_options.h"
#include "server/front/modules/module_registry.h"
#include "server/front/scheduling/device_executor.h"
#include "server/front/scheduling/lease_manager.h"
#include "server/front/service/profiler_service.h"
#include "server/front/workers/scratch_root.h"
#include "server/front/workers/worker_cgroup.h"
#include "server/front/workers/worker_output.h"
#include "server/front/workers/worker_process.h"

namespace kprof::server {

// What every worker is started with, and what the options point into (owned here, so it lives
// as long as the workers do).
struct WorkerSetup {
  WorkerOptions options;
  std::string state_dir;  // a lease's clock journal: the daemon's alone, as the cache is
  std::unique_ptr<ScratchRoot> scratch;
  std::unique_ptr<WorkerOutput> output;
  std::unique_ptr<WorkerCgroups> cgroups;  // null where no memory cgroup could be made
  std::string memory_bound;                // how a worker's memory is bounded, in words
};
absl::StatusOr<WorkerSetup> SetUpWorkers(const DaemonFlags& flags, const std::string& cache_dir);

using Executors = std::map<base::Device, std::unique_ptr<DeviceExecutor>>;

// The CPU's executor, the host as a worker describes it (the daemon itself never loads PAPI,
// the CUDA driver or NVML), and an executor for each GPU the driver reports. FAILED_PRECONDITION
// under --require-isolation when workers would run without part of their sandbox.
absl::StatusOr<DescribedHost> StartExecutors(const DaemonFlags& flags, const WorkerSetup& workers,
                                             Executors* executors);

ServiceLimits LimitsFrom(const DaemonFlags& flags, absl::Duration busy_poll);

// Who may lease and where a lease's clocks are journalled; what a lease of an earlier run left
// changed (the daemon was killed) is put back on the way, and said in the log.
LeaseOptions LeasesFrom(const DaemonFlags& flags, const WorkerOptions& worker,
                        const std::string& state_dir);

// The /metrics endpoint at `where` (none when empty), reading the executors' queues, the cache
// and the service's streams.
absl::StatusOr<std::unique_ptr<DaemonMetrics>> StartMetrics(const std::string& where,
                                                            const Executors& executors,
                                                            ModuleRegistry* modules,
                                                            ProfilerService* service,
                                                            const std::vector<int>& cpus);

// The gRPC server on --listen with the service, health and reflection; `port` the one bound.
// UNAVAILABLE naming the address when it cannot listen.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const DaemonFlags& flags, std::shared_ptr<grpc::ServerCredentials> credentials,
    ProfilerService* service, int* port);

}  // namespace kprof::server
