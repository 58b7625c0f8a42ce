// kprofd end to end: jobs — timing, convergence, profiles, placement, and options refused
// before a job is queued.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/kprof_client.h"
#include "core/collectors/rapl_collector.h"
#include "core/cuda/cuda_devices.h"
#include "core/host/placement.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "process_info.h"
#include "proto/status.h"
#include "proto/wire.h"
#include "service_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::ServiceTest;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Durations given in milliseconds must be finite and at most an hour: NaN and 1e308 would run
// until the job timeout.
TEST_F(ServiceTest, NonFiniteOrHugeMillisecondsAreRefused) {
  for (const double ms : {std::nan(""), std::numeric_limits<double>::infinity(), 1e308, -1.0}) {
    for (const bool cooldown : {false, true}) {
      v1::TimeEvaluateRequest r;
      r.mutable_call()->set_module_id("builtin");
      r.mutable_call()->set_function("nop");
      if (cooldown) {
        r.set_cooldown_interval_ms(ms);
      } else {
        r.set_min_repeat_ms(ms);
      }
      EXPECT_THAT(
          client_->TimeEvaluate(r),
          StatusIs(absl::StatusCode::kInvalidArgument,
                   AllOf(HasSubstr(cooldown ? "cooldown_interval_ms = " : "min_repeat_ms = "),
                         HasSubstr("is out of range (accepted: 0 to 3600000)"))))
          << ms;
    }
  }
}

