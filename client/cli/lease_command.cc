// kprof lease DEVICE --for DURATION [--lock-clocks [--clock-mhz N]] -- CMD...: holds the device
// alone while CMD runs. Once the lease is granted, a line on stderr says so (and what it did to
// the clocks); CMD runs with $KPROF_LEASE (and the target and credentials) in its environment,
// so that the kprof commands and client-library calls it makes are the holder's, and are
// refused should the lease end first. When CMD exits the lease is released, and kprof exits
// with CMD's status.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "proto/status.h"

extern char** environ;

namespace kprof::client {
namespace {

std::atomic<pid_t> child_pid{-1};
std::atomic<int> pending_signal{0};  // one that came before CMD was there to take it

// The signal is left pending first, then passed on by whichever of this handler and the thread
// that starts CMD sees both it and CMD's pid: exactly one of them does.
void Forward(int sig) {
  pending_signal = sig;
  const pid_t pid = child_pid.load();
  if (pid <= 0) return;
  if (const int pending = pending_signal.exchange(0); pending != 0) kill(pid, pending);
}

std::string When(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

// "clocks locked: cpu0-3 governor powersave -> performance, ..." or what was recorded, and why.
std::string ClocksLine(const kprof::v1::LeaseInfo& lease) {
  std::vector<std::string> parts;
  for (const kprof::v1::ClockSetting& s : lease.clocks()) {
    parts.push_back(s.during().empty()
                        ? absl::StrCat(s.name(), " ", s.before())
                        : absl::StrCat(s.name(), " ", s.before(), " -> ", s.during()));
  }
  std::string line = lease.clocks_locked() ? "clocks locked" : "clocks recorded";
  if (!parts.empty()) absl::StrAppend(&line, ": ", absl::StrJoin(parts, ", "));
  if (!lease.clocks_note().empty()) absl::StrAppend(&line, " (", lease.clocks_note(), ")");
  return line;
}

class LeaseCommand final : public Command {
 public:
  explicit LeaseCommand(CLI::App& app)
      : Command(app, "lease",
                "hold a device alone while a command runs: kprof lease cuda:0 --for 10m -- CMD...",
                {"table"}) {
    CLI::App* c = subcommand();
    c->add_option("DEVICE", device_, "the device: cpu:0, cuda:0")->required();
    c->add_option("--for", length_,
                  "how long at most: 10m, 90s, 1h (the daemon's --max-lease caps it)")
        ->required();
    c->add_flag("--lock-clocks", lock_clocks_,
                "lock the device's clocks for the lease (put back after); else only recorded");
    c->add_option("--clock-mhz", clock_mhz_,
                  "with --lock-clocks: the frequency (default: the base clock, else the maximum)");
    c->add_option("COMMAND", command_, "the command to run under the lease, after --")->required();
  }

  absl::Status Run(const Globals& globals, const std::string&, int*) override {
    const absl::StatusOr<absl::Duration> length = ParseDuration(length_);
    if (!length.ok()) return length.status();
    if (clock_mhz_ < 0) return UsageError("--clock-mhz wants a frequency in MHz above 0");
    if (clock_mhz_ > 0 && !lock_clocks_) return UsageError("--clock-mhz goes with --lock-clocks");
    int code = 0;
    KPROF_RETURN_IF_ERROR(Hold(globals, *length, &code));
    if (code != 0) {
      std::fflush(nullptr);
      std::exit(code);  // CMD's status, without a message of kprof's own
    }
    return absl::OkStatus();
  }

 private:
  static absl::StatusOr<absl::Duration> ParseDuration(const std::string& text) {
    absl::Duration d;
    if (absl::ParseDuration(text, &d) && d > absl::ZeroDuration()) return d;
    double seconds = 0;
    if (absl::SimpleAtod(text, &seconds) && seconds > 0) return absl::Seconds(seconds);
    return UsageError(absl::StrCat("--for '", text, "' is not a duration (10m, 90s, 1h)"));
  }

  absl::Status Hold(const Globals& globals, absl::Duration length, int* code) {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
    std::unique_ptr<Client::LeaseStream> lease = client->OpenLease();
    kprof::v1::LeaseRequest request;
    request.set_device(device_);
    request.set_seconds(absl::ToDoubleSeconds(length));
    request.set_lock_clocks(lock_clocks_);
    request.set_clock_mhz(clock_mhz_);
    if (!lease->stream->Write(request)) return Finish(*lease, "the daemon took no lease request");
    kprof::v1::LeaseUpdate update;
    kprof::v1::LeaseInfo granted;
    while (true) {
      if (!lease->stream->Read(&update)) return Finish(*lease, "the lease stream ended");
      if (update.state() == kprof::v1::LeaseUpdate::WAITING) {
        std::fprintf(stderr, "kprof: waiting: %s is leased to %s until %s\n",
                     update.lease().device().c_str(), update.lease().holder().c_str(),
                     When(update.lease().ends_unix_ms()).c_str());
      } else if (update.state() == kprof::v1::LeaseUpdate::GRANTED) {
        granted = update.lease();
        break;
      } else if (update.state() == kprof::v1::LeaseUpdate::ENDED) {
        lease->stream->WritesDone();
        (void)lease->stream->Finish();
        return absl::FailedPreconditionError(
            absl::StrCat("the lease was not granted: ", update.end_reason()));
      }
    }
    std::fprintf(stderr, "kprof: lease %s: %s is yours until %s; %s\n", granted.lease_id().c_str(),
                 granted.device().c_str(), When(granted.ends_unix_ms()).c_str(),
                 ClocksLine(granted).c_str());
    if (lock_clocks_ && !granted.clocks_locked()) {
      std::fprintf(stderr, "kprof: warning: the clocks are NOT locked: %s\n",
                   granted.clocks_note().empty() ? "the daemon did not say why"
                                                 : granted.clocks_note().c_str());
    }
    std::fflush(stderr);

    // The lease's end, should it come while CMD runs (it expired), is said at once.
    std::atomic<bool> ended{false};
    std::thread reader([&lease, &ended] {
      kprof::v1::LeaseUpdate later;
      while (lease->stream->Read(&later)) {
        if (later.state() != kprof::v1::LeaseUpdate::ENDED) continue;
        ended = true;
        std::fprintf(
            stderr, "kprof: lease %s ended: %s%s%s\n", later.lease().lease_id().c_str(),
            later.end_reason().c_str(),
            later.clocks_restored().empty() ? "" : "; clocks: ", later.clocks_restored().c_str());
      }
    });
    const absl::StatusOr<int> status = RunCommand(globals, granted.lease_id());
    lease->stream->WritesDone();  // releases the lease
    reader.join();
    const grpc::Status finished = lease->stream->Finish();
    if (!status.ok()) return status.status();
    if (!finished.ok() && !ended) {
      std::fprintf(
          stderr, "kprof: the lease stream ended %s: %s\n",
          absl::StatusCodeToString(static_cast<absl::StatusCode>(finished.error_code())).c_str(),
          finished.error_message().c_str());
    }
    *code = *status;
    return absl::OkStatus();
  }

  static absl::Status Finish(Client::LeaseStream& lease, const char* what) {
    const grpc::Status status = lease.stream->Finish();
    if (!status.ok()) return FromGrpcStatus(status);
    return absl::UnavailableError(what);
  }

  // Runs CMD with the lease in its environment; its exit status (128 + N when killed by N).
  absl::StatusOr<int> RunCommand(const Globals& globals, const std::string& lease_id) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      for (const char* name :
           {"KPROF_LEASE=", "KPROF_LEASE_TARGET=", "KPROF_TARGET=", "KPROF_TOKEN_FILE=",
            "KPROF_TLS_CA=", "KPROF_TLS_CERT=", "KPROF_TLS_KEY="}) {
        if (entry.rfind(name, 0) == 0) goto skip;
      }
      env.push_back(entry);
    skip:;
    }
    env.push_back("KPROF_LEASE=" + lease_id);
    env.push_back("KPROF_TARGET=" + globals.ResolvedTarget());
    env.push_back("KPROF_LEASE_TARGET=" + globals.ResolvedTarget());
    const auto pass = [&env](const char* name, const std::string& value) {
      if (!value.empty()) env.push_back(absl::StrCat(name, "=", value));
    };
    pass("KPROF_TOKEN_FILE", globals.token_file);
    pass("KPROF_TLS_CA", globals.tls_ca);
    pass("KPROF_TLS_CERT", globals.tls_cert);
    pass("KPROF_TLS_KEY", globals.tls_key);
    for (const char* name :
         {"KPROF_TOKEN_FILE", "KPROF_TLS_CA", "KPROF_TLS_CERT", "KPROF_TLS_KEY"}) {
      const char* value = std::getenv(name);
      const bool given = std::any_of(env.begin(), env.end(), [name](const std::string& e) {
        return e.rfind(absl::StrCat(name, "="), 0) == 0;
      });
      if (value != nullptr && !given) env.push_back(absl::StrCat(name, "=", value));
    }
    std::vector<char*> envp, argv;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (std::string& a : command_) argv.push_back(a.data());
    argv.push_back(nullptr);

    // Ctrl-C reaches CMD (the terminal signals the whole group); kprof waits for it to end,
    // then releases. A TERM or HUP sent to kprof alone is passed on.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
    struct sigaction ignore {
    }, forward{}, old_int{}, old_quit{}, old_term{}, old_hup{};
    ignore.sa_handler = SIG_IGN;
    forward.sa_handler = Forward;
    sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
    // The forwarders are in place before CMD starts: a TERM meanwhile is passed on once it has.
    sigaction(SIGTERM, &forward, &old_term);
    sigaction(SIGHUP, &forward, &old_hup);
    pid_t pid = -1;
    const int spawned = posix_spawnp(&pid, argv[0], nullptr, &attributes, argv.data(), envp.data());
    posix_spawnattr_destroy(&attributes);
    int status = 0;
    if (spawned == 0) {
      child_pid = pid;
      if (const int sig = pending_signal.exchange(0); sig != 0) kill(pid, sig);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      child_pid = -1;
    }
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGHUP, &old_hup, nullptr);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    if (spawned != 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot run '", command_[0], "': ", std::strerror(spawned)));
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
  }

  std::string device_;
  std::string length_;
  bool lock_clocks_ = false;
  int clock_mhz_ = 0;
  std::vector<std::string> command_;
};

}  // namespace

std::unique_ptr<Command> AddLeaseCommand(CLI::App& app) {
  return std::make_unique<LeaseCommand>(app);
}

}  // namespace kprof::client
