// Section 4b of kprof_bench, the batch rows, and the CPU each process spends per job or call
// (--only batch-cpu, --only unary-cpu).
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "kprof/v1/kprof.pb.h"
#include "module_files.h"
#include "process_info.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {

using kprof::report::Percentile;

// --- 4b. batches ------------------------------------------------------------------------------

// `count` TimeEvaluate jobs of `function` in `module` (number 1, repeat 1) on one MeasureBatch
// stream: wall time per job.
double BatchSecondsPerJob(kprof::client::Client& client, const std::string& module,
                          const std::string& function, int count) {
  std::vector<kprof::v1::BatchJob> jobs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    kprof::v1::BatchJob& job = jobs[static_cast<size_t>(i)];
    job.set_id(absl::StrFormat("j%d", i));
    *job.mutable_time_evaluate() = TimeRequest(module, function, {});
    job.mutable_time_evaluate()->set_number(1);
    job.mutable_time_evaluate()->set_repeat(1);
  }
  int done = 0;
  const auto start = Clock::now();
  const absl::Status status = client.MeasureBatch(
      jobs, [&](const kprof::v1::BatchUpdate& u) { done += u.state() == u.DONE; }, {}, 500);
  const double seconds = Seconds(Clock::now() - start);
  if (!status.ok() || done != count) {
    Fail(absl::StrFormat("batch of %d %s jobs: %d done, %s", count, function, done,
                         status.ToString()));
  }
  return seconds / count;
}

namespace {

// Each candidate a module of its own, uploaded by the farm while earlier ones are measured.
double BatchSecondsPerCandidate(const std::string& target, const std::string& base, int count) {
  auto farm = Must(kprof::client::Farm::Connect(target), "farm");
  std::vector<kprof::v1::BatchJob> jobs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Fresh bytes at every call: a module the daemon holds already costs no store.
    static int tag = 200000;
    const std::string id = farm->AddModule(Candidate(base, 50 * 1024, tag++), "cand.so");
    kprof::v1::BatchJob& job = jobs[static_cast<size_t>(i)];
    job.set_id(absl::StrFormat("c%d", i));
    *job.mutable_time_evaluate() =
        TimeRequest(id, "vadd", {"float32[256]", "float32[256]:random", "float32[256]:random"});
    job.mutable_time_evaluate()->set_number(1);
    job.mutable_time_evaluate()->set_repeat(1);
  }
  int done = 0;
  const auto start = Clock::now();
  const absl::Status status = farm->MeasureBatch(
      jobs, [&](const kprof::v1::BatchUpdate& u) { done += u.state() == u.DONE; });
  const double seconds = Seconds(Clock::now() - start);
  if (!status.ok() || done != count) {
    Fail(absl::StrFormat("batch of %d candidates: %d done, %s", count, done, status.ToString()));
  }
  return seconds / count;
}

// CPU seconds `pid` has spent, its threads included.
double CpuSeconds(pid_t pid) { return ProcessUsage(pid).cpu; }

// CPU seconds spent so far by this process (the client), the daemon and its workers.
struct CpuSpent {
  double client = 0, daemon = 0, workers = 0;
};
CpuSpent CpuSpentBy(const kprof::testing::Daemon& daemon) {
  CpuSpent spent{CpuSeconds(getpid()), CpuSeconds(daemon.pid()), 0};
  for (const pid_t child : kprof::testing::ChildProcesses(daemon.pid())) {
    spent.workers += CpuSeconds(child);
  }
  return spent;
}

// "cpu: client .. us  daemon .. us  workers .. us": what each spent per call between the two.
std::string PerCall(const CpuSpent& before, const CpuSpent& after, int calls) {
  return absl::StrFormat("cpu: client %6.1f us  daemon %6.1f us  workers %6.1f us",
                         (after.client - before.client) * 1e6 / calls,
                         (after.daemon - before.daemon) * 1e6 / calls,
                         (after.workers - before.workers) * 1e6 / calls);
}

}  // namespace

