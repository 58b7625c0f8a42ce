// kprof top: a live view of one daemon or a farm — per device, whose job runs, who waits and
// with how many jobs, jobs and failures per second, workers, and the lease — refreshed in place
// every --interval until q (or Ctrl-C). Without a terminal it prints --iterations frames (one
// by default), one after another, for scripts and logs.
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/output.h"
#include "client/farm.h"

namespace kprof::client {
namespace {

std::atomic<bool> interrupted{false};

void Interrupt(int) { interrupted = true; }

// The terminal in the mode a live view needs — keys read one by one, unechoed, the screen kept
// apart and the cursor hidden — and put back as it was, however the view ends.
class LiveTerminal {
 public:
  LiveTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    std::fputs("\x1b[?1049h\x1b[?25l", stdout);  // alternate screen, no cursor
    std::fflush(stdout);
  }
  ~LiveTerminal() {
    std::fputs("\x1b[?25h\x1b[?1049l", stdout);
    std::fflush(stdout);
    if (restore_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  LiveTerminal(const LiveTerminal&) = delete;
  LiveTerminal& operator=(const LiveTerminal&) = delete;

  // Waits up to `wait` for a key; true when it is q (or Ctrl-C came).
  static bool Quit(absl::Duration wait) {
    const absl::Time until = absl::Now() + wait;
    while (!interrupted) {
      const int64_t left = absl::ToInt64Milliseconds(until - absl::Now());
      if (left <= 0) return false;
      pollfd fd{STDIN_FILENO, POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
      char key = 0;
      if (read(STDIN_FILENO, &key, 1) == 1 && (key == 'q' || key == 'Q')) return true;
    }
    return true;
  }

 private:
  termios saved_{};
  bool restore_ = false;
};

// A device's counters at one moment, for the rates between frames.
struct Counts {
  int64_t completed = 0;
  int64_t failed = 0;
  absl::Time at;
};

class TopCommand final : public Command {
 public:
  explicit TopCommand(CLI::App& app)
      : Command(app, "top", "a live view of a daemon or a farm: devices, jobs, queues, leases",
                {"table"}) {
    CLI::App* c = subcommand();
    c->add_option("--interval", interval_, "time between frames: 1s, 500ms (default 1s)");
    c->add_option("--iterations", iterations_,
                  "frames to show, then exit (default: until q on a terminal, else 1)");
  }

  absl::Status Run(const Globals& globals, const std::string&, int*) override {
    absl::Duration interval;
    if (!ParseDurationOrSeconds(interval_, &interval) || interval < absl::Milliseconds(50)) {
      return UsageError(absl::StrCat("--interval '", interval_,
                                     "' is not a duration of 50ms or more (1s, 500ms; a bare "
                                     "number is seconds)"));
    }
    if (iterations_ < 0) return UsageError("--iterations wants a count, 0 or more");
    // A daemon that does not answer holds up a frame no longer than an interval (2 s at least),
    // unless --timeout says otherwise.
    Globals asking = globals;
    if (asking.timeout.empty()) {
      asking.timeout = absl::FormatDuration(std::max(interval, absl::Seconds(2)));
    }
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Farm> farm, asking.ConnectFarm());
    // Live, in place, until q — on a terminal, when no count of frames is asked for.
    const bool live = iterations_ == 0 && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    const int frames = iterations_ > 0 ? iterations_ : live ? 0 : 1;
    struct sigaction action {};
    action.sa_handler = Interrupt;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &action, nullptr);
    std::unique_ptr<LiveTerminal> terminal;
    if (live) terminal = std::make_unique<LiveTerminal>();
    for (int frame = 0; frames == 0 || frame < frames; ++frame) {
      const std::string text = Frame(*farm, interval, globals.ResolvedTarget());
      if (live) {
        std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear
      } else if (frame > 0) {
        std::fputs("\n", stdout);
      }
      Print(text);
      std::fflush(stdout);
      if (frames != 0 && frame + 1 >= frames) break;
      if (live ? LiveTerminal::Quit(interval) : Interrupted(interval)) break;
    }
    return absl::OkStatus();
  }

 private:
  // Sleeps `wait` in slices; true when a signal came meanwhile.
  static bool Interrupted(absl::Duration wait) {
    const absl::Time until = absl::Now() + wait;
    while (!interrupted && absl::Now() < until) {
      absl::SleepFor(std::min(until - absl::Now(), absl::Milliseconds(50)));
    }
    return interrupted;
  }

  // One frame: every daemon asked at once (GetInfo), its devices a row each.
  std::string Frame(Farm& farm, absl::Duration interval, const std::string& target) {
    const size_t n = farm.daemons().size();
    std::vector<absl::StatusOr<kprof::v1::GetInfoResponse>> infos(n, absl::UnknownError(""));
    std::vector<std::thread> askers;
    for (size_t i = 0; i < n; ++i) {
      askers.emplace_back([&farm, &infos, i] { infos[i] = farm.client(i).Info(); });
    }
    for (std::thread& t : askers) t.join();
    const absl::Time now = absl::Now();
    std::string out = absl::StrFormat(
        "kprof top  %s  %d daemon%s  %s  every %s  (q quits)\n\n", target, n, n == 1 ? "" : "s",
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", now, absl::UTCTimeZone()),
        absl::FormatDuration(interval));
    absl::StrAppendFormat(&out, "%-21s %-8s %8s %8s %9s %8s %7s  %-14s %-28s %s\n", "DAEMON",
                          "DEVICE", "JOBS/S", "FAILED/S", "DONE", "FAILED", "WORKERS", "RUNNING",
                          "QUEUED", "LEASE");
    for (size_t i = 0; i < n; ++i) {
      const std::string& daemon = farm.daemons()[i];
      if (!infos[i].ok()) {
        const absl::Status& why = infos[i].status();
        absl::StrAppendFormat(&out, "%-21s unreachable: %s\n", daemon,
                              absl::IsUnavailable(why)
                                  ? absl::StrCat("no kprofd answers (UNAVAILABLE: ",
                                                 std::string(why.message()).substr(0, 80), ")")
                                  : absl::StrCat(absl::StatusCodeToString(why.code()), ": ",
                                                 std::string(why.message()).substr(0, 100)));
        continue;
      }
      for (const kprof::v1::DeviceInfo& d : infos[i]->devices()) {
        const std::string key = daemon + " " + d.device();
        std::string rate = "-", failing = "-";
        if (const auto before = last_.find(key); before != last_.end()) {
          const double seconds = absl::ToDoubleSeconds(now - before->second.at);
          // A count that went down is a daemon restarted: no rate across that.
          const bool restarted = d.jobs_completed() < before->second.completed ||
                                 d.jobs_failed() < before->second.failed;
          if (seconds > 0 && !restarted) {
            rate =
                absl::StrFormat("%.1f", (d.jobs_completed() - before->second.completed) / seconds);
            failing = absl::StrFormat("%.1f", (d.jobs_failed() - before->second.failed) / seconds);
          }
        }
        last_[key] = {d.jobs_completed(), d.jobs_failed(), now};
        std::vector<std::string> queued;
        for (const kprof::v1::ClientQueue& q : d.queued()) {
          queued.push_back(absl::StrCat(q.client(), " ", q.jobs()));
        }
        std::string lease = "-";
        if (d.has_lease()) {
          lease = absl::StrCat(
              d.lease().holder(), " until ",
              absl::FormatTime("%H:%M:%S", absl::FromUnixMillis(d.lease().ends_unix_ms()),
                               absl::UTCTimeZone()),
              d.lease().clocks_locked() ? ", clocks locked" : "");
        }
        absl::StrAppendFormat(&out, "%-21s %-8s %8s %8s %9d %8d %7d  %-14s %-28s %s\n", daemon,
                              d.device(), rate, failing, d.jobs_completed(), d.jobs_failed(),
                              d.workers(), d.running_client().empty() ? "-" : d.running_client(),
                              queued.empty() ? "-" : absl::StrJoin(queued, ", "), lease);
      }
    }
    return out;
  }

  std::string interval_ = "1s";
  int iterations_ = 0;
  std::map<std::string, Counts> last_;  // by "daemon device"
};

}  // namespace

std::unique_ptr<Command> AddTopCommand(CLI::App& app) { return std::make_unique<TopCommand>(app); }

}  // namespace kprof::client
