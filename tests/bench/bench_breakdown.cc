// Section 4d of kprof_bench: where a job's time goes on the paths users run. For each path, the
// CPU the client, the daemon and its workers spend per job (or per candidate, or per call), and
// their wake-ups (voluntary context switches: each is a sleep the process woke from), beside
// the path's wall time per job.
#include <sys/resource.h>
#include <sys/types.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "kprof/v1/kprof.pb.h"
#include "process_info.h"
#include "temp_dir.h"

namespace kprof::bench {
namespace {

// This process's children that were waited for (a command run through Output): CPU and
// voluntary switches, from getrusage.
Usage ChildrenUsage() {
  rusage r{};
  getrusage(RUSAGE_CHILDREN, &r);
  const auto seconds = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return {seconds(r.ru_utime) + seconds(r.ru_stime), static_cast<double>(r.ru_nvcsw)};
}

// The three sides of a path at one moment, and the wall clock.
struct Snapshot {
  Usage client, daemon, workers;
  Clock::time_point when;
};

// `in_process`: the client is this process (the C++ client library); otherwise a command this
// process waits for.
Snapshot Take(const kprof::testing::Daemon& daemon, bool in_process) {
  Snapshot s{in_process ? ProcessUsage(getpid()) : ChildrenUsage(),
             ProcessUsage(daemon.pid()),
             {},
             Clock::now()};
  for (const pid_t worker : kprof::testing::ChildProcesses(daemon.pid())) {
    s.workers += ProcessUsage(worker);
  }
  return s;
}

// What one run of `count` jobs costs per job beyond a run of one (the program's start, its
// connection, the interpreter's imports), the best of three rounds by wall time. `prepare(n)`
// makes the jobs of a run of n (untimed) and gives back what runs them.
struct PerJob {
  double wall = 0;
  Usage client, daemon, workers;
};
using Prepare = std::function<std::function<void()>(int)>;
PerJob Measure(const kprof::testing::Daemon& daemon, bool in_process, int count,
               const Prepare& prepare) {
  const auto one = [&](int n) {
    const std::function<void()> run = prepare(n);
    const Snapshot before = Take(daemon, in_process);
    run();
    const Snapshot after = Take(daemon, in_process);
    return PerJob{Seconds(after.when - before.when), after.client - before.client,
                  after.daemon - before.daemon, after.workers - before.workers};
  };
  PerJob best;
  best.wall = 1e9;
  for (int round = 0; round < 3; ++round) {
    const PerJob base = one(1), many = one(count);
    if (many.wall - base.wall >= best.wall * (count - 1)) continue;
    const double n = count - 1;
    best = {
        (many.wall - base.wall) / n,
        {(many.client.cpu - base.client.cpu) / n, (many.client.wakeups - base.client.wakeups) / n},
        {(many.daemon.cpu - base.daemon.cpu) / n, (many.daemon.wakeups - base.daemon.wakeups) / n},
        {(many.workers.cpu - base.workers.cpu) / n,
         (many.workers.wakeups - base.workers.wakeups) / n}};
  }
  return best;
}

// Two rows for a path: the CPU of each side against the wall time, and the wake-ups.
void AddRows(const std::string& path, const std::string& unit, const PerJob& p) {
  const double cpu = p.client.cpu + p.daemon.cpu + p.workers.cpu;
  Add("breakdown", path,
      absl::StrFormat("client %s, daemon %s, worker %s", Us(p.client.cpu), Us(p.daemon.cpu),
                      Us(p.workers.cpu)),
      absl::StrFormat("wall %s a %s", Us(p.wall), unit), cpu / p.wall, "CPU / wall");
  Add("breakdown", "  wake-ups a " + unit,
      absl::StrFormat("client %.2f, daemon %.2f, worker %.2f", p.client.wakeups, p.daemon.wakeups,
                      p.workers.wakeups),
      "", p.client.wakeups + p.daemon.wakeups + p.workers.wakeups, "in all");
}

// `make(dir, n)`: a job file of n jobs in dir; what runs it through `kprof batch` and through
// the Python farm.
Prepare ByCli(const std::string& target, std::function<std::string(const std::string&, int)> make,
              std::deque<kprof::testing::TempDir>* dirs) {
  return [=](int n) -> std::function<void()> {
    const std::string jobs = make(dirs->emplace_back().path(), n);
    return [=] { (void)CliBatch(target, jobs, n); };
  };
}
Prepare ByPython(const std::string& target,
                 std::function<std::string(const std::string&, int)> make,
                 std::deque<kprof::testing::TempDir>* dirs) {
  return [=](int n) -> std::function<void()> {
    const std::string jobs = make(dirs->emplace_back().path(), n);
    return [=] { (void)PythonBatch(target, jobs, n); };
  };
}

}  // namespace

void Breakdown(const kprof::testing::Daemon& daemon, kprof::client::Client& client) {
  const std::string target = daemon.target();
  std::deque<kprof::testing::TempDir> dirs;
  AddRows("kprof batch, per nop job (2000)", "job",
          Measure(daemon, false, 2000, ByCli(target, NopJobs, &dirs)));
  AddRows("Python farm, per nop job (1000)", "job",
          Measure(daemon, false, 1000, ByPython(target, NopJobs, &dirs)));
  AddRows("C++ client MeasureBatch, per nop job (2000)", "job",
          Measure(daemon, true, 2000, [&](int n) -> std::function<void()> {
            return [&client, n] { (void)BatchSecondsPerJob(client, "builtin", "nop", n); };
          }));
  AddRows("kprof batch, per distinct 50 KB candidate (200)", "candidate",
          Measure(daemon, false, 200, ByCli(target, VaddCandidates, &dirs)));
  AddRows("Python farm, per distinct 50 KB candidate (200)", "candidate",
          Measure(daemon, false, 200, ByPython(target, VaddCandidates, &dirs)));
  RawCaller caller(target);
  kprof::v1::TimeEvaluateRequest nop = TimeRequest("builtin", "nop", {});
  nop.set_number(1);
  nop.set_repeat(1);
  struct Unary {
    const char* method;
    std::string request;
    const char* name;
  };
  for (const Unary& unary :
       {Unary{kTimeEvaluate, nop.SerializeAsString(), "unary TimeEvaluate(nop), C++, per call"},
        Unary{kHealthCheck, "", "  health Check, C++, per call"}}) {
    AddRows(unary.name, "call", Measure(daemon, true, 3000, [&](int n) -> std::function<void()> {
              return [&, n] {
                for (int i = 0; i < n; ++i) {
                  if (!caller.Call(unary.method, unary.request)) {
                    Fail(std::string(unary.name) + " failed");
                  }
                }
              };
            }));
  }
}

}  // namespace kprof::bench