// Rounds of 2000-job batches, each with the wall time and the CPU time the client, the daemon
// and its workers spent per job: the builtin nop, then an uploaded module's empty function.
void BatchCpu(kprof::testing::Daemon& daemon, kprof::client::Client& client,
              const std::string& base) {
  constexpr int kJobs = 2000;
  const std::string module =
      Must(client.LoadModule(
               kprof::testing::ReadFileBytes(std::string(KPROF_TEST_MODULE_DIR) + "/faults.so"),
               "faults.so"),
           "upload faults.so")
          .id();
  for (const auto& [name, function] :
       {std::pair<std::string, std::string>{"builtin", "nop"}, {module, "succeeds"}}) {
    (void)BatchSecondsPerJob(client, name, function, 200);  // the worker starts, loads it
    for (int round = 0; round < 6; ++round) {
      const CpuSpent before = CpuSpentBy(daemon);
      const double wall = BatchSecondsPerJob(client, name, function, kJobs);
      std::printf("per %s job: wall %6.1f us  %s\n", function.c_str(), wall * 1e6,
                  PerCall(before, CpuSpentBy(daemon), kJobs).c_str());
    }
  }
  constexpr int kCandidates = 200;
  for (int round = 0; round < 3; ++round) {
    static int tag = 300000;
    std::vector<std::string> modules;
    for (int i = 0; i < kCandidates; ++i) modules.push_back(Candidate(base, 50 * 1024, tag++));
    const CpuSpent before = CpuSpentBy(daemon);
    std::vector<double> seconds;
    for (const std::string& bytes : modules) {
      const auto start = Clock::now();
      Must(client.LoadModule(bytes, "cand.so"), "upload");
      seconds.push_back(Seconds(Clock::now() - start));
    }
    std::printf("per upload of 50 KB, one thread: p50 %6.1f us  %s\n",
                Percentile(seconds, 50) * 1e6,
                PerCall(before, CpuSpentBy(daemon), kCandidates).c_str());
  }
  for (int round = 0; round < 4; ++round) {
    const CpuSpent before = CpuSpentBy(daemon);
    const double wall = BatchSecondsPerCandidate(daemon.target(), base, kCandidates);
    std::printf("per candidate: wall %6.1f us  %s\n", wall * 1e6,
                PerCall(before, CpuSpentBy(daemon), kCandidates).c_str());
  }
}

// Rounds of unary calls (TimeEvaluate of nop, then health checks) with the CPU each process
// spent per call.
void UnaryCpu(kprof::testing::Daemon& daemon, const std::string& kind) {
  constexpr int kCalls = 3000;
  RawCaller caller(daemon.target());
  kprof::v1::TimeEvaluateRequest request = TimeRequest("builtin", "nop", {});
  request.set_number(1);
  request.set_repeat(1);
  const std::string job = request.SerializeAsString();
  for (int warm = 0; warm < 100; ++warm) caller.Call(kTimeEvaluate, job);
  for (int round = 0; round < 6; ++round) {
    const bool time = kind == "time" || (kind != "health" && round % 2 == 0);
    const CpuSpent before = CpuSpentBy(daemon);
    const auto calls = TimeCalls(kCalls, [&] {
      if (!caller.Call(time ? kTimeEvaluate : kHealthCheck, time ? job : "")) Fail("call failed");
    });
    std::printf("per %-12s p50 %6.1f us  %s\n", time ? "TimeEvaluate" : "health Check",
                Percentile(calls, 50) * 1e6, PerCall(before, CpuSpentBy(daemon), kCalls).c_str());
  }
}

// Wall seconds per nop job of `kprof batch` over `count` jobs, results written to a file, less
// what a batch of one job costs (the program's start and its connection).
double CliBatchSecondsPerJob(const std::string& target, int count) {
  kprof::testing::TempDir dir;
  const auto run = [&](int n) {
    const std::string jobs = NopJobs(dir.path(), n);
    const std::string results = dir.path() + "/results.jsonl";
    const auto start = Clock::now();
    Output(std::string(KPROF_PATH) + " --target " + target + " batch " + jobs + " > " + results);
    const double seconds = Seconds(Clock::now() - start);
    const std::string written = kprof::testing::ReadFileBytes(results);
    if (std::count(written.begin(), written.end(), '\n') != n) Fail("kprof batch lost lines");
    return seconds;
  };
  const double one = std::min(run(1), run(1));
  return std::max(run(count) - one, 0.0) / count;
}

