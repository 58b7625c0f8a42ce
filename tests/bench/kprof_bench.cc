// kprof_bench: the benchmark suite of `make bench`. Every figure is a ratio against a reference
// measured in the same run, on the same machine, because these machines are shared and noisy:
//
//   1 accuracy     kernels timed remotely through kprofd against Google Benchmark in-process,
//                  one shared object on the same placement (ratio of medians; goal 1.00 ± 0.01,
//                  ± 0.03 for the memory-bound copy); the placement sweep of matmul and where
//                  a randomized layout's median falls in it
//   2 overhead     a minimal TimeEvaluate against a bare grpc.health.v1 Check on the same daemon,
//                  p50 and p99, unpinned and with client and daemon on one core (goal p50 ≤ 1.3)
//   3 candidate    an autotuner's cost per candidate: HasModule, upload 50 KB, TimeEvaluate
//                  (goal p50 under 1 ms)
//   4 throughput   small jobs per second from 8 clients against health checks per second; the
//                  front-to-worker round trip per job against a socketpair ping-pong
//   5 upload       MB/s of a 64 MiB upload against a raw streaming RPC of the same bytes; the
//                  second upload of the same bytes against hashing them
//   6 footprint    start to accepting calls against running `kprofd --version`; daemon RSS
//                  idle against the `kprof` client waiting on a call (goal under 20 MB), after a
//                  job with its worker, and holding 100 modules; installed files against the shared
//                  libraries they load
//   7 timer floor  time per call of an empty function with number = 10^6 against one
//                  clock_gettime
//   8 checks       checked and strictly checked kernels and batches against unchecked ones
//   9 metrics      a 200 us spin's median under a flood of /metrics scrapes against unscraped
//
// It prints a table and, with --markdown FILE, writes it with the machine and the command;
// --only footprint runs section 6 alone, --only batch the batch rows, and --only batch-cpu times
// 2000-job nop batches over and over with the CPU each process spends per job, --only unary-cpu
// the same for unary TimeEvaluate(nop) calls and health checks (for profiling), --only accuracy
// the accuracy rows, --only checks the checking rows, --only strict the strict ones and
// --only metrics the scrape flood's, --only tvm the rows against TVM's RPC.
// It fails nothing: a missed goal is reported as such.
// The sections are declared in bench_sections.h; what they share is in bench_support.h.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "core/host/environment.h"
#include "daemon.h"
#include "kprof/config.h"
#include "module_files.h"
#include "report/metric.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {
namespace {

// --- the report -------------------------------------------------------------------------------

std::string Field(const kprof::report::MetricMap& m, const char* key) {
  const auto it = m.find(key);
  return it == m.end() ? "?" : kprof::report::FormatForTable(it->second);
}

// Hot paths found with perf and strace where goals were missed, what fixing them did, and why
// the goals still missed are: tests/bench/findings.md, kept apart from the generated table so
// that a new run does not erase it, and appended to it.
std::string Findings() {
  const std::string text =
      kprof::testing::ReadFileBytes(std::string(KPROF_SOURCE_DIR) + "/tests/bench/findings.md");
  if (text.empty()) Fail("cannot read tests/bench/findings.md");
  return "\n" + text;
}

void WriteMarkdown(const std::string& path, const std::string& started) {
  const kprof::report::MetricMap env = kprof::core::EnvironmentManifest();
  std::ofstream out(path);
  out << "# Benchmarks\n\n"
      << "Every figure is a ratio against a reference measured in the same run on the same "
         "machine, since the machines these run on are shared and noisy. Regenerate with "
         "`make bench` (it rewrites this file); the program is `tests/bench/kprof_bench.cc`.\n\n"
      << "- Machine: " << Field(env, "CPU model") << ", " << Field(env, "CPUs online")
      << " CPUs online, " << Field(env, "Kernel") << "\n"
      << "- Governor " << Field(env, "CPU governor") << ", SMT " << Field(env, "SMT")
      << ", load average at the end " << Field(env, "Load average") << "\n"
      << "- kprofd " << KPROF_VERSION << " (" << KPROF_BUILD << "), run " << started << "\n\n"
      << "| section | figure | value | reference | ratio | goal |\n"
      << "| --- | --- | --- | --- | --- | --- |\n";
  for (const Row& r : rows) {
    out << "| " << r.section << " | " << r.figure << " | " << r.value << " | " << r.reference
        << " | " << r.ratio << " | " << r.goal << " |\n";
  }
  out << "\nReading the table:\n\n"
      << "- **accuracy**: kprofd's median seconds per call over Google Benchmark's median of "
         "its repetitions, for the same kernel of one shared object (tests/modules/"
         "bench_kernels.c, the builtins' source) on arguments made and placed the same way "
         "(their offsets past a page boundary in the figure), 101 repetitions each, "
         "interleaved; the builtin row runs each program's own compiled copy (no goal).\n"
      << "- **placement**: the same matmul timed by kprofd with its three tensors at 12 "
         "placements (offsets of C, A and B past a page boundary), slowest against fastest; "
         "then with `randomize_layout` (12 layouts of 3 repeats), its median against the "
         "sweep's range.\n"
      << "- **overhead**: a TimeEvaluate of `nop` (number 1, repeat 1) over a bare "
         "grpc.health.v1 Check on the same daemon and channel, interleaved in blocks of 100, "
         "5 ms apart so that each block starts from a quiet machine (no worker still polling); "
         "\"one core\" runs client, daemon and worker on a single CPU, where kprofd does not "
         "busy-poll.\n"
      << "- **candidate**: what an autotuner pays per candidate: the client hashes 50 KB, asks "
         "HasModule, uploads, then times `vadd` once.\n"
      << "- **throughput**: 8 client threads, each with its own channel, for 2 s.\n"
      << "- **batch**: wall time over count for 2000 jobs (number 1, repeat 1) on one "
         "MeasureBatch stream of the C++ client, 500 jobs a message, against the health Check "
         "p50 of the same run; per candidate: a Farm uploads each of 200 distinct 50 KB modules "
         "while earlier ones are measured, each timed once; the front-to-worker round trip of a "
         "unary nop job (its execution time, from the job leaving the queue to its answer) "
         "against a 1 KiB ping-pong between two processes over a socketpair.\n"
      << "- **breakdown**: where a job's time goes on the paths users run: the CPU the "
         "client, the daemon and its workers spent per job (per candidate, per call), from each "
         "thread's run time (/proc/PID/task/*/schedstat; the client's from getrusage when it is "
         "a program this one waits for), and their wake-ups (voluntary context switches), "
         "beyond a run of one job (the program's start and connection left out), the fastest "
         "of three rounds; the ratio is the CPUs kept busy on average.\n"
      << "- **upload**: the same client stream (the client hashes the bytes for the header "
         "first) to kprofd, to a server that only reads it, and to one that computes the "
         "SHA-256 of every message as it arrives (the floor for a server that checks a "
         "module's id).\n"
      << "- **footprint**: resident memory (VmRSS) of the front process, idle against the "
         "`kprof` client waiting on a call (both load gRPC and protobuf; the goal is in decimal "
         "MB), then "
         "with its CPU worker after a job, then holding 100 modules; the runtime component "
         "installed stripped against the shared libraries its programs load (ldd).\n"
      << "- **timer floor**: what the timing loop costs per call of a function that does "
         "nothing.\n"
      << "- **isolation**: what the box costs. A daemon with 24 clients (token labels), each "
         "with a worker of its own: a job right after another client's (a switch of worker "
         "processes) against one right after the same client's; a client's first job, which "
         "starts its worker; the same nop job in a daemon run as on a kernel without Landlock "
         "and seccomp (tests/support/without_sandbox.c); and the memory of the client "
         "workers.\n"
      << Findings();
}

}  // namespace
}  // namespace kprof::bench

