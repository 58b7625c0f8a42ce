// Section 8 of kprof_bench: what checking answers costs. An honest kernel's median with a
// reference check against without, rounds interleaved; and a batch of 200 distinct candidates
// against one reference against the same batch unchecked.
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

// 200 distinct candidates (fresh bytes), each timed 5 × 1 ms, on one farm's batch: wall seconds.
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
    job.mutable_time_evaluate()->set_min_repeat_ms(1);
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
  (void)CandidateBatch(target, base, reference, true);  // workers started, reference computed
  std::vector<double> batch_plain, batch_checked;
  for (int round = 0; round < 3; ++round) {
    batch_plain.push_back(CandidateBatch(target, base, reference, false));
    batch_checked.push_back(CandidateBatch(target, base, reference, true));
  }
  const double b_with = report::Median(batch_checked), b_without = report::Median(batch_plain);
  Add("checks", "200 distinct candidates, 5 x 1 ms, one reference", Ms(b_with),
      "unchecked " + Ms(b_without), b_with / b_without,
      "<= 1.1: " + Met(b_with / b_without <= 1.1));
}

}  // namespace kprof::bench
