#include "core/measure/local_runner.h"

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/collectors/rusage_collector.h"
#include "core/modules/builtin_module.h"
#include "core/modules/shared_library.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

Job BuiltinJob(std::string function, std::vector<std::string> specs) {
  Job job;
  job.module = &BuiltinModule();
  job.function = std::move(function);
  job.device = kCpu;
  job.arg_specs = std::move(specs);
  return job;
}

TEST(LocalRunner, TimesABuiltin) {
  TimeJob time;
  time.options.repeat = 3;
  time.options.number = 4;
  auto result = LocalRunner().Time(BuiltinJob("spin_us", {"float64:50"}), time);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->evaluation.seconds_per_call.size(), 3u);
  // A spin never returns early; no upper bound on a shared machine.
  EXPECT_THAT(result->evaluation.seconds_per_call, Each(Ge(50e-6)));
  EXPECT_THAT(result->evaluation.numbers, ElementsAre(4, 4, 4));
  EXPECT_EQ(result->summary.count, 3u);
  EXPECT_GE(result->summary.min, 50e-6);
  EXPECT_EQ(result->argument_shapes, "float64:50");
  EXPECT_TRUE(result->checksums.empty());
}

TEST(LocalRunner, ChecksumsOfAnUploadedModulesOutputs) {
  auto module = SharedLibraryModule::OpenFile(TestModulePath("vector_add"));
  ASSERT_THAT(module, IsOk());
  Job job;
  job.module = module->get();
  job.function = "vadd";
  job.arg_specs = {"float32[4]:ones", "float32[4]:ones", "float32[4]:zeros"};
  TimeJob time;
  time.checksums = true;
  time.preprocess = std::string(kCacheFlushCpuNonFirstArg);
  auto result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->checksums,
              ElementsAre("f6bb1294da2f78cd935b01c7656280df5eaa0439e9d97bc03775825a41a508e4",
                          "f6bb1294da2f78cd935b01c7656280df5eaa0439e9d97bc03775825a41a508e4",
                          // c = 1 + 1 = 2 in every element
                          "c3a6b1f08b0b05ac05390d6c257551ffd0cdcf40496f232b52df2498f915469e"));
}

TEST(LocalRunner, NonZeroReturnIsAborted) {
  auto module = SharedLibraryModule::OpenFile(TestModulePath("error_code"));
  ASSERT_THAT(module, IsOk());
  Job job;
  job.module = module->get();
  job.function = "fails";
  EXPECT_THAT(LocalRunner().Time(job, {}),
              StatusIs(absl::StatusCode::kAborted, "function 'fails' returned 7"));
  EXPECT_THAT(LocalRunner().Profile(job, {}),
              StatusIs(absl::StatusCode::kAborted, "function 'fails' returned 7"));
}

