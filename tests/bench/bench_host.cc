// Sections 6 and 7 of kprof_bench and the isolation rows: what the daemon costs its host
// (start, memory, installed size, the sandbox) and the floor of its timing loop.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "process_info.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {

using kprof::report::Median;

// --- 6. footprint -----------------------------------------------------------------------------

namespace {

double RssMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024;
  }
  return NAN;
}

// Seconds `argv` takes to run to its end.
double ExecSeconds(const std::vector<std::string>& argv_strings) {
  std::vector<char*> argv;
  for (const std::string& s : argv_strings) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    Fail("running " + argv_strings[0] + " failed");
  return Seconds(Clock::now() - start);
}

// The resident memory of the `kprof` client waiting on a call that is never answered (to a
// socket that listens and never speaks): a gRPC program that loads what the daemon loads and
// does nothing. Read while it waits, since a child's ru_maxrss counts its parent's pages from
// before the exec.
double WaitingClientRssMiB() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener, 4) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Fail("cannot listen on loopback");
  }
  const std::string target = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl(KPROF_PATH, KPROF_PATH, "info", "--target", target.c_str(), nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double rss = RssMiB(pid);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(listener);
  if (std::isnan(rss)) Fail("kprof info ended early");
  return rss;
}

double MiB(uintmax_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// What `cmake --install --component runtime --strip` (the kprofd package) puts on a host against
// the shared libraries its programs load (the Debian packages they depend on, resolved by ldd).
void InstalledSize() {
  kprof::testing::TempDir prefix;
  Output("cmake --install " KPROF_BUILD_DIR " --component runtime --strip --prefix " +
         prefix.path() + " 2>&1");
  uintmax_t programs = 0, total = 0;
  std::string binaries;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(prefix.path())) {
    if (!entry.is_regular_file() || entry.is_symlink()) continue;
    total += entry.file_size();
    const std::string name = entry.path().filename();
    if (name == "kprofd" || name == "kprofd-worker" || name == "kprof") {
      programs += entry.file_size();
      binaries += " " + entry.path().string();
    }
  }
  uintmax_t libraries = 0;
  std::set<std::string> seen;
  std::istringstream ldd(Output("ldd" + binaries));
  std::string line;
  while (std::getline(ldd, line)) {
    const size_t arrow = line.find("=> /");
    if (arrow == std::string::npos) continue;
    const std::string path = line.substr(arrow + 3, line.find(" (", arrow) - arrow - 3);
    std::error_code error;
    const std::string real = std::filesystem::canonical(path, error);
    if (error || !seen.insert(real).second) continue;
    const uintmax_t size = std::filesystem::file_size(real, error);
    if (!error) libraries += size;
  }
  Add("footprint", "installed runtime, stripped (programs)",
      absl::StrFormat("%.1f MiB (%.1f)", MiB(total), MiB(programs)),
      absl::StrFormat("%zu shared libraries %.1f MiB", seen.size(), MiB(libraries)),
      static_cast<double>(total) / static_cast<double>(libraries));
}

}  // namespace

void Footprint(const std::string& base) {
  kprof::testing::TempDir dir;
  std::vector<double> starts;
  for (int i = 0; i < 5; ++i) {
    kprof::testing::Daemon daemon;
    const auto start = Clock::now();
    if (!daemon.Start(dir.path() + "/start" + std::to_string(i))) Fail("kprofd did not start");
    starts.push_back(Seconds(Clock::now() - start));
  }
  std::vector<double> execs;
  for (int i = 0; i < 5; ++i) execs.push_back(ExecSeconds({KPROFD_PATH, "--version"}));
  const double client_rss = WaitingClientRssMiB();
  Add("footprint", "start to accepting calls (10 ms polls)", Ms(Median(starts)),
      "kprofd --version " + Ms(Median(execs)), Median(starts) / Median(execs));

  // Idle: started, then after the first GetInfo (gRPC's first call). The reference is the
  // gRPC client `kprof` waiting on a call, which loads the same libraries and does nothing.
  kprof::testing::Daemon daemon;
  if (!daemon.Start(dir.path() + "/rss")) Fail("kprofd did not start");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double started = RssMiB(daemon.pid());
  auto client = Must(kprof::client::Client::Connect(daemon.target()), "connect");
  Must(client->Info(), "info");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double idle = RssMiB(daemon.pid());
  const double idle_mb = idle * (1 << 20) / 1e6;
  Add("footprint", "daemon RSS idle, after the first GetInfo", absl::StrFormat("%.1f MiB", idle),
      absl::StrFormat("kprof waiting on a call %.1f MiB", client_rss), idle / client_rss,
      absl::StrFormat("idle < 20 MB: %s (%.1f MB; %.1f MiB at start)", Met(idle_mb < 20), idle_mb,
                      started));
  // A job starts the CPU's worker, which stays for the next one.
  Must(client->TimeEvaluate(TimeRequest("builtin", "nop", {})), "nop");
  double worker = 0;
  for (const pid_t child : kprof::testing::ChildProcesses(daemon.pid())) {
    if (const double rss = RssMiB(child); !std::isnan(rss)) worker += rss;
  }
  Add("footprint", "daemon + its CPU worker after a job",
      absl::StrFormat("%.1f MiB", RssMiB(daemon.pid()) + worker),
      absl::StrFormat("daemon idle %.1f MiB", idle), (RssMiB(daemon.pid()) + worker) / idle);
  for (int i = 0; i < 100; ++i) {
    Must(client->LoadModule(Candidate(base, 50 * 1024, 200000 + i), "m.so"), "module");
  }
  const double held = RssMiB(daemon.pid());
  Add("footprint", "daemon RSS holding 100 modules", absl::StrFormat("%.1f MiB", held),
      absl::StrFormat("idle %.1f MiB", idle), held / idle);
  InstalledSize();
}

