#include "server/front/daemon/daemon_options.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "base/loopback.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "base/tls_files.h"
#include "kprof/config.h"
#include "server/front/daemon/daemon_metrics.h"
#include "server/front/service/token_auth.h"

namespace kprof::server {

using base::Log;
using base::LogSeverity;

namespace {

// The options of the workers: how many, how long idle, their memory, placement and output.
void DeclareWorkerFlags(base::CommandLine& cl, DaemonFlags& f) {
  cl.AddInt("workers-per-device", &f.workers_per_device, "N",
            "worker processes a device keeps, one per client (a token's label, a client "
            "certificate's subject, or 'local'); past it the one idle longest ends (default 4)");
  cl.AddDuration("worker-idle-timeout", &f.worker_idle_timeout, "DURATION",
                 "a client's worker that has had no job this long ends (default 5m)");
  cl.AddDuration("busy-poll", &f.busy_poll, "DURATION",
                 "how long a worker that has answered polls for its client's next job, and the "
                 "thread that took a call polls for a quick answer, before they sleep: no "
                 "wake-up costs a back-to-back caller (default 250us; 0 turns it off; off on a "
                 "daemon confined to one CPU and for SCHED_FIFO workers)");
  cl.AddUint("worker-open-modules", &f.worker_open_modules, "N",
             "modules a worker keeps loaded between jobs, closing the least recently used "
             "beyond them (default 64)");
  cl.AddBytes("worker-memory-limit", &f.worker_memory_limit, "SIZE",
              "data size a worker may use (RLIMIT_DATA; default three quarters of RAM)");
  cl.AddBytes("log-worker-output", &f.log_worker_output, "SIZE",
              "also write up to SIZE of each job's output (what its worker prints) into the "
              "log, a line each, escaped and tagged with the worker (default 0: none; the output "
              "goes to the job's client)");
  cl.AddString("pin-cpus", &f.pin_cpus, "LIST",
               "run the workers on these CPUs only, e.g. 2-3 (default: wherever kprofd may run)");
  cl.AddString("worker-priority", &f.worker_priority, "nice:N|fifo:N",
               "run the workers at this nice value or SCHED_FIFO priority (needs the permission: "
               "CAP_SYS_NICE, RLIMIT_NICE or RLIMIT_RTPRIO)");
  cl.AddString("worker", &f.worker, "PATH",
               "the kprofd-worker executable (default: beside kprofd)");
}

}  // namespace

void DeclareDaemonFlags(base::CommandLine& cl, DaemonFlags& f) {
  cl.AddString("listen", &f.listen, "HOST:PORT",
               "address to serve on (default 127.0.0.1:9177; port 0 picks a free one)");
  cl.AddString("port-file", &f.port_file, "FILE",
               "write the bound port here once calls are accepted");
  cl.AddString("metrics-listen", &f.metrics_listen, "[HOST:]PORT",
               "serve Prometheus metrics on http://HOST:PORT/metrics (a bare PORT is on "
               "127.0.0.1; beyond loopback only with --insecure-allow-unauthenticated, as "
               "/metrics has no TLS or authentication; default: none)");
  cl.AddString("config", &f.config, "FILE",
               "read options from FILE: one 'name = value' per line, # comments; the command "
               "line wins (default $CONFIGURATION_DIRECTORY/kprofd.conf under systemd, else "
               "/etc/kprofd/kprofd.conf, where either exists; the daemon logs which it read)");
  cl.AddString("cache-dir", &f.cache_dir, "DIR",
               "module cache (default $CACHE_DIRECTORY, /var/cache/kprofd as root, else "
               "$XDG_CACHE_HOME/kprofd)");
  cl.AddString("state-dir", &f.state_dir, "DIR",
               "where the daemon keeps what must outlive it, such as the clocks a lease changed "
               "(default $STATE_DIRECTORY, else the cache directory)");
  cl.AddString("lease-clients", &f.lease_clients, "LABEL,...",
               "the clients that may lease a device (token labels, certificate subjects, or local "
               "for a daemon without authentication; * for anyone; default: no one)");
  cl.AddDuration("max-lease", &f.max_lease, "DURATION", "longest lease granted (default 30m)");
  cl.AddDuration("lease-budget", &f.lease_budget, "DURATION",
                 "how long a client's leases may last in any hour, together (default 30m)");
  cl.AddInt("lock-floor-mhz", &f.lock_floor_mhz, "MHZ",
            "the lowest CPU clock a lease may lock (default: each CPU's base clock)");
  cl.AddString("log-format", &f.log_format, "FORMAT",
               "journal (structured fields: JOB_ID, DEVICE, CLIENT, CODE, LEASE_ID), plain, or "
               "auto: the journal when stderr is systemd's journal (default auto)");
  cl.AddString("sysfs-root", &f.sysfs_root, "DIR",
               "where /sys is for a lease's clocks (default /; tests give a fake tree)");
  cl.AddString("scratch-dir", &f.scratch_dir, "DIR",
               "where each worker gets a scratch directory of its own, its TMPDIR and the one "
               "place it may write, removed with it (default /dev/shm, else $TMPDIR or /tmp)");
  cl.AddString("worker-user", &f.worker_user, "USER",
               "as root: the user (name or UID[:GID]) workers become once set up (default "
               "kprofd-worker where that user exists, else nobody); never root");
  cl.AddInt("max-queue", &f.max_queue, "N",
            "jobs of one client that may wait per device (default 64)");
  cl.AddDuration("job-timeout", &f.job_timeout, "DURATION", "longest a job may run (default 60s)");
  cl.AddDuration("describe-timeout", &f.describe_timeout, "DURATION",
                 "longest the host's description (the CPU's, then the GPUs') may take at start; "
                 "a CUDA driver that does not answer by then leaves the daemon without GPUs "
                 "(default 20s)");
  cl.AddDuration("upload-idle-timeout", &f.upload_idle_timeout, "DURATION",
                 "an upload that sends nothing this long is dropped (default 30s)");
  cl.AddBytes("max-module-bytes", &f.max_module_bytes, "SIZE",
              "largest module accepted (default 256 MiB; a size is bytes, or 256 MiB, 4G, 1.5 "
              "GiB: K/KiB, M/MiB, G/GiB, T/TiB are powers of 1024, kB, MB, GB, TB of 1000)");
  cl.AddBytes("max-cache-bytes", &f.max_cache_bytes, "SIZE",
              "module cache size before least recently used modules are evicted (default 4 GiB)");
  cl.AddBytes("max-argument-bytes", &f.max_argument_bytes, "SIZE",
              "arguments of one job together (default 4 GiB)");
  cl.AddUint("max-modules", &f.max_modules, "N",
             "modules held at once before the least recently used are evicted (default 10000)");
  DeclareWorkerFlags(cl, f);
  cl.AddString("token-file", &f.token_file, "FILE",
               "require 'authorization: Bearer <token>' with a token from FILE (one per line)");
  cl.AddString("tls-cert", &f.tls_cert, "FILE", "serve TLS with this certificate chain (PEM)");
  cl.AddString("tls-key", &f.tls_key, "FILE", "the private key of --tls-cert (PEM)");
  cl.AddString("tls-client-ca", &f.tls_client_ca, "FILE",
               "require client certificates signed by this CA (mutual TLS)");
  cl.AddFlag("require-isolation", &f.require_isolation,
             "refuse to start unless workers get both their Landlock rules and their syscall "
             "filter (by default a kernel without them is logged and served anyway)");
  cl.AddString("require-checks", &f.require_checks, "LEVEL",
               "refuse a measurement without a check of at least this level: none (the "
               "default), basic (a reference or expected data) or strict (a reference, checked "
               "strictly: for a farm of candidates no one reviewed)");
  cl.AddFlag("insecure-allow-unauthenticated", &f.insecure_allow_unauthenticated,
             "allow listening beyond loopback without TLS and authentication (dangerous: "
             "whoever reaches the port runs code here)");
  cl.AddFlag("detach", &f.detach,
             "run in the background, returning once calls are accepted (exit 0, the daemon's "
             "pid on stdout) or the start failed (its error, exit 1): for a shell, not systemd; "
             "the log stays on stderr (2>FILE sends it elsewhere)");
  cl.AddFlag("check-config", &f.check_config,
             "check the options and the config file (and the files they name), then exit");
  cl.AddFlag("help", &f.help, "print this help and exit");
  cl.AddFlag("version", &f.version, "print the version and exit");
}

absl::Status ApplyConfig(const std::string& path, base::CommandLine& cl, ConfigOrigins* origins) {
  KPROF_ASSIGN_OR_RETURN(const std::string contents, base::ReadFile(path, "config file"));
  // Every line's mistake, not the first alone: a file is fixed in one go.
  std::vector<std::string> mistakes;
  int number = 0;
  for (const absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++number;
    const std::string text(absl::StripAsciiWhitespace(line.substr(0, line.find('#'))));
    if (text.empty()) continue;
    const size_t equals = text.find('=');
    const std::string name(absl::StripAsciiWhitespace(text.substr(0, equals)));
    if (name.empty() || name == "config" || name.rfind("--", 0) == 0) {
      mistakes.push_back(absl::StrCat(path, ":", number, ": '", text,
                                      "' is not 'name = value' with a known name"));
      continue;
    }
    std::vector<std::string> arg = {"--" + name};
    if (equals != std::string::npos) {
      arg[0] += "=" + std::string(absl::StripAsciiWhitespace(text.substr(equals + 1)));
    }
    std::vector<std::string> positional;
    if (absl::Status s = cl.Parse(arg, &positional); !s.ok()) {
      mistakes.push_back(
          absl::StrCat(path, ":", number, ": key '", name, "': ", std::string(s.message())));
      continue;
    }
    if (origins != nullptr) (*origins)[name] = absl::StrCat(path, ":", number);
  }
  if (mistakes.size() == 1) return absl::InvalidArgumentError(mistakes.front());
  if (!mistakes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(mistakes.size(), " mistakes in ", path, ":\n  ",
                                                   absl::StrJoin(mistakes, "\n  ")));
  }
  return absl::OkStatus();
}

