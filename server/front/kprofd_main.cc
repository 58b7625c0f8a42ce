// kprofd: the profiling daemon. Serves kprof.v1.Profiler, the gRPC health service and server
// reflection; runs measurements in one kprofd-worker process per device.
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
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
#include "server/front/interceptors.h"
#include "server/front/profiler_service.h"

namespace kprof::server {
namespace {

using core::Log;
using core::LogSeverity;

struct Flags {
  std::string listen = "127.0.0.1:9177";
  std::string port_file;
  std::string config;
  std::string cache_dir;
  std::string scratch_dir;
  std::string worker_user;
  std::string worker;
  int64_t max_queue = 64;
  absl::Duration job_timeout = absl::Seconds(60);
  absl::Duration describe_timeout = absl::Seconds(20);
  absl::Duration upload_idle_timeout = absl::Seconds(30);
  uint64_t max_module_bytes = uint64_t{256} << 20;
  uint64_t max_cache_bytes = uint64_t{4} << 30;
  uint64_t max_argument_bytes = uint64_t{4} << 30;
  uint64_t max_modules = 10000;
  uint64_t worker_open_modules = 64;
  int64_t workers_per_device = 4;
  absl::Duration worker_idle_timeout = absl::Minutes(5);
  absl::Duration busy_poll = absl::Microseconds(250);
  uint64_t worker_memory_limit = 0;  // 0: three quarters of physical memory
  std::string pin_cpus, worker_priority;
  bool insecure_allow_unauthenticated = false;
  bool require_isolation = false;
  std::string token_file, tls_cert, tls_key, tls_client_ca;
  bool check_config = false;
  bool help = false;
  bool version = false;
};

void Declare(core::CommandLine& cl, Flags& f) {
  cl.AddString("listen", &f.listen, "HOST:PORT",
               "address to serve on (default 127.0.0.1:9177; port 0 picks a free one)");
  cl.AddString("port-file", &f.port_file, "FILE",
               "write the bound port here once calls are accepted");
  cl.AddString("config", &f.config, "FILE",
               "read options from FILE: one 'name = value' per line, # comments; the command "
               "line wins");
  cl.AddString("cache-dir", &f.cache_dir, "DIR",
               "module cache (default $CACHE_DIRECTORY, /var/cache/kprofd as root, else "
               "$XDG_CACHE_HOME/kprofd)");
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
  cl.AddUint("max-module-bytes", &f.max_module_bytes, "BYTES",
             "largest module accepted (default 256 MiB)");
  cl.AddUint("max-cache-bytes", &f.max_cache_bytes, "BYTES",
             "module cache size before least recently used modules are evicted (default 4 GiB)");
  cl.AddUint("max-argument-bytes", &f.max_argument_bytes, "BYTES",
             "arguments of one job together (default 4 GiB)");
  cl.AddUint("max-modules", &f.max_modules, "N",
             "modules held at once before the least recently used are evicted (default 10000)");
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
  cl.AddUint("worker-memory-limit", &f.worker_memory_limit, "BYTES",
             "data size a worker may use (RLIMIT_DATA; default three quarters of RAM)");
  cl.AddString("pin-cpus", &f.pin_cpus, "LIST",
               "run the workers on these CPUs only, e.g. 2-3 (default: wherever kprofd may run)");
  cl.AddString("worker-priority", &f.worker_priority, "nice:N|fifo:N",
               "run the workers at this nice value or SCHED_FIFO priority (needs the permission: "
               "CAP_SYS_NICE, RLIMIT_NICE or RLIMIT_RTPRIO)");
  cl.AddString("worker", &f.worker, "PATH",
               "the kprofd-worker executable (default: beside kprofd)");
  cl.AddString("token-file", &f.token_file, "FILE",
               "require 'authorization: Bearer <token>' with a token from FILE (one per line)");
  cl.AddString("tls-cert", &f.tls_cert, "FILE", "serve TLS with this certificate chain (PEM)");
  cl.AddString("tls-key", &f.tls_key, "FILE", "the private key of --tls-cert (PEM)");
  cl.AddString("tls-client-ca", &f.tls_client_ca, "FILE",
               "require client certificates signed by this CA (mutual TLS)");
  cl.AddFlag("require-isolation", &f.require_isolation,
             "refuse to start unless workers get both their Landlock rules and their syscall "
             "filter (by default a kernel without them is logged and served anyway)");
  cl.AddFlag("insecure-allow-unauthenticated", &f.insecure_allow_unauthenticated,
             "allow listening beyond loopback without TLS and authentication (dangerous: "
             "whoever reaches the port runs code here)");
  cl.AddFlag("check-config", &f.check_config,
             "check the options and the config file (and the files they name), then exit");
  cl.AddFlag("help", &f.help, "print this help and exit");
  cl.AddFlag("version", &f.version, "print the version and exit");
}

// Applies a config file: one `name = value` (or a bare flag name) per line, # comments, the
// same names as the options. An error names the file, the line and the key.
absl::Status ApplyConfig(const std::string& path, core::CommandLine& cl) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text(absl::StripAsciiWhitespace(line.substr(0, line.find('#'))));
    if (text.empty()) continue;
    const size_t equals = text.find('=');
    const std::string name(absl::StripAsciiWhitespace(text.substr(0, equals)));
    if (name.empty() || name == "config" || name.rfind("--", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": '", text,
                                                     "' is not 'name = value' with a known name"));
    }
    std::vector<std::string> arg = {"--" + name};
    if (equals != std::string::npos) {
      arg[0] += "=" + std::string(absl::StripAsciiWhitespace(text.substr(equals + 1)));
    }
    std::vector<std::string> positional;
    if (absl::Status s = cl.Parse(arg, &positional); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": key '", name, "': ", std::string(s.message())));
    }
  }
  return absl::OkStatus();
}