// Options are checked by the front before a job is queued, with the worker's own function: a
// bad request is refused at once, even while the device is busy, and no worker runs it.
TEST_F(ServiceTest, BadOptionsAreRefusedBeforeTheJobIsQueued) {
  const auto device_counts = [this] {
    auto info = client_->Info();
    EXPECT_THAT(info, IsOk());
    const v1::DeviceInfo& cpu = info->devices(0);
    return std::tuple{cpu.jobs_completed(), cpu.jobs_failed(), cpu.workers_started()};
  };
  // A job that holds the device for two seconds.
  auto busy = std::async(std::launch::async, [this] {
    v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:2000000"});
    request.set_number(1);
    request.set_repeat(1);
    return client_->TimeEvaluate(request);
  });
  absl::SleepFor(absl::Milliseconds(200));  // let it start
  const auto before = device_counts();

  std::vector<std::pair<v1::TimeEvaluateRequest, std::string>> times;
  const auto spin = [] { return Time("builtin", "spin_us", {"float64:1"}); };
  times.emplace_back(spin(), "repeat = 0 is out of range");
  times.back().first.set_repeat(0);
  times.emplace_back(spin(), "min_repeat_ms = -1 is out of range");
  times.back().first.set_min_repeat_ms(-1);
  times.emplace_back(spin(), "min_repeats and max_time_ms apply only with max_relative_stddev");
  times.back().first.set_min_repeats(3);
  times.emplace_back(spin(), "unknown outlier filter 'tukey'");
  times.back().first.set_outlier_filter("tukey");
  times.emplace_back(spin(), "unknown pre-processing step 'flush'");
  times.back().first.set_preprocess("flush");
  times.emplace_back(spin(), "flush_l2 sizes the cache flush to a CUDA device's L2");
  times.back().first.set_flush_l2(true);
  times.emplace_back(Time("builtin", "spin_us", {"float33:1"}), "float33");
  times.emplace_back(spin(), "launch.grid has 4 dimensions");
  for (int i = 0; i < 4; ++i) times.back().first.mutable_call()->mutable_launch()->add_grid(1);
  times.back().first.mutable_call()->mutable_launch()->add_block(1);
  for (const auto& [request, message] : times) {
    EXPECT_THAT(client_->TimeEvaluate(request),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << message;
  }
  v1::ProfileFunctionRequest profile;
  profile.mutable_call()->set_module_id("builtin");
  profile.mutable_call()->set_function("spin_us");
  profile.mutable_call()->add_args("float64:1");
  profile.set_number(0);
  EXPECT_THAT(client_->ProfileFunction(profile),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("number = 0")));
  v1::ProfileRequest sequence;
  *sequence.add_calls() = profile.call();
  sequence.set_repeat(0);
  EXPECT_THAT(client_->Profile(sequence),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = 0")));

  // All answered while the long job still held the device, and none ran or failed in a worker.
  EXPECT_EQ(busy.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(device_counts(), before);
  EXPECT_THAT(busy.get(), IsOk());
}

TEST_F(ServiceTest, TimeEvaluateABuiltin) {
  v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:100"});
  request.set_repeat(3);
  request.set_number(5);
  auto r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->seconds_per_call(), SizeIs(3));
  EXPECT_THAT(r->seconds_per_call(), Each(Ge(100e-6)));
  EXPECT_THAT(r->numbers(), ElementsAre(5, 5, 5));
  EXPECT_EQ(r->final_number(), 5);
  EXPECT_GE(r->statistics().min(), 100e-6);
  EXPECT_GE(r->timing().execution_seconds(), 15 * 100e-6);
  EXPECT_GE(r->timing().queue_wait_seconds(), 0);
  EXPECT_EQ(r->device(), "cpu:0");
  EXPECT_EQ(r->argument_shapes(), "float64:100");
  for (const char* key : {"Host", "Kernel", "CPU model", "CPU governor", "Load average",
                          "Worker CPU affinity", "kprofd version"}) {
    EXPECT_EQ(r->environment().metrics().count(key), 1u) << key;
  }
}

TEST_F(ServiceTest, ASteadySpinConverges) {
  KPROF_SKIP_UNDER_EMULATION("runs code too unevenly for a 5% spread");
  v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:100"});
  request.set_min_repeat_ms(5);
  request.set_max_relative_stddev(0.05);
  request.set_min_repeats(5);
  // Within the daemon's 60 s --job-timeout, so that a budget spent ends it, not the daemon.
  request.set_max_time_ms(30'000);
  // On a loaded machine one stalled repeat keeps the plain relative std above 5% for
  // thousands of repeats (a 20x stall alone adds 19% / sqrt(n)); the filter sets it aside.
  request.set_outlier_filter("iqr");
  auto r = client_->TimeEvaluate(request, absl::Seconds(120));
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->has_converged());
  if (r->converged()) {
    EXPECT_EQ(r->stop_reason(), "converged");
    EXPECT_LE(r->rel_stddev(), 0.05);
  } else {
    // Only other work on the CPUs keeps a steady spin from converging (its repeats then wait
    // whole time slices or not at all), and the result says so.
    EXPECT_EQ(r->stop_reason(), "time budget");
    EXPECT_THAT(absl::StrJoin(r->warnings(), "; "), ContainsRegex("busy|competed"))
        << "relative std " << r->rel_stddev();
  }
  EXPECT_GE(r->seconds_per_call_size(), 5);
  // Of the kept repeats, as a sample standard deviation (n - 1).
  const double kept = r->seconds_per_call_size() - r->outliers_size();
  EXPECT_NEAR(r->rel_stddev(), r->filtered_statistics().cv() * std::sqrt(kept / (kept - 1)), 1e-9);
  EXPECT_GE(r->statistics().median(), 100e-6);
}

TEST_F(ServiceTest, AJitteryFunctionDoesNotConvergeWithinItsBudgetAndSaysSo) {
  auto module = client_->LoadModuleFile(TestModulePath("jitter"));
  ASSERT_THAT(module, IsOk());
  // Uniform 0-2 ms per call: the repeats' relative std is about 58%, never 1%.
  v1::TimeEvaluateRequest request = Time(module->id(), "spin_jitter", {"float64:2000"});
  request.set_max_relative_stddev(0.01);
  request.set_max_time_ms(200);
  auto r = client_->TimeEvaluate(request);
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->has_converged());
  EXPECT_FALSE(r->converged());
  EXPECT_EQ(r->stop_reason(), "time budget");
  EXPECT_GT(r->rel_stddev(), 0.01);
  EXPECT_GE(r->seconds_per_call_size(), 3);
  // 200 ms of calls lasting 1 ms on average: far fewer than the default 10000 repeats.
  EXPECT_LT(r->seconds_per_call_size(), 1000);
  EXPECT_GE(r->timing().execution_seconds(), 0.2);
  const double n = r->seconds_per_call_size();  // no filter: all repeats, sample std
  EXPECT_NEAR(r->rel_stddev(), r->statistics().cv() * std::sqrt(n / (n - 1)), 1e-9);
  EXPECT_EQ(r->outliers_size(), 0);
}