void ForgetGiven(const std::vector<std::string>& args, ConfigOrigins& origins) {
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0) continue;
    origins.erase(
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2));
  }
}

absl::Status Located(const absl::Status& status, const ConfigOrigins& origins) {
  if (status.ok() || origins.empty()) return status;
  // The option the message names first ("--pin-cpus 9: ..."), where the config file set it.
  const std::string message(status.message());
  size_t first = std::string::npos;
  const std::string* where = nullptr;
  for (const auto& [name, origin] : origins) {
    const std::string option = "--" + name;
    for (size_t at = message.find(option); at != std::string::npos;
         at = message.find(option, at + 1)) {
      const size_t end = at + option.size();
      const bool whole = end == message.size() || !(absl::ascii_isalnum(message[end]) ||
                                                    message[end] == '-' || message[end] == '_');
      if (whole && at < first) {
        first = at;
        where = &origin;
      }
      if (whole) break;
    }
  }
  if (where == nullptr) return status;
  return absl::Status(status.code(), absl::StrCat(*where, ": ", message));
}

std::string ConfigPath(const DaemonFlags& flags) {
  if (!flags.config.empty()) return flags.config;
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("CONFIGURATION_DIRECTORY"); dir != nullptr && *dir) {
    candidates.push_back(std::string(dir) + "/kprofd.conf");
  }
  candidates.push_back("/etc/kprofd/kprofd.conf");
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

