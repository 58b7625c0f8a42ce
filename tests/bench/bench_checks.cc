// Section 8 of kprof_bench: what checking answers costs. An honest kernel's median with a
// reference check against without, rounds interleaved; and a batch of 200 distinct candidates
// against one reference against the same batch unchecked.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "kprof/v1/kprof.pb.h"
#include "module_files.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {
namespace {

// A kernel of known cost and answer (answers.so's spin_then_fill: 200 us of spinning, then
// out[i] = i), checked against itself: what checking adds to the timed region is all that can
// move its median.
kprof::v1::TimeEvaluateRequest Honest(const std::string& module, bool checked) {
  kprof::v1::TimeEvaluateRequest request =
      TimeRequest(module, "spin_then_fill", {"float32[4096]", "float64:200"});
  request.set_repeat(15);
  request.set_min_repeat_ms(5);
  if (checked) {
    request.mutable_check()->mutable_reference()->set_module_id(module);
    request.mutable_check()->mutable_reference()->set_function("spin_then_fill");
  }
  return request;
}

// Each candidate's calls per repeat: fixed, about 1 ms of vadd over 65536 floats. An adaptive
// number (min_repeat_ms) would make the comparison a lottery: a repeat that falls just short of
// its target grows number by 1.6x, so a 2% jitter in a call's time moves a job's work by 60%.
constexpr int kNumber = 48;

// 200 distinct candidates (fresh bytes), each timed 5 × kNumber calls, on one farm's batch: wall
// seconds.
double CandidateBatch(const std::string& target, const std::string& base,
                      const std::string& reference, bool checked) {
  constexpr int kCount = 200;
  auto farm = Must(kprof::client::Farm::Connect(target), "farm");
  std::vector<kprof::v1::BatchJob> jobs(kCount);
  static int tag = 400000;
  for (int i = 0; i < kCount; ++i) {
    const std::string id = farm->AddModule(Candidate(base, 50 * 1024, tag++), "cand.so");
    kprof::v1::BatchJob& job = jobs[static_cast<size_t>(i)];
    job.set_id(absl::StrFormat("c%d", i));
    *job.mutable_time_evaluate() = TimeRequest(
        id, "vadd", {"float32[65536]:random", "float32[65536]:random", "float32[65536]"});
    job.mutable_time_evaluate()->set_repeat(5);
    job.mutable_time_evaluate()->set_number(kNumber);
    if (checked) {
      auto* check = job.mutable_time_evaluate()->mutable_check();
      check->mutable_reference()->set_module_id(reference);
      check->mutable_reference()->set_function("vadd");
    }
  }
  int done = 0;
  const auto start = Clock::now();
  const absl::Status status = farm->MeasureBatch(
      jobs, [&](const kprof::v1::BatchUpdate& u) { done += u.state() == u.DONE; });
  const double seconds = Seconds(Clock::now() - start);
  if (!status.ok() || done != kCount) {
    Fail(absl::StrFormat("batch of %d candidates (checked %d): %d done, %s", kCount, checked, done,
                         status.ToString()));
  }
  return seconds;
}

// The same 200 distinct candidates as files, one job line each: what `kprof batch` and the
// Python farm are given.
constexpr int kCandidates = 200;
constexpr char kCandidateArgs[] =
    R"(["float32[65536]:random", "float32[65536]:random", "float32[65536]"])";

std::vector<std::string> CandidateFiles(const std::string& dir, const std::string& base) {
  static int tag = 500000;
  std::vector<std::string> paths;
  for (int i = 0; i < kCandidates; ++i) {
    paths.push_back(absl::StrFormat("%s/cand%d.so", dir, i));
    std::ofstream(paths.back(), std::ios::binary) << Candidate(base, 50 * 1024, tag++);
  }
  return paths;
}

// `kprof batch` over the candidates' files, checked against `reference` (a file) or not: wall
// seconds, the CLI's start included (as a user runs it).
double CliCandidateBatch(const std::string& target, const std::string& base,
                         const std::string& reference, bool checked) {
  kprof::testing::TempDir dir;
  const std::vector<std::string> paths = CandidateFiles(dir.path(), base);
  const std::string jobs = dir.path() + "/jobs.jsonl";
  {
    std::ofstream out(jobs);
    for (int i = 0; i < kCandidates; ++i) {
      out << absl::StrFormat(
          R"({"id": "c%d", "module": "%s", "function": "vadd", "args": %s, "repeat": 5, )"
          R"("number": %d})"
          "\n",
          i, paths[static_cast<size_t>(i)], kCandidateArgs, kNumber);
    }
  }
  const std::string results = dir.path() + "/results.jsonl";
  const auto start = Clock::now();
  Output(absl::StrFormat("%s --target %s batch %s %s > %s", KPROF_PATH, target, jobs,
                         checked ? "--reference " + reference + ":vadd" : "", results));
  const double seconds = Seconds(Clock::now() - start);
  const std::string written = kprof::testing::ReadFileBytes(results);
  // Each line OK, and a checked one with its verdict: passed.
  int lines = 0, ok = 0;
  std::istringstream in(written);
  for (std::string line; std::getline(in, line); ++lines) {
    const std::string compact = absl::StrReplaceAll(line, {{" ", ""}});
    ok += absl::StrContains(compact, R"("status":"OK")") &&
          absl::StrContains(compact, R"("outcome":"passed")") == checked;
  }
  if (lines != kCandidates || ok != kCandidates) {
    Fail(absl::StrFormat("kprof batch of %d candidates (checked %d): %d lines, %d OK:\n%s",
                         kCandidates, checked, lines, ok, written.substr(0, 2000)));
  }
  return seconds;
}

// The Python farm over the candidates' files, checked or not: wall seconds from its first job
// to its last result (the interpreter's start left out).
double PythonCandidateBatch(const std::string& target, const std::string& base,
                            const std::string& reference, bool checked) {
  kprof::testing::TempDir dir;
  const std::vector<std::string> paths = CandidateFiles(dir.path(), base);
  const std::string script = absl::StrFormat(
      "import sys, time; sys.path.insert(0, '%s/python'); import kprof\n"
      "jobs = [{'id': 'c%%d' %% i, 'module': '%s/cand%%d.so' %% i, 'function': 'vadd', "
      "'args': %s, 'repeat': 5, 'number': %d} for i in range(%d)]\n"
      "check = {'reference': '%s:vadd'} if %d else {}\n"
      "with kprof.farm('%s') as farm:\n"
      "    start = time.perf_counter()\n"
      "    done = sum(1 for r in farm.batch(jobs, **check)\n"
      "               if r.ok and (r.verdict is not None) == bool(check))\n"
      "    print(done, time.perf_counter() - start)\n",
      KPROF_BUILD_DIR, dir.path(), kCandidateArgs, kNumber, kCandidates, reference, checked ? 1 : 0,
      target);
  const auto [done, seconds] = PythonDoneAndSeconds(script);
  if (done != kCandidates) {
    Fail(absl::StrFormat("Python farm: %d of %d candidates done (checked %d)", done, kCandidates,
                         checked));
  }
  return seconds;
}

// One path's checked batch against its unchecked one, with the unchecked batch run again
// beside them (A/A: the floor this host's noise sets on the ratio, in the same run). Rounds of
// the three in turned order, so that none always runs first; each round gives checked/plain
// and again/plain, so that a host drifting between rounds moves both sides of a ratio alike
// (medians over the batches instead read 1.14 against an A/A of 0.91 in one full run); the
// medians of five rounds' ratios.
void CandidateRow(const std::string& figure, const std::function<double(bool checked)>& run) {
  (void)run(true);  // workers started, the reference computed
  std::vector<double> plain, checked, ratios, floors;
  for (int round = 0; round < 5; ++round) {
    double seconds[3] = {0, 0, 0};  // plain, checked, again
    for (int k = 0; k < 3; ++k) {
      const int which = (round + k) % 3;
      seconds[which] = run(which == 1);
    }
    plain.push_back(seconds[0]);
    checked.push_back(seconds[1]);
    ratios.push_back(seconds[1] / seconds[0]);
    floors.push_back(seconds[2] / seconds[0]);
  }
  const double ratio = report::Median(ratios);
  Add("checks", figure, Ms(report::Median(checked)),
      absl::StrFormat("unchecked %s (A/A %.3f)", Ms(report::Median(plain)), report::Median(floors)),
      ratio, "<= 1.1: " + Met(ratio <= 1.1));
}

}  // namespace

