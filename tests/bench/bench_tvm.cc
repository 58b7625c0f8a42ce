// 4c: kprofd against TVM's RPC, on the paths users run, each ratio from one run of both.
//
// The anchor (../shared/anchors/tvm-rpc-anchor.tar.gz: TVM's C++ RPC server and a client that
// times runtime.RPCTimeEvaluator) is unpacked into the build tree and run between kprofd's
// figures, three rounds; each row is the median of the three rounds' ratios. Without the
// anchor the rows say so and are skipped.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "temp_dir.h"

namespace kprof::bench {
namespace {

constexpr int kCandidates = 200;

std::string AnchorArchive() {
  return std::string(KPROF_SOURCE_DIR) + "/../shared/anchors/tvm-rpc-anchor.tar.gz";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The anchor's run_bench.sh, unpacked once into the build tree.
std::string AnchorScript() {
  const std::string dir = std::string(KPROF_BUILD_DIR) + "/tvm-anchor";
  if (!Exists(dir + "/run_bench.sh")) {
    Output(absl::StrCat("mkdir -p ", dir, " && tar -xzf ", AnchorArchive(), " -C ", dir));
  }
  return dir + "/run_bench.sh";
}

// One run of the anchor: each measurement's p50 in seconds (A_call: a remote time evaluation of
// nop; C_persist: a fresh 50 KB module uploaded, loaded and timed once, one session).
std::map<std::string, double> RunAnchor() {
  kprof::testing::TempDir out;
  Output(absl::StrCat("ONLY=A_call,C_persist ITERS=3000 WARMUP=300 CANDS=150 PORT=19290 ",
                      AnchorScript(), " unpinned ", out.path(), " > /dev/null 2>&1"));
  std::map<std::string, double> p50;
  std::ifstream csv(out.path() + "/results.csv");
  std::string line;
  std::getline(csv, line);  // tag,measurement,n,p50_us,...
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    double us = 0;
    if (cells.size() > 3 && absl::SimpleAtod(cells[3], &us)) p50[cells[1]] = us * 1e-6;
  }
  for (const char* name : {"A_call", "C_persist"}) {
    if (p50.count(name) == 0) Fail(absl::StrCat("the TVM anchor gave no ", name));
  }
  return p50;
}

double Median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string CandidateJobs(const std::string& dir, const std::string& module,
                          const std::string& function, const std::string& args, int repeat,
                          int count) {
  static int tag = 700000;
  const std::string base = kprof::testing::ReadFileBytes(kprof::testing::TestModulePath(module));
  const std::string jobs = dir + "/candidates.jsonl";
  std::ofstream out(jobs);
  for (int i = 0; i < count; ++i) {
    const std::string path = absl::StrFormat("%s/cand%d.so", dir, i);
    std::ofstream(path, std::ios::binary) << Candidate(base, 50 * 1024, tag++);
    out << absl::StrFormat(
               R"({"id": "c%d", "module": "%s", "function": "%s", "args": %s, "number": 1, "repeat": %d})",
               i, path, function, args, repeat)
        << "\n";
  }
  return jobs;
}

BatchTimes CliBatch(const std::string& target, const std::string& jobs, int count) {
  const auto start = Clock::now();
  const std::string out =
      Output(std::string(KPROF_PATH) + " --target " + target + " batch " + jobs);
  const double seconds = Seconds(Clock::now() - start);
  BatchTimes times{seconds, 0, 0};
  int done = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json result = nlohmann::json::parse(line);
    if (result.value("status", "") != "OK") Fail("kprof batch: " + line.substr(0, 300));
    for (const double s : result["results"]) times.timed += s;
    times.execution += result["execution_seconds"].get<double>();
    ++done;
  }
  if (done != count) Fail(absl::StrFormat("kprof batch: %d of %d candidates", done, count));
  return times;
}

BatchTimes PythonBatch(const std::string& target, const std::string& jobs, int count) {
  const std::string script = absl::StrFormat(
      "import json, sys, time; sys.path.insert(0, '%s/python'); import kprof\n"
      "jobs = [json.loads(l) for l in open('%s')]\n"
      "with kprof.farm('%s') as farm:\n"
      "    start = time.perf_counter()\n"
      "    results = [r for r in farm.batch(jobs)]\n"
      "    seconds = time.perf_counter() - start\n"
      "    timed = sum(sum(r.result.results) for r in results if r.ok)\n"
      "    ran = sum(r.result.raw.timing.execution_seconds for r in results if r.ok)\n"
      "    print(sum(1 for r in results if r.ok), seconds, timed, ran)\n",
      KPROF_BUILD_DIR, jobs, target);
  std::istringstream out(PythonOutput(script));
  int done = 0;
  BatchTimes times;
  out >> done >> times.wall >> times.timed >> times.execution;
  if (done != count) Fail(absl::StrFormat("Python farm: %d of %d candidates", done, count));
  return times;
}

std::string VaddCandidates(const std::string& dir, int count) {
  return CandidateJobs(dir, "vector_add", "vadd",
                       R"(["float32[256]", "float32[256]:random", "float32[256]:random"])", 1,
                       count);
}

void AgainstTvm(const std::string& target, kprof::client::Client& client) {
  if (!Exists(AnchorArchive())) {
    Add("tvm", "against TVM's RPC: skipped", "-", "no " + AnchorArchive(), 0, "skipped");
    return;
  }
  std::vector<double> cli, cpp, python, candidate, cli_duty, python_duty, cli_busy, python_busy;
  std::map<std::string, std::vector<double>> tvm;
  for (int round = 0; round < 3; ++round) {
    const std::map<std::string, double> anchor = RunAnchor();
    for (const auto& [name, seconds] : anchor) tvm[name].push_back(seconds);
    cli.push_back(CliBatchSecondsPerJob(target, 2000) / anchor.at("A_call"));
    cpp.push_back(BatchSecondsPerJob(client, "builtin", "nop", 2000) / anchor.at("A_call"));
    python.push_back(PythonFarmSecondsPerJob(target, 1000) / anchor.at("A_call"));
    kprof::testing::TempDir dir;
    const BatchTimes vadds = CliBatch(target, VaddCandidates(dir.path(), kCandidates), kCandidates);
    candidate.push_back(vadds.wall / kCandidates / anchor.at("C_persist"));
    kprof::testing::TempDir spins;
    const std::string jobs = CandidateJobs(spins.path(), "jitter", "spin_stall",
                                           R"(["float64:1000", "int64:0"])", 5, kCandidates);
    const BatchTimes by_cli = CliBatch(target, jobs, kCandidates),
                     by_python = PythonBatch(target, jobs, kCandidates);
    cli_duty.push_back(by_cli.timed / by_cli.wall);
    cli_busy.push_back(by_cli.execution / by_cli.wall);
    python_duty.push_back(by_python.timed / by_python.wall);
    python_busy.push_back(by_python.execution / by_python.wall);
  }
  const std::string call = "TVM time evaluator per call " + Us(Median3(tvm["A_call"]));
  const double c = Median3(cli), p = Median3(cpp), py = Median3(python);
  Add("tvm", "kprof batch per nop job, 2000 jobs to a file", Us(c * Median3(tvm["A_call"])), call,
      c, "<= 1.0: " + Met(c <= 1.0));
  Add("tvm", "C++ client MeasureBatch per nop job", Us(p * Median3(tvm["A_call"])), call, p,
      "<= 0.5: " + Met(p <= 0.5));
  Add("tvm", "Python farm per nop job, 1000 jobs", Us(py * Median3(tvm["A_call"])), call, py,
      "<= 2.0: " + Met(py <= 2.0));
  const double k = Median3(candidate);
  Add("tvm", "per distinct 50 KB candidate, kprof batch of 200", Us(k * Median3(tvm["C_persist"])),
      "TVM upload, load, time " + Us(Median3(tvm["C_persist"])) + " (one session)", k,
      "<= 0.5: " + Met(k <= 0.5));
  const double d = Median3(cli_duty), pd = Median3(python_duty);
  Add("tvm", "device duty: 200 distinct candidates of 5 x 1 ms, kprof batch",
      absl::StrFormat("%.1f%%", d * 100), "of the batch's wall time", d,
      ">= 0.9: " + Met(d >= 0.9));
  Add("tvm", "  the same through the Python farm", absl::StrFormat("%.1f%%", pd * 100),
      "of the batch's wall time", pd, ">= 0.9: " + Met(pd >= 0.9));
  // The floor of the two rows above: each job's first call is discarded (TVM's and kprofd's
  // time evaluator alike), so 5 timed calls of 6 fill at most 5/6 of a batch.
  Add("tvm", "  ceiling: 5 timed calls of each job's 6 (the first discarded)", "83.3%",
      "of the batch's wall time", 5.0 / 6.0, "");
  const double b = Median3(cli_busy), pb = Median3(python_busy);
  Add("tvm", "  the worker busy with the jobs, kprof batch", absl::StrFormat("%.1f%%", b * 100),
      "of the batch's wall time (the rest: waiting)", b, "");
  Add("tvm", "  the same through the Python farm", absl::StrFormat("%.1f%%", pb * 100),
      "of the batch's wall time (the rest: waiting)", pb, "");
}

}  // namespace kprof::bench