using kprof::bench::Accuracy;
using kprof::bench::AgainstTvm;
using kprof::bench::BatchCpu;
using kprof::bench::Batches;
using kprof::bench::Breakdown;
using kprof::bench::Checks;
using kprof::bench::Fail;
using kprof::bench::Footprint;
using kprof::bench::Isolation;
using kprof::bench::kHealthCheck;
using kprof::bench::Must;
using kprof::bench::Overhead;
using kprof::bench::PerCandidate;
using kprof::bench::PlacementSweep;
using kprof::bench::PythonOverhead;
using kprof::bench::RawCaller;
using kprof::bench::ScrapeFlood;
using kprof::bench::StrictChecks;
using kprof::bench::Throughput;
using kprof::bench::TimeCalls;
using kprof::bench::TimerFloor;
using kprof::bench::UnaryCpu;
using kprof::bench::Upload;
using kprof::bench::WriteMarkdown;
using kprof::report::Percentile;

namespace {

// The parts `--only` runs alone against one daemon, by name.
using Part = std::function<void(kprof::testing::Daemon&, kprof::client::Client&,
                                const std::string& base, const std::string& kind)>;
const std::map<std::string, Part>& DaemonParts() {
  static const auto* parts = new std::map<std::string, Part>{
      {"batch",
       [](auto& d, auto& c, auto& base, auto&) {
         Batches(d.target(), c, base,
                 kprof::testing::ReadFileBytes(std::string(KPROF_TEST_MODULE_DIR) + "/faults.so"));
       }},
      {"batch-cpu", [](auto& d, auto& c, auto& base, auto&) { BatchCpu(d, c, base); }},
      {"unary-cpu", [](auto& d, auto&, auto&, auto& kind) { UnaryCpu(d, kind); }},
      {"breakdown", [](auto& d, auto& c, auto&, auto&) { Breakdown(d, c); }},
      {"overhead",
       [](auto& d, auto&, auto&, auto&) {
         Overhead(d.target(), "unpinned");
         PythonOverhead(d.target());
       }},
      {"upload", [](auto& d, auto& c, auto& base, auto&) { Upload(d.target(), c, base); }},
      {"checks",
       [](auto& d, auto& c, auto& base, auto&) {
         Checks(d.target(), c, base);
         StrictChecks(d.target(), c);
       }},
      {"strict", [](auto& d, auto& c, auto&, auto&) { StrictChecks(d.target(), c); }},
      {"tvm", [](auto& d, auto& c, auto&, auto&) { AgainstTvm(d.target(), c); }},
  };
  return *parts;
}

// The sections on a daemon of their own, one after another, every CPU free.
void Unpinned(const std::string& cache, const std::string& base) {
  kprof::testing::Daemon daemon;
  if (!daemon.Start(cache)) Fail("kprofd did not start");
  auto client = Must(kprof::client::Client::Connect(daemon.target()), "connect");
  Overhead(daemon.target(), "unpinned");
  PythonOverhead(daemon.target());
  RawCaller caller(daemon.target());
  const auto health = TimeCalls(500, [&] { caller.Call(kHealthCheck, ""); });
  PerCandidate(*client, base, Percentile(health, 50));
  Throughput(daemon.target());
  Batches(daemon.target(), *client, base,
          kprof::testing::ReadFileBytes(std::string(KPROF_TEST_MODULE_DIR) + "/faults.so"));
  AgainstTvm(daemon.target(), *client);
  Breakdown(daemon, *client);
  Upload(daemon.target(), *client, base);
  TimerFloor(*client);
  Checks(daemon.target(), *client, base);
  StrictChecks(daemon.target(), *client);
  ScrapeFlood();
}

// Client, daemon and worker on one CPU: the daemon inherits this process's affinity. The
// accuracy figures are taken here too, so both sides run on the same, equally warm CPU.
void OneCore(const std::string& cache, bool accuracy_only) {
  cpu_set_t all, one;
  sched_getaffinity(0, sizeof all, &all);
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  sched_setaffinity(0, sizeof one, &one);
  kprof::testing::Daemon daemon;
  if (!daemon.Start(cache)) Fail("kprofd did not start");
  auto client = Must(kprof::client::Client::Connect(daemon.target()), "connect");
  Accuracy(*client);
  PlacementSweep(*client);
  if (!accuracy_only) Overhead(daemon.target(), "one core");
  daemon.Stop();
  sched_setaffinity(0, sizeof all, &all);
}

// The names --only takes, for its help and its error.
std::string PartNames() {
  std::vector<std::string> names = {"footprint", "metrics", "accuracy"};
  for (const auto& [name, part] : DaemonParts()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

}  // namespace

int main(int argc, char** argv) {
  std::string markdown;
  std::string only;
  std::string kind;  // --only unary-cpu: "time" or "health" alone
  bool help = false;
  kprof::base::CommandLine cl("kprof_bench");
  cl.AddString("markdown", &markdown, "FILE", "also write the table, the machine and the command");
  cl.AddString("only", &only, "PART", "run one part: " + PartNames());
  cl.AddString("calls", &kind, "KIND", "with --only unary-cpu: time or health alone");
  cl.AddFlag("help", &help, "print this help and exit");
  std::vector<std::string> positional;
  if (const absl::Status parsed =
          cl.Parse(std::vector<std::string>(argv + 1, argv + argc), &positional);
      !parsed.ok() || !positional.empty()) {
    std::fprintf(stderr, "kprof_bench: %s\n",
                 parsed.ok() ? ("unexpected argument '" + positional[0] + "'").c_str()
                             : std::string(parsed.message()).c_str());
    std::fprintf(stderr, "usage: kprof_bench [--markdown FILE | --only PART [--calls KIND]]\n");
    return 2;
  }
  if (help) {
    std::printf(
        "usage: kprof_bench [--markdown FILE | --only PART [--calls KIND]]\n\n"
        "The benchmark suite of `make bench`: every figure a ratio against a reference\n"
        "measured in the same run.\n\noptions:\n%s",
        cl.Help().c_str());
    return 0;
  }
  const bool daemon_part = DaemonParts().count(only) > 0;
  if (!only.empty() && !daemon_part && only != "footprint" && only != "metrics" &&
      only != "accuracy") {
    Fail("--only takes one of " + PartNames());
  }
  if (!only.empty() && !markdown.empty()) Fail("--only runs part of the suite: no --markdown");
  int benchmark_argc = 1;
  benchmark::Initialize(&benchmark_argc, argv);
  const std::string started =
      absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone());
  const std::string base =
      kprof::testing::ReadFileBytes(std::string(KPROF_TEST_MODULE_DIR) + "/vector_add.so");
  if (base.empty()) Fail("cannot read vector_add.so");

  std::printf("%-12s %-46s %-18s %-30s %8s  %s\n", "section", "figure", "value", "reference",
              "ratio", "goal");
  kprof::testing::TempDir dir;
  if (only == "metrics") {
    ScrapeFlood();
    return 0;
  }
  if (daemon_part) {
    kprof::testing::Daemon daemon;
    if (!daemon.Start(dir.path() + "/cache")) Fail("kprofd did not start");
    auto client = Must(kprof::client::Client::Connect(daemon.target()), "connect");
    DaemonParts().at(only)(daemon, *client, base, kind);
    return 0;
  }
  if (only.empty()) Unpinned(dir.path() + "/cache", base);
  if (only.empty() || only == "accuracy") OneCore(dir.path() + "/pinned", only == "accuracy");
  if (only == "accuracy") return 0;
  Footprint(base);
  Isolation();
  if (!markdown.empty()) {
    WriteMarkdown(markdown, started);
    std::printf("\nwrote %s\n", markdown.c_str());
  }
  return 0;
}