void Checks(const std::string& target, kprof::client::Client& client, const std::string& base) {
  const std::string answers =
      Must(client.LoadModule(
               kprof::testing::ReadFileBytes(kprof::testing::TestModulePath("answers")),
               "answers.so"),
           "upload answers.so")
          .id();
  (void)Must(client.TimeEvaluate(Honest(answers, true)), "warm-up");
  // Rounds of three measurements in a turned order (plain, checked, again; checked, again,
  // plain; ...): no series always runs first. Each round gives checked/plain and again/plain,
  // so a host that drifts between rounds moves both sides of a ratio alike; again/plain is the
  // floor this host's noise sets on the comparison, in the same run.
  std::vector<double> ratios, floors, checked_medians, plain_medians;
  for (int round = 0; round < 15; ++round) {
    double median[3] = {0, 0, 0};  // plain, checked, again
    for (int k = 0; k < 3; ++k) {
      const int which = (round + k) % 3;
      median[which] = Must(client.TimeEvaluate(Honest(answers, which == 1)), "honest kernel")
                          .statistics()
                          .median();
    }
    ratios.push_back(median[1] / median[0]);
    floors.push_back(median[2] / median[0]);
    checked_medians.push_back(median[1]);
    plain_medians.push_back(median[0]);
  }
  const double ratio = report::Median(ratios), floor = report::Median(floors);
  // Within 1%, or within the floor where the host's own noise is wider than that.
  const double allowed = std::max(0.01, std::fabs(floor - 1));
  Add("checks", "honest kernel's median, checked", Us(report::Median(checked_medians)),
      absl::StrFormat("unchecked %s (A/A %.3f)", Us(report::Median(plain_medians)), floor), ratio,
      absl::StrFormat("within %.1f%%: ", allowed * 100) + Met(std::fabs(ratio - 1) <= allowed));

  const std::string reference = Must(client.LoadModule(base, "vector_add.so"), "upload base").id();
  CandidateRow("200 distinct candidates, 5 x 48 calls, one reference, C++ farm",
               [&](bool checked) { return CandidateBatch(target, base, reference, checked); });
  kprof::testing::TempDir dir;
  const std::string reference_file = dir.path() + "/vector_add.so";
  std::ofstream(reference_file, std::ios::binary) << base;
  CandidateRow("  the same through kprof batch", [&](bool checked) {
    return CliCandidateBatch(target, base, reference_file, checked);
  });
  CandidateRow("  the same through the Python farm", [&](bool checked) {
    return PythonCandidateBatch(target, base, reference_file, checked);
  });
}

}  // namespace kprof::bench