TEST(LocalRunner, BadRequestsGetTheirErrors) {
  LocalRunner runner;
  EXPECT_THAT(runner.Time(BuiltinJob("spin", {}), {}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(
      runner.Time(BuiltinJob("spin_us", {"float64[x]"}), {}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argument spec 'float64[x]'")));
  EXPECT_THAT(runner.Time(BuiltinJob("spin_us", {}), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("builtin 'spin_us' takes")));
  Job big = BuiltinJob("copy", {"float32[1000]", "float32[1000]"});
  big.limits.max_total_bytes = 4000;
  EXPECT_THAT(runner.Time(big, {}), StatusIs(absl::StatusCode::kResourceExhausted));

  TimeJob bad_cooldown;
  bad_cooldown.options.repeats_to_cooldown = 0;
  EXPECT_THAT(runner.Time(BuiltinJob("spin_us", {"float64:1"}), bad_cooldown),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeats_to_cooldown = 0")));
  TimeJob bad_preprocess;
  bad_preprocess.preprocess = "flush_everything";
  EXPECT_THAT(runner.Time(BuiltinJob("spin_us", {"float64:1"}), bad_preprocess),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown pre-processing step 'flush_everything' (accepted: "
                                 "cache_flush_cpu_non_first_arg, or none)")));
  Job no_module;
  EXPECT_THAT(runner.Time(no_module, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LocalRunner, ProfilesNumberCallsAfterWarmupAsOneRow) {
  ProfileJob profile;
  profile.warmup = 2;
  profile.number = 5;
  profile.collectors = {"rusage"};
  auto report = LocalRunner().Profile(BuiltinJob("spin_us", {"float64:100"}), profile);
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->calls.size(), 1u);
  const report::MetricMap& row = report->calls[0];
  EXPECT_EQ(row.at("Name"), report::MetricValue(std::string("spin_us")));
  EXPECT_EQ(row.at("Count"), report::MetricValue(report::Count{5}));
  EXPECT_EQ(row.at("Argument Shapes"), report::MetricValue(std::string("float64:100")));
  EXPECT_EQ(row.at("Device"), report::MetricValue(std::string("cpu0")));
  EXPECT_GE(std::get<report::Duration>(row.at("Duration (us)")).microseconds, 500);
  EXPECT_EQ(row.count(std::string(kUserTimeMetric)), 1u);
  EXPECT_EQ(report->device_metrics.count("cpu0"), 1u);
  EXPECT_EQ(report->configuration.at("Warm-up Calls"), report::MetricValue(report::Count{2}));
}

TEST(LocalRunner, ProfileErrors) {
  LocalRunner runner;
  ProfileJob unknown;
  unknown.collectors = {"likwid:FLOPS_DP"};
  EXPECT_THAT(
      runner.Profile(BuiltinJob("spin_us", {"float64:1"}), unknown),
      StatusIs(absl::StatusCode::kNotFound,
               "unknown collector 'likwid' (available: rusage, perf, papi, rapl, nvml, rails)"));
  ProfileJob options;
  options.collectors = {"rusage:x"};
  EXPECT_THAT(runner.Profile(BuiltinJob("spin_us", {"float64:1"}), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes no options")));
  ProfileJob zero;
  zero.number = 0;
  EXPECT_THAT(runner.Profile(BuiltinJob("spin_us", {"float64:1"}), zero),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("number = 0")));
  ProfileJob negative;
  negative.warmup = -1;
  EXPECT_THAT(runner.Profile(BuiltinJob("spin_us", {"float64:1"}), negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warmup = -1")));
}

}  // namespace
}  // namespace kprof::core

namespace kprof::core {
namespace {

// A fake cpufreq tree for every CPU this process may run on, nominal 3 GHz, and a module whose
// function sets the current clock of every CPU: low (1 GHz) on its calls numbered in
// `low_calls`, else 3 GHz. The clock is read before and after each repeat.
class ThrottledHost {
 public:
  ThrottledHost() : root_(::testing::TempDir() + "/throttled_host/") {
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < 256; ++cpu) {
      const std::string dir = absl::StrCat(root_, "sys/devices/system/cpu/cpu", cpu, "/cpufreq");
      std::filesystem::create_directories(dir);
      std::ofstream(dir + "/cpuinfo_max_freq") << "3000000\n";
      std::ofstream(dir + "/scaling_cur_freq") << "3000000\n";
    }
  }
  const std::string& root() const { return root_; }

  static void SetClock(int64_t khz) {
    for (int cpu = 0; cpu < 256; ++cpu) {
      std::ofstream(absl::StrCat(Instance()->root_, "sys/devices/system/cpu/cpu", cpu,
                                 "/cpufreq/scaling_cur_freq"))
          << khz << "\n";
    }
  }
  static ThrottledHost* Instance() {
    static ThrottledHost* host = new ThrottledHost();
    return host;
  }

 private:
  std::string root_;
};

std::set<int> low_calls;
int calls = 0;

int32_t MovesTheClock(DLTensor*, int32_t) {
  ++calls;
  ThrottledHost::SetClock(low_calls.count(calls) > 0 ? 1'000'000 : 3'000'000);
  return 0;
}

class ClockModule final : public Module {
 public:
  const std::vector<std::string>& functions() const override { return names_; }
  absl::StatusOr<ModuleFunction> GetFunction(std::string_view) const override {
    ModuleFunction f;
    f.name = "moves_the_clock";
    f.function = MovesTheClock;
    return f;
  }

 private:
  std::vector<std::string> names_ = {"moves_the_clock"};
};

TEST(LocalRunner, RepeatsBelowTheThrottleThresholdAreMarkedOrDropped) {
  ThrottledHost* host = ThrottledHost::Instance();
  ClockModule module;
  Job job;
  job.module = &module;
  job.function = "moves_the_clock";
  TimeJob time;
  time.sysfs_root = host->root();
  time.options.repeat = 4;
  // Call 1 is the discarded one; repeats 0..3 are calls 2..5. Call 3 (repeat 1) leaves the
  // clock low for the reading after it and for the one before repeat 2; call 4 sets it back.
  calls = 0;
  low_calls = {3};
  auto result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->throttle_check, "");
  EXPECT_THAT(result->throttled, ElementsAre(1, 2));
  EXPECT_EQ(result->evaluation.seconds_per_call.size(), 4u);

  calls = 0;
  time.discard_throttled = true;
  result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->discarded_throttled, 2);
  EXPECT_TRUE(result->throttled.empty());
  EXPECT_EQ(result->evaluation.seconds_per_call.size(), 2u);
  EXPECT_EQ(result->evaluation.numbers.size(), 2u);
  EXPECT_EQ(result->summary.count, 2u);

  // Randomized layouts of two repeats each: repeats 1 and 2 dropped, each layout keeps one, and
  // says where it is in what is left.
  calls = 0;
  time.placement.randomize = true;
  time.placement.repeats_per_layout = 2;
  result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->layouts.size(), 2u);
  EXPECT_EQ(result->layouts[0].first_repeat, 0);
  EXPECT_EQ(result->layouts[0].repeats, 1);
  EXPECT_EQ(result->layouts[0].median, result->evaluation.seconds_per_call[0]);
  EXPECT_EQ(result->layouts[1].first_repeat, 1);
  EXPECT_EQ(result->layouts[1].repeats, 1);
  EXPECT_EQ(result->layouts[1].median, result->evaluation.seconds_per_call[1]);
  time.placement = PlacementOptions();

  // A lower threshold: 1 GHz of 3 is above 30%.
  calls = 0;
  time.throttle_threshold = 0.3;
  result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->discarded_throttled, 0);

  // Every repeat throttled: nothing left to report.
  calls = 0;
  low_calls = {1, 2, 3, 4, 5};
  time.throttle_threshold = 0.75;
  EXPECT_THAT(LocalRunner().Time(job, time),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("all 4 repeats were throttled (the CPU clock was below 75% of "
                                 "its nominal 3000 MHz)")));
  ThrottledHost::SetClock(3'000'000);

  time.throttle_threshold = 1.5;
  EXPECT_THAT(LocalRunner().Time(job, time),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("throttle_threshold = 1.5")));

  // A host without cpufreq says so, and marks nothing.
  time = TimeJob();
  time.sysfs_root = host->root() + "nowhere/";
  result = LocalRunner().Time(job, time);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->throttle_check, HasSubstr("no cpufreq"));
  EXPECT_TRUE(result->throttled.empty());
}

// A sequence's calls share one limit, and each call takes what it allocated from it, the room
// to place its tensors included: at 2 MiB alignment a few calls of small tensors reach it.
TEST(LocalRunner, ASequencesCallsShareTheLimitPlacementRoomIncluded) {
  SequenceJob sequence;
  for (int i = 0; i < 3; ++i) {
    sequence.calls.push_back(BuiltinJob("fill", {"float32[16]", "float64:1"}));
  }
  sequence.limits.max_total_bytes = uint64_t{10} << 20;
  EXPECT_THAT(LocalRunner().ProfileSequence(sequence), IsOk());
  sequence.placement.alignment = kHugePageBytes;  // about 4 MiB a call: the third is refused
  EXPECT_THAT(LocalRunner().ProfileSequence(sequence),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("call 2 (fill)"), HasSubstr("room to place them"))));
}

}  // namespace
}  // namespace kprof::core
