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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/command_line.h"
#include "base/log.h"
#include "base/loopback.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "kprof/config.h"
#include "server/front/daemon/daemon_metrics.h"
#include "server/front/daemon/daemon_options.h"
#include "server/front/daemon/daemon_setup.h"
#include "server/front/daemon/journal_log.h"
#include "server/front/daemon/service_manager.h"
#include "server/front/scheduling/lease_manager.h"
#include "server/front/service/profiler_service.h"
#include "server/front/workers/worker_output.h"

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

// Says the daemon serves: the log, systemd (Type=notify), and the parent waiting under
// --detach, which returns then.
void Announce(const DaemonFlags& flags, int port, const std::string& cache_dir, int ready_fd) {
  const std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  Log(LogSeverity::kInfo, absl::StrCat("kprofd ", KPROF_VERSION, " serving on ", host, ":", port,
                                       ", cache ", cache_dir));
  NotifyServiceManager(absl::StrCat("READY=1\nSTATUS=serving on ", host, ":", port));
  if (ready_fd >= 0) {
    const std::string serving = absl::StrCat(host, ":", port, "\n");
    (void)!write(ready_fd, serving.data(), serving.size());
    close(ready_fd);
  }
}

// Under systemd, a watchdog ping at half its interval from a thread of its own, until `stopping`.
std::thread StartWatchdog(absl::Notification* stopping) {
  const std::optional<absl::Duration> interval = WatchdogInterval();
  if (!interval.has_value()) return std::thread();
  return std::thread([stopping, half = *interval / 2] {
    do {
      NotifyServiceManager("WATCHDOG=1");
    } while (!stopping->WaitForNotificationWithTimeout(half));
  });
}

// Waits for a stop signal, then drains: no new jobs; running ones, a leased one too, finish
// within one bound or are killed; the clocks a lease set go back after, when nothing runs on
// them any more; uploads end; then the server stops.
void ServeUntilStopped(grpc::Server* server, ProfilerService* service, Executors* executors,
                       LeaseManager* leases, DaemonMetrics* metrics) {
  const sigset_t signals = StopSignals();
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  Log(LogSeverity::kInfo, absl::StrCat("received ", sigabbrev_np(signal_number),
                                       ": draining — no new jobs, running ones finish"));
  NotifyServiceManager("STOPPING=1\nSTATUS=draining");
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("", false);
  health->SetServingStatus("kprof.v1.Profiler", false);
  service->StartDraining();
  const absl::Time give_up = absl::Now() + kDrainGrace;
  const auto left = [&] { return std::max(give_up - absl::Now(), absl::ZeroDuration()); };
  for (auto& [device, executor] : *executors) executor->Drain(left());
  leases->Stop();
  if (metrics != nullptr) metrics->Stop();
  if (!service->WaitForUploads(left())) {
    Log(LogSeverity::kWarning, "uploads still running at the end of the drain are cut off");
  }
  // Jobs and uploads are over; what remains are instant calls and idle connections, which
  // gRPC would otherwise wait on until the deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
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
  KPROF_ASSIGN_OR_RETURN(WorkerSetup workers, SetUpWorkers(flags, registry_options.cache_dir));

  // Declared before what it reports on, so that it outlives them; stopped before they go.
  std::unique_ptr<DaemonMetrics> metrics;
  Executors executors;
  KPROF_ASSIGN_OR_RETURN(DescribedHost described, StartExecutors(flags, workers, &executors));
  // The leases' clocks go back before the executors drain, while they still run jobs.
  const LeaseOptions lease_options = LeasesFrom(flags, workers.options, workers.state_dir);
  ProfilerService service(registry.get(), &executors, LimitsFrom(flags, workers.options.busy_poll),
                          std::move(auth));
  service.SetHost(std::move(described));
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
  KPROF_ASSIGN_OR_RETURN(metrics, StartMetrics(where, executors, registry.get(), &service,
                                               workers.options.placement.cpus));

  int port = 0;
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<grpc::Server> server,
                         StartServer(flags, credentials, &service, &port));
  if (!flags.port_file.empty()) KPROF_RETURN_IF_ERROR(WritePortFile(flags.port_file, port));
  Announce(flags, port, registry_options.cache_dir, ready_fd);
  absl::Notification stopping;
  std::thread watchdog = StartWatchdog(&stopping);
  ServeUntilStopped(server.get(), &service, &executors, &leases, metrics.get());
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