std::string StateDir(const DaemonFlags& flags, const std::string& cache_dir) {
  if (!flags.state_dir.empty()) return flags.state_dir;
  // systemd's StateDirectory= may list several, separated by colons: the first is the daemon's.
  if (const char* dir = std::getenv("STATE_DIRECTORY"); dir != nullptr && *dir != '\0') {
    const std::string dirs(dir);
    return dirs.substr(0, dirs.find(':'));
  }
  return cache_dir;
}

std::string DefaultCacheDir() {
  if (const char* systemd = std::getenv("CACHE_DIRECTORY"); systemd != nullptr && *systemd) {
    return std::string(std::string_view(systemd).substr(0, std::string_view(systemd).find(':')));
  }
  if (geteuid() == 0) return "/var/cache/kprofd";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg) {
    return std::string(xdg) + "/kprofd";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/kprofd";
}

std::string DefaultWorker() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "kprofd-worker";
  const std::string path(self, static_cast<size_t>(n));
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  // Beside kprofd in a build tree; in libexec once installed.
  const std::string beside = dir + "kprofd-worker";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return dir + KPROF_WORKER_FROM_BINDIR;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const DaemonFlags& flags) {
  const bool tls = !flags.tls_cert.empty() || !flags.tls_key.empty();
  if (tls && (flags.tls_cert.empty() || flags.tls_key.empty())) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!flags.tls_client_ca.empty() && !tls) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  // HOST:PORT, whatever the host: a bare port is not an address to judge loopback by.
  const size_t colon = flags.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(flags.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen '", flags.listen,
        "' is not HOST:PORT (127.0.0.1:9177 on loopback, 0.0.0.0:9177 or [::]:9177 on every "
        "interface; port 0 picks a free one)"));
  }
  const bool authenticated = !flags.token_file.empty() || !flags.tls_client_ca.empty();
  if (!base::IsLoopbackAddress(flags.listen) && !(tls && authenticated)) {
    if (!flags.insecure_allow_unauthenticated) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to listen on ", flags.listen, " (--listen): beyond loopback kprofd needs TLS ",
          "(--tls-cert, --tls-key) and authentication (--token-file or --tls-client-ca)",
          !tls && !flags.token_file.empty() ? ", or its tokens would travel in clear" : "",
          "; --insecure-allow-unauthenticated waives this for anyone who reaches the port"));
    }
    Log(LogSeverity::kWarning,
        absl::StrCat("listening on ", flags.listen, " WITHOUT ", tls ? "" : "TLS and ",
                     "authentication (--insecure-allow-unauthenticated): anyone who reaches it "
                     "can run code on this host"));
  }
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      flags.tls_client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                  : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  // Checked here, not by gRPC, which would fail the start as "cannot listen".
  KPROF_ASSIGN_OR_RETURN(base::TlsPair pair, base::ReadTlsPair(flags.tls_cert, flags.tls_key));
  options.pem_key_cert_pairs.push_back({std::move(pair.key_pem), std::move(pair.cert_pem)});
  if (!flags.tls_client_ca.empty()) {
    KPROF_ASSIGN_OR_RETURN(options.pem_root_certs,
                           base::ReadCertificates(flags.tls_client_ca, "--tls-client-ca"));
  }
  return grpc::SslServerCredentials(options);
}

