// kprofd: the profiling daemon. Serves kprof.v1.Profiler, the gRPC health service and server
// reflection; runs measurements in one kprofd-worker process per device.
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/command_line.h"
#include "base/log.h"
#include "base/loopback.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "kprof/config.h"
#include "server/front/daemon_metrics.h"
#include "server/front/daemon_options.h"
#include "server/front/interceptors.h"
#include "server/front/journal_log.h"
#include "server/front/lease_manager.h"
#include "server/front/profiler_service.h"
#include "server/front/service_manager.h"
#include "server/front/worker_output.h"

namespace kprof::server {
namespace {

// How long a drain lets running jobs finish before it kills them (the README's promise).
constexpr absl::Duration kDrainGrace = absl::Seconds(10);

// The signals that stop kprofd, each by a drain (jobs answered, clocks put back): TERM and INT,
// and HUP, QUIT, USR1 and USR2, whose default would end it with a lease's clocks still set.
sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&signals, s);
  return signals;
}

using base::Log;
using base::LogSeverity;

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << port << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write port file '", path, "'"));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write port file '", path, "'"));
  }
  return absl::OkStatus();
}

// --detach: forks; the parent waits for the child to serve (a line on `*ready_fd`) or to end,
// and exits with what happened; the child returns, a session leader without the terminal's
// input. Before any thread starts.
int Detach(int* ready_fd) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "kprofd: --detach: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "kprofd: --detach: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    close(ready[0]);
    setsid();
    // Nothing from the terminal; nothing to stdout, which a `$(kprofd --detach)` waits on to
    // close. The log stays on stderr, wherever it was sent.
    if (const int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      close(null);
    }
    *ready_fd = ready[1];
    return -1;
  }
  close(ready[1]);
  // The waiting parent ends on Ctrl-C as any command does (main blocked the signals for the
  // daemon's sigwait); the child, a session of its own, starts on.
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  std::string line;
  char buffer[256];
  for (ssize_t n; (n = read(ready[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    line.append(buffer, static_cast<size_t>(n));
  }
  close(ready[0]);
  if (!line.empty()) {
    std::printf("%d\n", child);
    return 0;
  }
  // Ended before serving: its error is on stderr already.
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
}

absl::Status Serve(const DaemonFlags& flags, const std::string& config, int ready_fd) {
  // Under systemd the journal, with fields; elsewhere plain lines.
  KPROF_ASSIGN_OR_RETURN(const LogFormat log_format, ChooseLogFormat(flags.log_format));
  if (log_format == LogFormat::kJournal) base::SetLogSink(JournalSink());
  Log(LogSeverity::kInfo, config.empty() ? std::string("no config file: the options alone")
                                         : absl::StrCat("options from ", config));
  KPROF_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                         ServerCredentials(flags));
  KPROF_ASSIGN_OR_RETURN(std::optional<TokenAuth> auth, Tokens(flags));
  if (auth.has_value()) {
    Log(LogSeverity::kInfo, absl::StrCat("calls need one of ", auth->size(), " bearer token(s)"));
  }
  KPROF_RETURN_IF_ERROR(CheckLimits(flags));

  RegistryOptions registry_options;
  registry_options.cache_dir = flags.cache_dir.empty() ? DefaultCacheDir() : flags.cache_dir;
  registry_options.max_module_bytes = flags.max_module_bytes;
  registry_options.max_cache_bytes = flags.max_cache_bytes;
  registry_options.max_modules = flags.max_modules;
  KPROF_RETURN_IF_ERROR(MakeDirectories(registry_options.cache_dir, "--cache-dir"));
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<ModuleRegistry> registry,
                         ModuleRegistry::Open(registry_options));

  WorkerOptions worker;
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
    if (secret.empty()) continue;
    char resolved[PATH_MAX];
    if (realpath(secret.c_str(), resolved) != nullptr) worker.unreadable.emplace_back(resolved);
  }
  if (char resolved[PATH_MAX]; realpath(registry_options.cache_dir.c_str(), resolved) != nullptr) {
    worker.unreadable.emplace_back(resolved);
  }
  // The state directory (a lease's clock journal): the daemon's alone, as the cache is.
  const std::string state_dir = StateDir(flags, registry_options.cache_dir);
  KPROF_RETURN_IF_ERROR(MakeDirectories(state_dir, "--state-dir"));
  if (mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create the state directory ",
                                                      state_dir, ": ", std::strerror(errno),
                                                      " (--state-dir sets it)"));
  }
  if (char resolved[PATH_MAX]; realpath(state_dir.c_str(), resolved) != nullptr) {
    worker.unreadable.emplace_back(resolved);
  }
  // Each worker writes only in a scratch directory of its own, beneath this one, which no
  // worker may read.
  KPROF_ASSIGN_OR_RETURN(worker.user, WorkerUserFor(flags));
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<ScratchRoot> scratch,
                         ScratchRoot::Make(flags.scratch_dir, worker.user));
  worker.scratch_root = scratch->path();
  worker.unreadable.push_back(scratch->path());
  worker.max_open_modules = flags.worker_open_modules;
  // What the workers print goes to their jobs' clients, read off the CPUs they measure on.
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<WorkerOutput> output,
                         WorkerOutput::Start(flags.log_worker_output, worker.placement.cpus));
  worker.output = output.get();
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
  std::unique_ptr<WorkerCgroups> cgroups;
  std::string memory_bound;
  if (absl::StatusOr<std::unique_ptr<WorkerCgroups>> made =
          WorkerCgroups::Make(worker.max_data_bytes);
      made.ok()) {
    cgroups = *std::move(made);
    worker.cgroups = cgroups.get();
    memory_bound = cgroups->Describe();
  } else {
    memory_bound = absl::StrCat("no memory cgroup (", made.status().message(),
                                "): RLIMIT_DATA alone, which shared mappings escape");
  }
  // Declared before what it reports on, so that it outlives them; stopped before they go.
  std::unique_ptr<DaemonMetrics> metrics;
  std::map<base::Device, std::unique_ptr<DeviceExecutor>> executors;
  worker.device = {base::DeviceType::kCpu, 0};
  const WorkerPool pool{static_cast<int>(flags.workers_per_device), flags.worker_idle_timeout};
  executors.emplace(worker.device,
                    std::make_unique<DeviceExecutor>(worker, static_cast<int>(flags.max_queue),
                                                     flags.job_timeout, pool));
  // What the host has, from a worker: the daemon itself never loads PAPI, the CUDA driver or
  // NVML. Each GPU the driver reports gets its own queue and worker, which holds the device's
  // primary context.
  DescribedHost described = DescribeHost(worker, flags.describe_timeout);
  if (!described.cpu.ok()) {
    Log(LogSeverity::kWarning,
        absl::StrCat("the host's collectors are unknown: ", described.cpu.message()));
  }
  if (!described.cuda.ok()) Log(LogSeverity::kWarning, std::string(described.cuda.message()));
  if (described.cpu.ok()) {
    described.host.set_isolation("one worker per client; " + described.host.isolation() + "; " +
                                 memory_bound);
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
  for (const kprof::v1::DeviceInfo& info : described.host.devices()) {
    if (info.type() != base::DeviceTypeName(base::DeviceType::kCuda)) continue;
    WorkerOptions gpu_worker = worker;
    gpu_worker.device = {base::DeviceType::kCuda, info.id()};
    executors.emplace(gpu_worker.device,
                      std::make_unique<DeviceExecutor>(
                          gpu_worker, static_cast<int>(flags.max_queue), flags.job_timeout, pool));
  }

  ServiceLimits limits;
  limits.max_argument_bytes = flags.max_argument_bytes;
  limits.max_queue = static_cast<int>(flags.max_queue);
  limits.job_timeout = flags.job_timeout;
  limits.upload_idle_timeout = flags.upload_idle_timeout;
  limits.busy_poll = worker.busy_poll;
  if (flags.require_checks == "basic") limits.require_checks = kprof::v1::AnswerCheck::BASIC;
  if (flags.require_checks == "strict") limits.require_checks = kprof::v1::AnswerCheck::STRICT;
  // Leases: who may take one, and where the clocks a lease changes are journalled. What a lease
  // of an earlier run left changed (the daemon was killed) is put back before serving.
  LeaseOptions lease_options;
  lease_options.max_lease = flags.max_lease;
  lease_options.helper = worker.executable;
  lease_options.sysfs_root = flags.sysfs_root;
  lease_options.cpus = worker.placement.cpus;
  lease_options.floor_mhz = flags.lock_floor_mhz;
  lease_options.state_dir = state_dir;
  lease_options.budget = flags.lease_budget;
  if (flags.lease_clients == "*") {
    lease_options.anyone = true;
  } else {
    for (absl::string_view label : absl::StrSplit(flags.lease_clients, ',', absl::SkipEmpty())) {
      lease_options.clients.emplace(absl::StripAsciiWhitespace(label));
    }
  }
  if (absl::StatusOr<std::string> restored = LeaseManager::RestoreLeftovers(lease_options);
      !restored.ok()) {
    Log(LogSeverity::kWarning,
        absl::StrCat("the clocks a lease left changed could not all be put back: ",
                     restored.status().message(), " (the journals in ", state_dir, ")"));
  } else if (!restored->empty()) {
    Log(LogSeverity::kInfo,
        absl::StrCat("put back the clocks a lease of an earlier run left changed: ", *restored));
  }
  ProfilerService service(registry.get(), &executors, limits, std::move(auth));
  service.SetHost(std::move(described));
  // Stopped before the executors drain: its clocks go back while they still run jobs.
  LeaseManager leases(lease_options);
  service.set_leases(&leases);
  if (const TokenAuth* tokens = service.auth(); tokens != nullptr) {
    for (auto& [device, executor] : executors) {
      // A copy: the executors may outlive the service that owns the tokens.
      executor->SetClientWeights(
          [weights = *tokens](const std::string& c) { return weights.WeightOf(c); });
    }
  }
  // However Serve ends, no scrape reads the service or the executors after they go.
  absl::Cleanup stop_metrics = [&metrics] {
    if (metrics != nullptr) metrics->Stop();
  };
  KPROF_ASSIGN_OR_RETURN(const std::string where, MetricsAddress(flags));
  if (!where.empty()) {
    // The levels a scrape reads: queues, cache, streams.
    ModuleRegistry* modules = registry.get();
    KPROF_ASSIGN_OR_RETURN(
        metrics, DaemonMetrics::Serve(
                     where,
                     [&executors, modules, &service] {
                       DaemonLevels levels;
                       for (const auto& [device, executor] : executors) {
                         const DeviceExecutor::Stats stats = executor->stats();
                         levels.devices.push_back({base::DeviceSpec(device), stats.queue_length,
                                                   stats.busy, stats.workers});
                       }
                       const ModuleRegistry::Stats cache = modules->stats();
                       levels.cache_bytes = cache.bytes;
                       levels.cache_modules = cache.modules;
                       levels.evictions = cache.evictions;
                       levels.uploads = cache.uploads;
                       levels.upload_bytes = cache.upload_bytes;
                       levels.batch_streams = service.open_batch_streams();
                       return levels;
                     },
                     worker.placement.cpus));
    for (auto& [device, executor] : executors) executor->set_metrics(metrics.get());
    service.set_metrics_address(metrics->address());
    Log(LogSeverity::kInfo, absl::StrCat("metrics on http://", metrics->address(), "/metrics"));
  }

  // A port in use is said before gRPC tries it and logs its own tangle of words first.
  if (const std::string why = WhyCannotBind(flags.listen); why == kPortInUse) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", flags.listen, ": ", why, " (--listen)"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  // gRPC binds with SO_REUSEPORT by default, and a second daemon on a port then shares its
  // clients with the first at random; one daemon per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping an open call that carries nothing for a while (a long job), to find a frozen
  // daemon (ClientOptions::keepalive, 20 s by default): taken every second, not answered with
  // a GOAWAY as gRPC's five-minute default for servers would.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddListeningPort(flags.listen, credentials, &port);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(ServerInterceptors(service.auth()));
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    const std::string why = WhyCannotBind(flags.listen);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", flags.listen,
                                               why.empty() ? "" : ": ", why, " (--listen)"));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus("kprof.v1.Profiler", true);
  if (!flags.port_file.empty()) KPROF_RETURN_IF_ERROR(WritePortFile(flags.port_file, port));
  const std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  Log(LogSeverity::kInfo, absl::StrCat("kprofd ", KPROF_VERSION, " serving on ", host, ":", port,
                                       ", cache ", registry_options.cache_dir));
  // Under systemd (Type=notify): ready now; and a watchdog ping at half its interval, from a
  // thread of its own, for as long as the daemon serves.
  NotifyServiceManager(absl::StrCat("READY=1\nSTATUS=serving on ", host, ":", port));
  if (ready_fd >= 0) {  // --detach: the parent returns now
    const std::string serving = absl::StrCat(host, ":", port, "\n");
    (void)!write(ready_fd, serving.data(), serving.size());
    close(ready_fd);
  }
  absl::Notification stopping;
  std::thread watchdog;
  if (const std::optional<absl::Duration> interval = WatchdogInterval()) {
    watchdog = std::thread([&stopping, half = *interval / 2] {
      do {
        NotifyServiceManager("WATCHDOG=1");
      } while (!stopping.WaitForNotificationWithTimeout(half));
    });
  }

  const sigset_t signals = StopSignals();
  int signal_number = 0;
  sigwait(&signals, &signal_number);

  Log(LogSeverity::kInfo, absl::StrCat("received ", sigabbrev_np(signal_number),
                                       ": draining — no new jobs, running ones finish"));
  NotifyServiceManager("STOPPING=1\nSTATUS=draining");
  health->SetServingStatus("", false);
  health->SetServingStatus("kprof.v1.Profiler", false);
  service.StartDraining();
  // One bound for the whole drain: running jobs, a leased one too, finish within it or are
  // killed; the clocks a lease set go back after, when nothing runs on them any more.
  const absl::Time give_up = absl::Now() + kDrainGrace;
  const auto left = [&] { return std::max(give_up - absl::Now(), absl::ZeroDuration()); };
  for (auto& [device, executor] : executors) executor->Drain(left());
  leases.Stop();
  if (metrics != nullptr) metrics->Stop();
  if (!service.WaitForUploads(left())) {
    Log(LogSeverity::kWarning, "uploads still running at the end of the drain are cut off");
  }
  // Jobs and uploads are over; what remains are instant calls and idle connections, which
  // gRPC would otherwise wait on until the deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  stopping.Notify();
  if (watchdog.joinable()) watchdog.join();
  Log(LogSeverity::kInfo, "stopped");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kprof::server