// The worker pins itself and takes its priority before its first job; the manifest of every
// result says what it ended up with.
TEST_F(ServiceTest, WorkersArePinnedAndPrioritisedAsConfigured) {
  const std::vector<int> allowed = core::AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string cpu = std::to_string(allowed.back());
  struct Case {
    std::string priority, manifest;
  };
  std::vector<Case> cases = {{"nice:5", "SCHED_OTHER, nice 5"}};
  core::Placement fifo;
  fifo.priority = *core::ParsePriority("fifo:1");
  if (core::CheckPlacement(fifo).ok()) {
    cases.push_back({"fifo:1", "SCHED_FIFO, priority 1"});
  } else {
    std::fprintf(stderr, "not testing fifo:1 here: %s\n",
                 core::CheckPlacement(fifo).ToString().c_str());
  }
  for (const Case& c : cases) {
    daemon_.Stop();
    StartDaemon({"--pin-cpus", cpu, "--worker-priority", c.priority});
    v1::TimeEvaluateRequest request = Time("builtin", "spin_us", {"float64:10"});
    auto r = client_->TimeEvaluate(request);
    ASSERT_THAT(r, IsOk());
    const auto& m = r->environment().metrics();
    EXPECT_EQ(m.at("Worker CPU affinity").string(), cpu) << c.priority;
    EXPECT_EQ(m.at("Worker priority").string(), c.manifest);
  }
}