absl::Status CheckLimits(const DaemonFlags& flags) {
  if (flags.max_queue < 1 || flags.max_queue > 1'000'000) {
    return absl::InvalidArgumentError("--max-queue wants 1 to 1000000");
  }
  if (flags.job_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--job-timeout wants a positive duration");
  }
  if (flags.describe_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--describe-timeout wants a positive duration");
  }
  if (flags.upload_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--upload-idle-timeout wants a positive duration");
  }
  if (flags.log_format != "auto" && flags.log_format != "journal" && flags.log_format != "plain") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format '", flags.log_format,
                     "': auto (the journal under systemd), journal or plain"));
  }
  if (flags.require_checks != "none" && flags.require_checks != "basic" &&
      flags.require_checks != "strict") {
    return absl::InvalidArgumentError(
        absl::StrCat("--require-checks '", flags.require_checks, "': none, basic or strict"));
  }
  if (flags.lock_floor_mhz < 0) {
    return absl::InvalidArgumentError("--lock-floor-mhz wants a frequency in MHz, 0 or more");
  }
  if (flags.lease_budget <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--lease-budget wants a positive duration");
  }
  if (flags.max_lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max-lease wants a positive duration");
  }
  if (flags.workers_per_device < 1 || flags.workers_per_device > 256) {
    return absl::InvalidArgumentError("--workers-per-device wants 1 to 256");
  }
  if (flags.worker_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--worker-idle-timeout wants a positive duration");
  }
  if (flags.busy_poll < absl::ZeroDuration() || flags.busy_poll > absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat("--busy-poll ",
                                                   absl::FormatDuration(flags.busy_poll),
                                                   " is out of range (accepted: 0 to 10ms)"));
  }
  if (flags.worker_open_modules < 1 || flags.worker_open_modules > 100'000) {
    return absl::InvalidArgumentError(absl::StrCat("--worker-open-modules ",
                                                   flags.worker_open_modules,
                                                   " is out of range (accepted: 1 to 100000)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Placement> WorkerPlacement(const DaemonFlags& flags) {
  core::Placement placement;
  if (!flags.pin_cpus.empty()) {
    absl::StatusOr<std::vector<int>> cpus = core::ParseCpuList(flags.pin_cpus);
    if (!cpus.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pin-cpus: ", std::string(cpus.status().message())));
    }
    const std::vector<int> allowed = core::AllowedCpus();
    for (int cpu : *cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--pin-cpus ", flags.pin_cpus, ": CPU ", cpu,
            " is not among the CPUs this daemon may use (", core::FormatCpuList(allowed), ")"));
      }
    }
    placement.cpus = *std::move(cpus);
  }
  absl::StatusOr<core::Priority> priority = core::ParsePriority(flags.worker_priority);
  if (!priority.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker-priority: ", std::string(priority.status().message())));
  }
  placement.priority = *priority;
  if (absl::Status s = core::CheckPlacement(placement); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--pin-cpus/--worker-priority: ", std::string(s.message())));
  }
  return placement;
}