// --config, else $CONFIGURATION_DIRECTORY/kprofd.conf (systemd), else /etc/kprofd/kprofd.conf,
// whichever exists first; "" for none.
std::string ConfigPath(const Flags& flags) {
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

// Server credentials and the security policy: loopback may be plain; anything else needs TLS
// and authentication (a token or client certificates) unless explicitly waived.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const Flags& flags) {
  const bool tls = !flags.tls_cert.empty() || !flags.tls_key.empty();
  if (tls && (flags.tls_cert.empty() || flags.tls_key.empty())) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!flags.tls_client_ca.empty() && !tls) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  const bool authenticated = !flags.token_file.empty() || !flags.tls_client_ca.empty();
  if (!core::IsLoopbackAddress(flags.listen) && !(tls && authenticated)) {
    if (!flags.insecure_allow_unauthenticated) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to listen on ", flags.listen, ": beyond loopback kprofd needs TLS ",
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
  KPROF_ASSIGN_OR_RETURN(std::string cert, core::ReadFile(flags.tls_cert, "the TLS certificate"));
  KPROF_ASSIGN_OR_RETURN(std::string key, core::ReadFile(flags.tls_key, "the TLS key"));
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!flags.tls_client_ca.empty()) {
    KPROF_ASSIGN_OR_RETURN(options.pem_root_certs,
                           core::ReadFile(flags.tls_client_ca, "the client CA"));
  }
  return grpc::SslServerCredentials(options);
}

// Why `listen` ("HOST:PORT") cannot be bound, found by binding it here: "port in use" when
// another process serves it, else the system's reason; empty when it could be bound after all.
std::string WhyCannotListen(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0 || listen.find("://") != std::string::npos) return "";
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return "no port (accepted: HOST:PORT, e.g. 127.0.0.1:9177)";
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::StrCat("cannot resolve '", host, "': ", gai_strerror(error));
  }
  std::string why;
  for (const addrinfo* a = found; a != nullptr && why.empty(); a = a->ai_next) {
    const int probe = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (probe < 0) continue;
    const int on = 1;  // as gRPC binds: a port left in TIME_WAIT is not "in use"
    setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(probe, a->ai_addr, a->ai_addrlen) != 0) {
      why = errno == EADDRINUSE ? "port in use: another kprofd, or another program, serves it"
                                : std::strerror(errno);
    }
    close(probe);
  }
  freeaddrinfo(found);
  return why;
}

