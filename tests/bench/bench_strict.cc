// Section 8 of kprof_bench, continued: what strict checks cost. An honest kernel's median under
// strict checks against unchecked, rounds interleaved; and a strict batch of 200 distinct
// one-millisecond candidates against the same batch unchecked: the time the checks add, as a
// share of the candidates' timed time.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "kprof/v1/kprof.pb.h"
#include "module_files.h"
#include "report/statistics.h"

namespace kprof::bench {
namespace {

constexpr int kRepeats = 20;  // each candidate's timed calls, one a repeat as strict checks time

// cheats.so's honest compute-bound kernel (about 200 operations per element) over n floats,
// checked strictly against heavy_ref or not at all.
kprof::v1::TimeEvaluateRequest Heavy(const std::string& module, const std::string& reference, int n,
                                     bool strict) {
  const std::string vec = absl::StrFormat("float32[%d]", n);
  kprof::v1::TimeEvaluateRequest request =
      TimeRequest(module, "heavy_honest", {vec, vec + ":random", vec + ":random"});
  request.set_repeat(kRepeats);
  request.set_number(1);
  if (strict) {
    kprof::v1::AnswerCheck* check = request.mutable_check();
    check->mutable_reference()->set_module_id(reference);
    check->mutable_reference()->set_function("heavy_ref");
    check->set_level(kprof::v1::AnswerCheck::STRICT);
  }
  return request;
}

// 200 distinct candidates (cheats.so's bytes, each with a tag of its own) on one farm's batch,
// strictly checked or not: wall seconds, and the timed seconds of every call of every job.
std::pair<double, double> StrictBatch(const std::string& target, const std::string& cheats,
                                      const std::string& reference, int n, bool strict) {
  constexpr int kCount = 200;
  auto farm = Must(kprof::client::Farm::Connect(target), "farm");
  std::vector<kprof::v1::BatchJob> jobs(kCount);
  static int tag = 600000;
  for (int i = 0; i < kCount; ++i) {
    const std::string id = farm->AddModule(Candidate(cheats, 0, tag++), "cand.so");
    kprof::v1::BatchJob& job = jobs[static_cast<size_t>(i)];
    job.set_id(absl::StrFormat("c%d", i));
    *job.mutable_time_evaluate() = Heavy(id, reference, n, strict);
  }
  int done = 0;
  double timed = 0;
  const auto start = Clock::now();
  const absl::Status status = farm->MeasureBatch(jobs, [&](const kprof::v1::BatchUpdate& u) {
    if (u.state() != u.DONE) return;
    ++done;
    for (double s : u.time_evaluate().seconds_per_call()) timed += s;
  });
  const double seconds = Seconds(Clock::now() - start);
  if (!status.ok() || done != kCount) {
    Fail(absl::StrFormat("strict batch of %d candidates (strict %d): %d done, %s", kCount, strict,
                         done, status.ToString()));
  }
  return {seconds, timed};
}

}  // namespace

void StrictChecks(const std::string& target, kprof::client::Client& client) {
  const std::string cheats_bytes =
      kprof::testing::ReadFileBytes(kprof::testing::TestModulePath("cheats"));
  const std::string cheats = Must(client.LoadModule(cheats_bytes, "cheats.so"), "cheats.so").id();
  // About a millisecond a call: n scaled from a first measurement.
  const double at_4096 =
      Must(client.TimeEvaluate(Heavy(cheats, cheats, 4096, false)), "heavy").statistics().median();
  const int n = std::clamp(static_cast<int>(4096 * 1e-3 / at_4096), 256, 1 << 20);

  // Rounds of three in a turned order (plain, strict, again): again/plain is the floor this
  // host's noise sets on the comparison, in the same run.
  std::vector<double> ratios, floors, strict_medians, plain_medians;
  (void)Must(client.TimeEvaluate(Heavy(cheats, cheats, n, true)), "warm-up");
  for (int round = 0; round < 15; ++round) {
    double median[3] = {0, 0, 0};
    for (int k = 0; k < 3; ++k) {
      const int which = (round + k) % 3;
      median[which] = Must(client.TimeEvaluate(Heavy(cheats, cheats, n, which == 1)), "honest")
                          .statistics()
                          .median();
    }
    ratios.push_back(median[1] / median[0]);
    floors.push_back(median[2] / median[0]);
    strict_medians.push_back(median[1]);
    plain_medians.push_back(median[0]);
  }
  const double ratio = report::Median(ratios), floor = report::Median(floors);
  const double allowed = std::max(0.02, std::fabs(floor - 1));
  Add("checks", "honest kernel's median, strict checks", Us(report::Median(strict_medians)),
      absl::StrFormat("unchecked %s (A/A %.3f)", Us(report::Median(plain_medians)), floor), ratio,
      absl::StrFormat("within %.1f%%: ", allowed * 100) + Met(std::fabs(ratio - 1) <= allowed));

  // The batch: what strict checks add to its wall time (the probe, the poison and fresh
  // inputs, the fingerprints and read-backs, the reference's runs), over its timed calls.
  (void)StrictBatch(target, cheats_bytes, cheats, n, true);  // workers started
  std::vector<double> shares, floor_shares;
  double timed = 0;
  for (int round = 0; round < 3; ++round) {
    std::pair<double, double> runs[3];  // plain, strict, again
    for (int k = 0; k < 3; ++k) {
      const int which = (round + k) % 3;
      runs[which] = StrictBatch(target, cheats_bytes, cheats, n, which == 1);
    }
    timed = runs[0].second;
    shares.push_back((runs[1].first - runs[0].first) / runs[1].second);
    floor_shares.push_back((runs[2].first - runs[0].first) / runs[2].second);
  }
  const double share = report::Median(shares);
  Add("checks",
      absl::StrFormat("strict batch of 200 distinct candidates, %d x %s calls: time checks add",
                      kRepeats, Us(timed / 200 / kRepeats)),
      absl::StrFormat("%.1f%%", share * 100),
      absl::StrFormat("of the timed time (A/A %.1f%%)", report::Median(floor_shares) * 100), share,
      "<= 25%: " + Met(share <= 0.25));
}

}  // namespace kprof::bench