// Wall seconds per nop job of the Python farm over `count` jobs, from its first job to its
// last result (the interpreter's start and the connection left out).
double PythonFarmSecondsPerJob(const std::string& target, int count) {
  const std::string script = absl::StrFormat(
      "import sys, time; sys.path.insert(0, '%s/python'); import kprof\n"
      "jobs = [{'id': 'j%%d' %% i, 'module': 'builtin', 'function': 'nop', 'number': 1, "
      "'repeat': 1} for i in range(%d)]\n"
      "with kprof.farm('%s') as farm:\n"
      "    start = time.perf_counter()\n"
      "    done = sum(1 for r in farm.batch(jobs) if r.ok)\n"
      "    print(done, (time.perf_counter() - start) / len(jobs))\n",
      KPROF_BUILD_DIR, count, target);
  const auto [done, seconds] = PythonDoneAndSeconds(script);
  if (done != count) Fail(absl::StrFormat("Python farm: %d of %d jobs done", done, count));
  return seconds;
}

namespace {

// A batch's cost per job whether it is short or long: through `kprof batch` (as users run it)
// and the Python farm. Short and long take turns, three times, and the fastest of each counts:
// a slow spell of this shared machine falls on both.
void LongBatches(const std::string& target, double health_p50) {
  double cli_short = 1e9, cli_long = 1e9, py_short = 1e9, py_long = 1e9;
  for (int round = 0; round < 3; ++round) {
    cli_short = std::min(cli_short, CliBatchSecondsPerJob(target, 2000));
    cli_long = std::min(cli_long, CliBatchSecondsPerJob(target, 20000));
    py_short = std::min(py_short, PythonFarmSecondsPerJob(target, 1000));
    py_long = std::min(py_long, PythonFarmSecondsPerJob(target, 5000));
  }
  Add("batch", "kprof batch per nop job, 20000 jobs to a file", Us(cli_long),
      "health Check " + Us(health_p50), cli_long / health_p50, "");
  Add("batch", "  per job, 20000 jobs against 2000", Us(cli_long), "2000 jobs " + Us(cli_short),
      cli_long / cli_short, "<= 1.25: " + Met(cli_long / cli_short <= 1.25));
  Add("batch", "Python farm per nop job, 5000 jobs against 1000", Us(py_long),
      "1000 jobs " + Us(py_short), py_long / py_short,
      "<= 1.25: " + Met(py_long / py_short <= 1.25));
}

}  // namespace

void Batches(const std::string& target, kprof::client::Client& client, const std::string& base,
             const std::string& faults) {
  RawCaller caller(target);
  const auto health = TimeCalls(500, [&] { caller.Call(kHealthCheck, ""); });
  const double health_p50 = Percentile(health, 50);
  (void)BatchSecondsPerJob(client, "builtin", "nop", 200);  // warm: the worker starts
  const double nop = BatchSecondsPerJob(client, "builtin", "nop", 2000);
  Add("batch", "MeasureBatch per nop job, 2000 on one stream", Us(nop),
      "health Check " + Us(health_p50), nop / health_p50,
      "<= 0.15: " + Met(nop / health_p50 <= 0.15));
  const std::string module = Must(client.LoadModule(faults, "faults.so"), "upload faults.so").id();
  (void)BatchSecondsPerJob(client, module, "succeeds", 200);
  const double empty = BatchSecondsPerJob(client, module, "succeeds", 2000);
  Add("batch", "  the same, an uploaded module's empty function", Us(empty),
      "health Check " + Us(health_p50), empty / health_p50,
      "<= 0.15: " + Met(empty / health_p50 <= 0.15));
  const double candidate = BatchSecondsPerCandidate(target, base, 200);
  Add("batch", "per candidate: 200 distinct 50 KB modules, each timed once", Us(candidate),
      "health Check " + Us(health_p50), candidate / health_p50,
      "<= 3: " + Met(candidate / health_p50 <= 3));
  std::vector<double> execution;
  kprof::v1::TimeEvaluateRequest request = TimeRequest("builtin", "nop", {});
  request.set_number(1);
  request.set_repeat(1);
  for (int i = 0; i < 1000; ++i) {
    execution.push_back(Must(client.TimeEvaluate(request), "nop").timing().execution_seconds());
  }
  const double ping = ProcessPingPong();
  Add("batch", "front to worker and back per unary job (p50)", Us(Percentile(execution, 50)),
      "two-process 1 KiB ping-pong " + Us(ping), Percentile(execution, 50) / ping,
      "<= 1.5: " + Met(Percentile(execution, 50) / ping <= 1.5));
  LongBatches(target, health_p50);
}

}  // namespace kprof::bench