absl::Status CheckLimits(const Flags& flags) {
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

// --pin-cpus and --worker-priority, checked: the CPUs are among this daemon's, and this daemon
// may apply both (tried on a passing thread), so no job fails on them later.
absl::StatusOr<core::Placement> WorkerPlacement(const Flags& flags) {
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

// Who a root daemon's workers become: --worker-user, else kprofd-worker, else nobody. None for
// a daemon that is not root (its workers are its own user, which is no one else's).
absl::StatusOr<std::optional<WorkerUser>> WorkerUserFor(const Flags& flags) {
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

// What --check-config checks: everything Serve would refuse before it binds a port.
absl::Status CheckConfiguration(const Flags& flags) {
  KPROF_RETURN_IF_ERROR(CheckLimits(flags));
  KPROF_RETURN_IF_ERROR(WorkerPlacement(flags).status());
  KPROF_RETURN_IF_ERROR(WorkerUserFor(flags).status());
  KPROF_RETURN_IF_ERROR(Credentials(flags).status());
  if (!flags.token_file.empty())
    KPROF_RETURN_IF_ERROR(TokenAuth::FromFile(flags.token_file).status());
  return absl::OkStatus();
}

absl::Status Serve(const Flags& flags) {
  KPROF_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, Credentials(flags));
  std::optional<TokenAuth> auth;
  if (!flags.token_file.empty()) {
    KPROF_ASSIGN_OR_RETURN(auth, TokenAuth::FromFile(flags.token_file));
    Log(LogSeverity::kInfo, absl::StrCat("calls need one of ", auth->size(), " bearer token(s)"));
  }
  KPROF_RETURN_IF_ERROR(CheckLimits(flags));

  RegistryOptions registry_options;
  registry_options.cache_dir = flags.cache_dir.empty() ? DefaultCacheDir() : flags.cache_dir;
  registry_options.max_module_bytes = flags.max_module_bytes;
  registry_options.max_cache_bytes = flags.max_cache_bytes;
  registry_options.max_modules = flags.max_modules;
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
  // Each worker writes only in a scratch directory of its own, beneath this one, which no
  // worker may read.
  KPROF_ASSIGN_OR_RETURN(worker.user, WorkerUserFor(flags));
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<ScratchRoot> scratch,
                         ScratchRoot::Make(flags.scratch_dir, worker.user));
  worker.scratch_root = scratch->path();
  worker.unreadable.push_back(scratch->path());
  worker.max_open_modules = flags.worker_open_modules;
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
  std::map<core::Device, std::unique_ptr<DeviceExecutor>> executors;
  worker.device = {core::DeviceType::kCpu, 0};
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
    if (info.type() != core::DeviceTypeName(core::DeviceType::kCuda)) continue;
    WorkerOptions gpu_worker = worker;
    gpu_worker.device = {core::DeviceType::kCuda, info.id()};
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
  ProfilerService service(registry.get(), &executors, limits, std::move(auth));
  service.SetHost(std::move(described));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  // gRPC binds with SO_REUSEPORT by default, and a second daemon on a port then shares its
  // clients with the first at random; one daemon per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(flags.listen, credentials, &port);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(ServerInterceptors(service.auth()));
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    const std::string why = WhyCannotListen(flags.listen);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", flags.listen, why.empty() ? "" : ": ", why));
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
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s:%d", host.c_str(), port);
  uint64_t watchdog_usec = 0;
  absl::Notification stopping;
  std::thread watchdog;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
    watchdog = std::thread([&stopping, watchdog_usec] {
      do {
        sd_notify(0, "WATCHDOG=1");
      } while (!stopping.WaitForNotificationWithTimeout(
          absl::Microseconds(static_cast<int64_t>(watchdog_usec / 2))));
    });
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  int signal_number = 0;
  sigwait(&signals, &signal_number);

  Log(LogSeverity::kInfo, absl::StrCat("received ", sigabbrev_np(signal_number),
                                       ": draining — no new jobs, running ones finish"));
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  health->SetServingStatus("", false);
  health->SetServingStatus("kprof.v1.Profiler", false);
  service.StartDraining();
  for (auto& [device, executor] : executors) executor->Drain(absl::Seconds(10));
  if (!service.WaitForUploads(absl::Seconds(10))) {
    Log(LogSeverity::kWarning, "uploads still running after 10 s are cut off");
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
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Abseil's Mutex keeps a graph of lock order to report cycles, at a cost on every lock of
  // every job; the locks here are few and their order is fixed by design.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  kprof::server::Flags flags;
  kprof::core::CommandLine cl("kprofd");
  kprof::server::Declare(cl, flags);
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> positional;
  absl::Status status = cl.Parse(args, &positional);
  const std::string config = status.ok() ? kprof::server::ConfigPath(flags) : "";
  if (!config.empty()) {
    // The config file first, then the command line again so that it wins.
    status = kprof::server::ApplyConfig(config, cl);
    std::vector<std::string> again;
    if (status.ok()) status = cl.Parse(args, &again);
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
    status = kprof::server::CheckConfiguration(flags);
    if (!status.ok()) {
      std::fprintf(stderr, "kprofd: %s\n", status.ToString().c_str());
      return 1;
    }
    std::printf("kprofd: configuration OK%s\n",
                config.empty() ? " (no config file)" : (" (" + config + ")").c_str());
    return 0;
  }
  status = kprof::server::Serve(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "kprofd: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