TEST_F(ServiceTest, ConvergenceOptionsOutOfRangeAreInvalidArgument) {
  v1::TimeEvaluateRequest alone = Time("builtin", "spin_us", {"float64:1"});
  alone.set_min_repeats(5);
  EXPECT_THAT(client_->TimeEvaluate(alone),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_relative_stddev")));
  v1::TimeEvaluateRequest budget = Time("builtin", "spin_us", {"float64:1"});
  budget.set_max_time_ms(100);
  EXPECT_THAT(client_->TimeEvaluate(budget),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only with")));
  v1::TimeEvaluateRequest too_loose = Time("builtin", "spin_us", {"float64:1"});
  too_loose.set_max_relative_stddev(2);
  EXPECT_THAT(client_->TimeEvaluate(too_loose),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_relative_stddev = 2")));
  v1::TimeEvaluateRequest one = Time("builtin", "spin_us", {"float64:1"});
  one.set_max_relative_stddev(0.1);
  one.set_min_repeats(1);
  EXPECT_THAT(client_->TimeEvaluate(one),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_repeats = 1")));
  v1::TimeEvaluateRequest negative = Time("builtin", "spin_us", {"float64:1"});
  negative.set_max_relative_stddev(0.1);
  negative.set_max_time_ms(-5);
  EXPECT_THAT(client_->TimeEvaluate(negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_time_ms")));
  v1::TimeEvaluateRequest filter = Time("builtin", "spin_us", {"float64:1"});
  filter.set_outlier_filter("zscore");
  EXPECT_THAT(client_->TimeEvaluate(filter),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("accepted: none, iqr")));
  v1::TimeEvaluateRequest huge = Time("builtin", "spin_us", {"float64:1"});
  huge.set_repeat(int64_t{1} << 40);
  EXPECT_THAT(client_->TimeEvaluate(huge),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = ")));
}

TEST_F(ServiceTest, ProfileFunctionWithACollector) {
  KPROF_SKIP_UNDER_EMULATION("has no perf_event_open");
  v1::ProfileFunctionRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("spin_us");
  request.mutable_call()->add_args("float64:200");
  request.set_warmup(1);
  request.set_number(4);
  request.add_collectors()->set_name("rusage");
  auto* perf = request.add_collectors();
  perf->set_name("perf");
  perf->add_options("task-clock");
  perf->add_options("page-faults");
  auto r = client_->ProfileFunction(request);
  ASSERT_THAT(r, IsOk());
  auto report = wire::FromProto(r->report());
  ASSERT_THAT(report, IsOk());
  ASSERT_THAT(report->calls, SizeIs(1));
  EXPECT_EQ(report->calls[0].at("Count"), report::MetricValue(report::Count{4}));
  EXPECT_GE(std::get<report::Duration>(report->calls[0].at("Duration (us)")).microseconds, 800);
  EXPECT_EQ(report->calls[0].count("User Time (us)"), 1u);
  // perf's task-clock over 4 spins of 200 us: at least most of 800 us of CPU, in ns.
  EXPECT_GE(std::get<report::Count>(report->calls[0].at("task-clock")).value, 400'000);
  EXPECT_EQ(report->calls[0].count("page-faults"), 1u);
  EXPECT_EQ(report->device_metrics.count("cpu0"), 1u);
  EXPECT_EQ(report->configuration.count("CPU model"), 1u);  // the manifest rides along
  EXPECT_EQ(report->configuration.count("Runnable processes"), 1u);
}

TEST_F(ServiceTest, ProfileASequenceLayerByLayer) {
  auto module = client_->LoadModuleFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  v1::ProfileRequest request;
  auto* matmul = request.add_calls();
  matmul->set_module_id("builtin");
  matmul->set_function("matmul");
  for (const char* a : {"float32[32,32]", "float32[32,32]:random", "float32[32,32]:random"}) {
    matmul->add_args(a);
  }
  auto* vadd = request.add_calls();
  vadd->set_module_id(module->id());
  vadd->set_function("vadd");
  for (const char* a : {"float32[64]:ones", "float32[64]:random", "float32[64]"}) vadd->add_args(a);
  request.set_repeat(3);
  request.add_collectors()->set_name("rusage");
  auto r = client_->Profile(request);
  ASSERT_THAT(r, IsOk());
  auto report = wire::FromProto(r->report());
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->calls, SizeIs(6));  // 2 calls x 3 repeats
  double percent = 0;
  for (const auto& call : report->calls)
    percent += std::get<report::Percent>(call.at("Percent")).percent;
  EXPECT_GT(percent, 0);
  EXPECT_LE(percent, 100.0 + 1e-9);
  EXPECT_EQ(report->configuration.at("Repeats"), report::MetricValue(report::Count{3}));
  const std::string table = report::AsTable(*report);
  EXPECT_THAT(table, HasSubstr("matmul"));
  EXPECT_THAT(table, HasSubstr("vadd"));
}

// A row per call per repeat: a profile that would build more than 100000 is refused before it
// runs (repeat = 10^7 grew the worker until it died, and was reported as the function crashing).
TEST_F(ServiceTest, AProfileOfTooManyRowsIsRefusedBeforeItRuns) {
  v1::ProfileRequest request;
  for (int i = 0; i < 2; ++i) {
    auto* nop = request.add_calls();
    nop->set_module_id("builtin");
    nop->set_function("nop");
  }
  request.set_repeat(50'001);
  EXPECT_THAT(client_->Profile(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a profile of 2 call(s) x 50001 repeats would be over 100000 "
                                 "report rows")));
  request.set_repeat(10'000'000);
  EXPECT_THAT(client_->Profile(request).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  request.set_repeat(3);
  auto small = client_->Profile(request);
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(small->report().calls_size(), 6);
}

}  // namespace
}  // namespace kprof