// --- isolation: what the box costs ------------------------------------------------------------

namespace {

// A daemon whose token file names `count` clients, one connection each.
struct Clients {
  kprof::testing::TempDir dir;
  kprof::testing::Daemon daemon;
  std::vector<std::unique_ptr<kprof::client::Client>> clients;

  Clients(int count, bool sandboxed) {
    std::ofstream tokens(dir.path() + "/tokens");
    for (int i = 0; i < count; ++i) tokens << "token-" << i << " client-" << i << "\n";
    tokens.close();
    if (!sandboxed) daemon.set_launcher({KPROF_WITHOUT_SANDBOX_PATH});
    if (!daemon.Start(dir.path() + "/cache",
                      {"--token-file", dir.path() + "/tokens", "--workers-per-device", "64"})) {
      Fail("kprofd did not start");
    }
    for (int i = 0; i < count; ++i) {
      kprof::client::ClientOptions options;
      options.bearer_token = "token-" + std::to_string(i);
      clients.push_back(Must(kprof::client::Client::Connect(daemon.target(), options), "connect"));
    }
  }

  double Nop(int client) {
    const auto start = Clock::now();
    Must(clients[client]->TimeEvaluate(TimeRequest("builtin", "nop", {})), "nop");
    return Seconds(Clock::now() - start);
  }
};

}  // namespace

void Isolation() {
  constexpr int kClients = 24;
  Clients box(kClients, true);
  Clients bare(1, false);  // no Landlock, no seccomp filter: as on a kernel without them
  for (int i = 0; i < 30; ++i) {
    box.Nop(0);
    box.Nop(1);
    bare.Nop(0);
  }
  std::vector<double> same, switched, unsandboxed, first;
  for (int i = 0; i < 300; ++i) {
    same.push_back(box.Nop(0));
    switched.push_back(box.Nop(1));  // after client 0's job: the other client's worker
    unsandboxed.push_back(bare.Nop(0));
  }
  for (int c = 2; c < kClients; ++c) first.push_back(box.Nop(c));  // each starts its worker
  Add("isolation", "TimeEvaluate(nop) p50 after another client's job", Us(Median(switched)),
      "after the same client's " + Us(Median(same)), Median(switched) / Median(same));
  Add("isolation", "a client's first job (its worker starts), p50", Ms(Median(first)),
      "its next " + Us(Median(same)), Median(first) / Median(same));
  Add("isolation", "TimeEvaluate(nop) p50, Landlock + seccomp", Us(Median(same)),
      "without either " + Us(Median(unsandboxed)), Median(same) / Median(unsandboxed));
  double workers = 0;
  const auto children = kprof::testing::ChildProcesses(box.daemon.pid());
  for (const pid_t child : children) {
    if (const double rss = RssMiB(child); !std::isnan(rss)) workers += rss;
  }
  Add("isolation", absl::StrFormat("RSS of %zu client workers (one per client)", children.size()),
      absl::StrFormat("%.1f MiB", workers),
      absl::StrFormat("daemon %.1f MiB", RssMiB(box.daemon.pid())),
      workers / RssMiB(box.daemon.pid()));
}

// --- 7. timer floor ---------------------------------------------------------------------------

void TimerFloor(kprof::client::Client& client) {
  auto request = TimeRequest("builtin", "nop", {});
  request.set_number(1'000'000);
  request.set_repeat(5);
  const double per_call = Must(client.TimeEvaluate(request), "nop x 10^6").statistics().median();
  constexpr int kReads = 1'000'000;
  timespec t{};
  const auto start = Clock::now();
  for (int i = 0; i < kReads; ++i) clock_gettime(CLOCK_MONOTONIC, &t);
  const double clock_read = Seconds(Clock::now() - start) / kReads;
  Add("timer floor", "nop per call, number = 10^6", absl::StrFormat("%.2f ns", per_call * 1e9),
      absl::StrFormat("clock_gettime %.2f ns", clock_read * 1e9), per_call / clock_read);
}

}  // namespace kprof::bench