absl::StatusOr<std::optional<WorkerUser>> WorkerUserFor(const DaemonFlags& flags) {
  if (geteuid() != 0) {
    if (!flags.worker_user.empty()) {
      return absl::InvalidArgumentError(
          "--worker-user needs kprofd to start as root (its workers are its own user anyway)");
    }
    return std::optional<WorkerUser>();
  }
  std::string name = flags.worker_user;
  const bool chosen = !name.empty();
  if (!chosen) name = getpwnam("kprofd-worker") != nullptr ? "kprofd-worker" : "nobody";
  WorkerUser user;
  if (const passwd* pw = getpwnam(name.c_str()); pw != nullptr) {
    user.uid = pw->pw_uid;
    user.gid = pw->pw_gid;
    int count = 64;
    std::vector<gid_t> groups(static_cast<size_t>(count));
    if (getgrouplist(name.c_str(), pw->pw_gid, groups.data(), &count) >= 0) {
      groups.resize(static_cast<size_t>(count));
      for (gid_t g : groups) {
        if (g != pw->pw_gid) user.groups.push_back(g);
      }
    }
  } else {
    const std::vector<std::string> ids = absl::StrSplit(name, ':');
    uint32_t uid = 0, gid = 0;
    if (ids.size() <= 2 && absl::SimpleAtoi(ids[0], &uid) &&
        absl::SimpleAtoi(ids.size() == 2 ? ids[1] : ids[0], &gid)) {
      user.uid = static_cast<uid_t>(uid);
      user.gid = static_cast<gid_t>(gid);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--worker-user '", name, "' is neither a user of this host nor UID[:GID]"));
    }
  }
  // The default user opens the GPU's nodes where they are the video or render group's (a
  // Jetson's /dev/nvhost-*), as the daemon did.
  if (!chosen) {
    for (const char* group : {"video", "render"}) {
      if (const struct group* g = getgrnam(group); g != nullptr) user.groups.push_back(g->gr_gid);
    }
  }
  if (user.uid == static_cast<uid_t>(-1) || user.gid == static_cast<gid_t>(-1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker-user '", name, "': uid and gid 4294967295 mean \"no change\", not a user"));
  }
  if (user.uid == 0 || user.gid == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker-user '", name, "' is root (uid or gid 0); workers never run as root"));
  }
  Log(LogSeverity::kInfo,
      absl::StrCat("workers run as ", name, " (uid ", user.uid, ", gid ", user.gid, ")"));
  return std::optional<WorkerUser>(user);
}

absl::StatusOr<std::optional<TokenAuth>> Tokens(const DaemonFlags& flags) {
  if (flags.token_file.empty()) return std::optional<TokenAuth>();
  absl::StatusOr<TokenAuth> tokens = TokenAuth::FromFile(flags.token_file);
  if (!tokens.ok()) {
    return absl::Status(tokens.status().code(),
                        absl::StrCat("--token-file: ", tokens.status().message()));
  }
  return std::optional<TokenAuth>(*std::move(tokens));
}

absl::StatusOr<std::string> MetricsAddress(const DaemonFlags& flags) {
  if (flags.metrics_listen.empty()) return std::string();
  KPROF_ASSIGN_OR_RETURN(std::string where, DaemonMetrics::Normalize(flags.metrics_listen));
  if (!base::IsLoopbackAddress(where) && !flags.insecure_allow_unauthenticated) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve metrics on ", where,
        " (--metrics-listen): /metrics has no TLS or authentication, and beyond loopback anyone "
        "who reaches it reads the clients' names and the daemon's load; scrape it over loopback "
        "(a local Prometheus or agent), or --insecure-allow-unauthenticated waives this"));
  }
  return where;
}

}  // namespace kprof::server
