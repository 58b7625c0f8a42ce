// kprofd's configuration: its options (DaemonFlags), the config file that sets them, their
// defaults, and the checks the daemon runs before it serves — which `kprofd --check-config`
// runs alone.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "core/host/placement.h"
#include "grpcpp/security/server_credentials.h"
#include "server/front/service/token_auth.h"
#include "server/worker/worker_sandbox.h"

namespace kprof::server {

struct DaemonFlags {
  std::string listen = "127.0.0.1:9177";
  std::string metrics_listen;  // "" : no metrics
  std::string port_file;
  std::string config;
  std::string cache_dir;
  std::string state_dir;  // "": $STATE_DIRECTORY, else the cache directory
  std::string scratch_dir;
  std::string lease_clients;  // "": no one; "*": anyone
  absl::Duration max_lease = absl::Minutes(30);
  absl::Duration lease_budget = absl::Minutes(30);  // a client's leases in any hour
  int64_t lock_floor_mhz = 0;                       // 0: each CPU's base clock
  std::string sysfs_root = "/";
  std::string log_format = "auto";  // journal under systemd, else plain
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
  uint64_t log_worker_output = 0;    // bytes of a job's output also logged; 0: none
  std::string pin_cpus, worker_priority;
  bool insecure_allow_unauthenticated = false;
  bool require_isolation = false;
  std::string require_checks = "none";  // none, basic or strict
  std::string token_file, tls_cert, tls_key, tls_client_ca;
  bool detach = false;
  bool check_config = false;
  bool help = false;
  bool version = false;
};

// Declares every option of kprofd on `cl`, with `flags` as their destination.
void DeclareDaemonFlags(base::CommandLine& cl, DaemonFlags& flags);

// Applies a config file: one `name = value` (or a bare flag name) per line, # comments, the
// same names as the options. An error names the file, the line and the key.
// Where each option the file set was set ("name" -> "FILE:LINE"), for `origins`.
using ConfigOrigins = std::map<std::string, std::string>;
absl::Status ApplyConfig(const std::string& path, base::CommandLine& cl,
                         ConfigOrigins* origins = nullptr);
// Drops from `origins` the options `args` (the command line) give, which win over the file.
void ForgetGiven(const std::vector<std::string>& args, ConfigOrigins& origins);
// `status` with "FILE:LINE: " before it when the option its message names first ("--pin-cpus")
// was set by the config file: a mistake found in a value points at its line.
absl::Status Located(const absl::Status& status, const ConfigOrigins& origins);

// --config, else $CONFIGURATION_DIRECTORY/kprofd.conf (systemd), else /etc/kprofd/kprofd.conf,
// whichever exists first; "" for none.
std::string ConfigPath(const DaemonFlags& flags);

// $CACHE_DIRECTORY (systemd), /var/cache/kprofd as root, else $XDG_CACHE_HOME/kprofd.
std::string DefaultCacheDir();
// --state-dir, else $STATE_DIRECTORY (systemd), else the cache directory `cache_dir`.
std::string StateDir(const DaemonFlags& flags, const std::string& cache_dir);
// kprofd-worker beside kprofd (a build tree), else where the install puts it.
std::string DefaultWorker();

// The numeric options in range: INVALID_ARGUMENT naming the option and what it takes.
absl::Status CheckLimits(const DaemonFlags& flags);

// --pin-cpus and --worker-priority, checked: the CPUs are among this daemon's, and this daemon
// may apply both (tried on a passing thread), so no job fails on them later.
absl::StatusOr<core::Placement> WorkerPlacement(const DaemonFlags& flags);

// Who a root daemon's workers become: --worker-user, else kprofd-worker, else nobody. None for
// a daemon that is not root (its workers are its own user, which is no one else's).
absl::StatusOr<std::optional<WorkerUser>> WorkerUserFor(const DaemonFlags& flags);

// Server credentials and the security policy: loopback may be plain; anything else needs TLS
// and authentication (a token or client certificates) unless explicitly waived.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const DaemonFlags& flags);

// The tokens of --token-file (none without one); an error names the option.
absl::StatusOr<std::optional<TokenAuth>> Tokens(const DaemonFlags& flags);

// --metrics-listen normalized to HOST:PORT ("" for none), refused beyond loopback unless
// --insecure-allow-unauthenticated.
absl::StatusOr<std::string> MetricsAddress(const DaemonFlags& flags);

// Why `address` ("HOST:PORT") cannot be bound, found by binding it and letting go: kPortInUse
// when another process serves it, else the system's reason; "" when it could be bound.
inline constexpr char kPortInUse[] = "port in use: another kprofd, or another program, serves it";
std::string WhyCannotBind(const std::string& address);

// Whether `dir` is a writable directory, or could be made as one (a directory can be made in the
// nearest existing directory above it), tried with a directory made and removed at once:
// FAILED_PRECONDITION naming `option` and the directory in the way.
absl::Status ProbeDirectory(const std::string& dir, const std::string& option);
// ProbeDirectory, then every missing directory above `dir` made (mode 0755): the start makes
// what --check-config found could be made, the last level left to its owner.
absl::Status MakeDirectories(const std::string& dir, const std::string& option);

// What --check-config checks: everything the daemon would refuse before it serves — the limits,
// the log format, placement, the worker user and executable, the TLS pair and CA, the token
// file, the cache, state and scratch directories (probed, not made), and the addresses (bound
// and let go). A port in use now is not an error: a line for `notes`.
absl::Status CheckConfiguration(const DaemonFlags& flags, std::vector<std::string>* notes);

}  // namespace kprof::server