int main(int argc, char** argv) {
  // Signals are taken by sigwait in the main thread; every thread started later inherits the
  // block, and workers get an empty mask at spawn.
  const sigset_t signals = kprof::server::StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Abseil's Mutex keeps a graph of lock order to report cycles, at a cost on every lock of
  // every job; the locks here are few and their order is fixed by design.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  kprof::server::DaemonFlags flags;
  kprof::base::CommandLine cl("kprofd");
  kprof::server::DeclareDaemonFlags(cl, flags);
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> positional;
  absl::Status status = cl.Parse(args, &positional);
  const std::string config = status.ok() ? kprof::server::ConfigPath(flags) : "";
  kprof::server::ConfigOrigins origins;
  if (!config.empty()) {
    // The config file first, then the command line again so that it wins.
    status = kprof::server::ApplyConfig(config, cl, &origins);
    std::vector<std::string> again;
    if (status.ok()) status = cl.Parse(args, &again);
    kprof::server::ForgetGiven(args, origins);
  }
  if (status.ok() && !positional.empty()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional.front(), "' (kprofd --help)"));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "kprofd: %s\n", status.ToString().c_str());
    return 2;
  }
  if (flags.help) {
    std::printf("usage: kprofd [OPTIONS]\n\nServes kernel measurements over gRPC.\n\n%s",
                cl.Help().c_str());
    return 0;
  }
  if (flags.version) {
    std::printf("kprofd %s (%s)\n", KPROF_VERSION, KPROF_BUILD);
    return 0;
  }
  if (flags.check_config) {
    std::vector<std::string> notes;
    status = kprof::server::Located(kprof::server::CheckConfiguration(flags, &notes), origins);
    if (!status.ok()) {
      std::fprintf(stderr, "kprofd: %s\n", status.ToString().c_str());
      return 1;
    }
    for (const std::string& note : notes) std::fprintf(stderr, "kprofd: note: %s\n", note.c_str());
    std::printf("kprofd: configuration OK%s\n",
                config.empty() ? " (no config file)" : (" (" + config + ")").c_str());
    return 0;
  }
  int ready_fd = -1;
  if (flags.detach) {
    if (const char* notify = std::getenv("NOTIFY_SOCKET"); notify != nullptr && *notify != '\0') {
      std::fprintf(stderr,
                   "kprofd: --detach is for a shell: under systemd (Type=notify) kprofd runs in "
                   "the foreground\n");
      return 2;
    }
    if (const int parent = kprof::server::Detach(&ready_fd); parent >= 0) return parent;
  }
  status = kprof::server::Located(kprof::server::Serve(flags, config, ready_fd), origins);
  if (!status.ok()) {
    std::fprintf(stderr, "kprofd: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
