#include "core/measure/time_evaluator.h"

#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/statistics.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::FakeClock;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

TEST(NextNumber, GrowsToReachMinRepeatAtTheMeasuredRate) {
  // 1 call took 1 us; 10 ms needs 10000 calls, plus one.
  EXPECT_EQ(NextNumber(1, 0.001, 10), 10001);
  // 3 calls took 60 ms (20 ms each); 100 ms needs 5, plus one.
  EXPECT_EQ(NextNumber(3, 60, 100), 6);
}

TEST(NextNumber, GrowsAtLeastByTheGoldenRatio) {
  EXPECT_EQ(NextNumber(10, 9, 10), 16);  // rate says 12.1, 10 * 1.618 = 16.18
  EXPECT_EQ(NextNumber(1, 0.9, 1), 2);   // rate says 2.1, 1.618 -> 2
  EXPECT_EQ(NextNumber(6, 99, 100), 9);  // rate says 7.06, 6 * 1.618 = 9.7
}

TEST(NextNumber, ZeroOrNonsenseTimeKeepsNumber) {
  EXPECT_EQ(NextNumber(7, 0, 10), 7);
  EXPECT_EQ(NextNumber(7, -1, 10), 7);
  EXPECT_EQ(NextNumber(7, std::nan(""), 10), 7);
}

TEST(NextNumber, NeverOverflows) {
  EXPECT_EQ(NextNumber(kMaxNumber, 1, 1e9), kMaxNumber);
  EXPECT_EQ(NextNumber(kMaxNumber / 2 + 1, 1, 2), kMaxNumber);
  EXPECT_EQ(NextNumber(1, 1e-300, 1e300), kMaxNumber);
  EXPECT_EQ(NextNumber(1, 1e-300, INFINITY), kMaxNumber);
}

// Timers that read a scripted sequence of durations, one per timed attempt; the evaluated
// function counts its calls so the test sees each attempt's number.
class ScriptedEvaluation {
 public:
  explicit ScriptedEvaluation(std::vector<absl::Duration> readings)
      : readings_(readings.begin(), readings.end()) {}

  TimeEvaluator Evaluator(DeviceApi* api = nullptr) {
    return TimeEvaluator(
        kCpu, api != nullptr ? api : *GetDeviceApi(base::DeviceType::kCpu),
        [this](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
          return std::make_unique<Scripted>(this);
        },
        &clock_);
  }

  absl::Status Call() {
    ++calls_;
    events_.push_back("call");
    return absl::OkStatus();
  }

  // The calls made by each timed attempt, in order.
  const std::vector<int64_t>& attempts() const { return attempts_; }
  std::vector<std::string>& events() { return events_; }
  FakeClock& clock() { return clock_; }
  int64_t calls() const { return calls_; }

 private:
  class Scripted final : public Timer {
   public:
    explicit Scripted(ScriptedEvaluation* owner) : owner_(owner) {}
    void Start() override {
      calls_at_start_ = owner_->calls_;
      owner_->events_.push_back("start");
    }
    void Stop() override {
      owner_->events_.push_back("stop");
      owner_->attempts_.push_back(owner_->calls_ - calls_at_start_);
      if (owner_->readings_.empty()) {
        reading_ = absl::ZeroDuration();
        return;
      }
      reading_ = owner_->readings_.front();
      if (owner_->readings_.size() > 1) owner_->readings_.pop_front();  // the last one repeats
      owner_->clock_.Advance(reading_);  // the attempt took the time it read
    }
    int64_t ElapsedNanos() override { return absl::ToInt64Nanoseconds(reading_); }

   private:
    ScriptedEvaluation* owner_;
    int64_t calls_at_start_ = 0;
    absl::Duration reading_;
  };

  std::deque<absl::Duration> readings_;
  std::vector<int64_t> attempts_;
  std::vector<std::string> events_;
  FakeClock clock_;
  int64_t calls_ = 0;
};

TEST(TimeEvaluator, MinRepeatGrowthSequence) {
  ScriptedEvaluation s({absl::Milliseconds(50), absl::Milliseconds(60), absl::Milliseconds(99),
                        absl::Milliseconds(150)});
  TimeEvaluatorOptions options;
  options.min_repeat = absl::Milliseconds(100);
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(s.attempts(), ElementsAre(1, 3, 6, 9));
  EXPECT_THAT(result->numbers, ElementsAre(9));
  EXPECT_EQ(result->final_number, 9);
  ASSERT_EQ(result->seconds_per_call.size(), 1u);
  EXPECT_DOUBLE_EQ(result->seconds_per_call[0], 0.150 / 9);
  EXPECT_EQ(s.calls(), 1 + 1 + 3 + 6 + 9);  // one discarded first call
}

TEST(TimeEvaluator, NumberCarriesAcrossRepeatsButNotAcrossEvaluations) {
  ScriptedEvaluation s({absl::Milliseconds(5), absl::Milliseconds(20)});
  TimeEvaluatorOptions options;
  options.number = 2;
  options.repeat = 3;
  options.min_repeat = absl::Milliseconds(10);
  TimeEvaluator evaluator = s.Evaluator();
  auto first = evaluator.Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(first, IsOk());
  // 2 calls took 5 ms: grow to 10 / 2.5 + 1 = 5; then 20 ms is long enough for every repeat.
  EXPECT_THAT(s.attempts(), ElementsAre(2, 5, 5, 5));
  EXPECT_THAT(first->numbers, ElementsAre(5, 5, 5));
  EXPECT_THAT(first->seconds_per_call,
              ElementsAre(DoubleEq(0.004), DoubleEq(0.004), DoubleEq(0.004)));

  auto second = evaluator.Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(second, IsOk());
  // The reference's captured `number` would start this one at 5; it starts at 2 again.
  EXPECT_EQ(s.attempts()[4], 2);
  EXPECT_THAT(second->numbers, ElementsAre(2, 2, 2));
}

TEST(TimeEvaluator, ZeroTimeLimitStopsGrowing) {
  ScriptedEvaluation s({absl::ZeroDuration()});
  TimeEvaluatorOptions options;
  options.number = 4;
  options.repeat = 2;
  options.min_repeat = absl::Milliseconds(1);
  options.limit_zero_time_iterations = 5;
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(s.attempts(), std::vector<int64_t>(10, 4));  // 5 zero readings per repeat
  EXPECT_THAT(result->seconds_per_call, ElementsAre(0.0, 0.0));

  ScriptedEvaluation once({absl::ZeroDuration()});
  options.limit_zero_time_iterations = 0;
  ASSERT_THAT(once.Evaluator().Evaluate([&] { return once.Call(); }, options), IsOk());
  EXPECT_THAT(once.attempts(), ElementsAre(4, 4));
}

TEST(TimeEvaluator, CooldownAfterEveryNRepeatsButNotAfterTheLast) {
  ScriptedEvaluation s({absl::Microseconds(1)});
  TimeEvaluatorOptions options;
  options.repeat = 10;
  options.cooldown_interval = absl::Milliseconds(5);
  options.repeats_to_cooldown = 3;
  ASSERT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options), IsOk());
  EXPECT_THAT(s.clock().sleeps(),
              ElementsAre(absl::Milliseconds(5), absl::Milliseconds(5), absl::Milliseconds(5)));

  ScriptedEvaluation every({absl::Microseconds(1)});
  options.repeat = 4;
  options.repeats_to_cooldown = 1;
  ASSERT_THAT(every.Evaluator().Evaluate([&] { return every.Call(); }, options), IsOk());
  EXPECT_EQ(every.clock().sleeps().size(), 3u);

  ScriptedEvaluation none({absl::Microseconds(1)});
  options.cooldown_interval = absl::ZeroDuration();
  ASSERT_THAT(none.Evaluator().Evaluate([&] { return none.Call(); }, options), IsOk());
  EXPECT_TRUE(none.clock().sleeps().empty());
}

TEST(TimeEvaluator, PreprocessRunsBeforeEachRepeat) {
  ScriptedEvaluation s({absl::Microseconds(1)});
  TimeEvaluatorOptions options;
  options.number = 2;
  options.repeat = 3;
  options.preprocess = [&] {
    s.events().push_back("pre");
    return absl::OkStatus();
  };
  ASSERT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options), IsOk());
  // The step runs outside the timed region.
  EXPECT_THAT(s.events(),
              ElementsAre("call",                                  // discarded first call
                          "pre", "start", "call", "call", "stop",  // repeat 1
                          "pre", "start", "call", "call", "stop",  // repeat 2
                          "pre", "start", "call", "call", "stop"));
}

TEST(TimeEvaluator, WarmUpCallsRunUntimedForTheirTimeBeforeTheRepeats) {
  ScriptedEvaluation s({absl::Microseconds(1)});
  TimeEvaluatorOptions options;
  options.repeat = 2;
  options.warmup = absl::Microseconds(3500);
  // Each call takes 1 ms of the clock: the discarded one, then four to pass 3.5 ms.
  const auto call = [&] {
    s.clock().Advance(absl::Milliseconds(1));
    return s.Call();
  };
  ASSERT_THAT(s.Evaluator().Evaluate(call, options), IsOk());
  EXPECT_THAT(s.events(), ElementsAre("call", "call", "call", "call", "call",  //
                                      "start", "call", "stop", "start", "call", "stop"));
  // An error of a warm-up call ends the evaluation.
  int calls = 0;
  EXPECT_THAT(s.Evaluator().Evaluate(
                  [&] {
                    s.clock().Advance(absl::Milliseconds(1));
                    return ++calls == 3 ? absl::AbortedError("returned 2") : absl::OkStatus();
                  },
                  options),
              StatusIs(absl::StatusCode::kAborted, "returned 2"));
  options.warmup = absl::Milliseconds(-1);
  EXPECT_THAT(s.Evaluator().Evaluate(call, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warmup_ms = -1")));
}

TEST(TimeEvaluator, BeforeRepeatRunsFirstWithTheRepeatsIndex) {
  ScriptedEvaluation s({absl::Microseconds(1)});
  TimeEvaluatorOptions options;
  options.repeat = 3;
  options.before_repeat = [&](int64_t repeat) {
    s.events().push_back("place " + std::to_string(repeat));
    return absl::OkStatus();
  };
  options.preprocess = [&] {
    s.events().push_back("pre");
    return absl::OkStatus();
  };
  ASSERT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options), IsOk());
  EXPECT_THAT(s.events(), ElementsAre("call",                                     //
                                      "place 0", "pre", "start", "call", "stop",  //
                                      "place 1", "pre", "start", "call", "stop",  //
                                      "place 2", "pre", "start", "call", "stop"));
  options.before_repeat = [](int64_t) { return absl::DataLossError("cannot move"); };
  EXPECT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options),
              StatusIs(absl::StatusCode::kDataLoss, "cannot move"));
}

TEST(TimeEvaluator, ErrorsOfThePreprocessAndTheFunctionEndTheEvaluation) {
  ScriptedEvaluation s({absl::Microseconds(1)});
  TimeEvaluatorOptions options;
  options.repeat = 3;
  options.preprocess = [] { return absl::AbortedError("preprocess failed"); };
  EXPECT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options),
              StatusIs(absl::StatusCode::kAborted, "preprocess failed"));

  options.preprocess = nullptr;
  options.number = 10;
  int calls = 0;
  EXPECT_THAT(
      s.Evaluator().Evaluate(
          [&] { return ++calls == 4 ? absl::AbortedError("returned 3") : absl::OkStatus(); },
          options),
      StatusIs(absl::StatusCode::kAborted, "returned 3"));
  EXPECT_EQ(calls, 4);  // stopped at the failing call
}

// Counts what the evaluator asks of the CPU's DeviceApi.
class CountingApi final : public DeviceApi {
 public:
  absl::Status Sync(base::Device d) override {
    ++syncs;
    return cpu->Sync(d);
  }
  absl::StatusOr<void*> Alloc(base::Device d, size_t bytes) override {
    ++allocs;
    if (fail_alloc) return absl::ResourceExhaustedError("no memory");
    return cpu->Alloc(d, bytes);
  }
  void Free(base::Device d, void* p) override {
    if (p != nullptr) ++frees;
    cpu->Free(d, p);
  }
  absl::Status Copy(base::Device d, void* dst, const void* src, size_t n, CopyKind k) override {
    ++copies;
    copied_bytes = n;
    return cpu->Copy(d, dst, src, n, k);
  }
  absl::Status Memset(base::Device d, void* p, uint8_t v, size_t n) override {
    return cpu->Memset(d, p, v, n);
  }
  absl::Status FlushCache(base::Device d, const void* p, size_t n) override {
    return cpu->FlushCache(d, p, n);
  }

  DeviceApi* cpu = *GetDeviceApi(base::DeviceType::kCpu);
  int syncs = 0, allocs = 0, frees = 0, copies = 0;
  size_t copied_bytes = 0;
  bool fail_alloc = false;
};

TEST(TimeEvaluator, CacheFlushCopiesBeforeEveryTimedAttemptAndFreesItsBuffers) {
  ScriptedEvaluation s({absl::Milliseconds(1), absl::Milliseconds(2)});
  CountingApi api;
  TimeEvaluatorOptions options;
  options.repeat = 3;
  options.min_repeat = absl::Microseconds(1500);
  options.cache_flush_bytes = 1 << 20;
  ASSERT_THAT(s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options), IsOk());
  EXPECT_EQ(s.attempts().size(), 4u);  // one growth step, then three repeats
  EXPECT_EQ(api.copies, 4);
  EXPECT_EQ(api.copied_bytes, 1u << 20);
  EXPECT_EQ(api.allocs, 2);
  EXPECT_EQ(api.frees, 2);
  EXPECT_GE(api.syncs, 4);

  CountingApi no_flush;
  options.cache_flush_bytes = 0;
  ASSERT_THAT(s.Evaluator(&no_flush).Evaluate([&] { return s.Call(); }, options), IsOk());
  EXPECT_EQ(no_flush.copies, 0);
  EXPECT_EQ(no_flush.allocs, 0);
}

// Records the flushes (copies) and synchronisations among the timer's events.
class EventApi final : public DeviceApi {
 public:
  explicit EventApi(std::vector<std::string>& events) : events_(events) {}
  absl::Status Sync(base::Device d) override {
    events_.push_back("sync");
    return cpu_->Sync(d);
  }
  absl::StatusOr<void*> Alloc(base::Device d, size_t bytes) override {
    return cpu_->Alloc(d, bytes);
  }
  void Free(base::Device d, void* p) override { cpu_->Free(d, p); }
  absl::Status Copy(base::Device d, void* dst, const void* src, size_t n, CopyKind k) override {
    events_.push_back("flush");
    return cpu_->Copy(d, dst, src, n, k);
  }
  absl::Status Memset(base::Device d, void* p, uint8_t v, size_t n) override {
    return cpu_->Memset(d, p, v, n);
  }
  absl::Status FlushCache(base::Device d, const void* p, size_t n) override {
    return cpu_->FlushCache(d, p, n);
  }

 private:
  std::vector<std::string>& events_;
  DeviceApi* cpu_ = *GetDeviceApi(base::DeviceType::kCpu);
};

TEST(TimeEvaluator, TheFlushAndItsSynchronisationAreOutsideTheTimedRegion) {
  ScriptedEvaluation s({absl::Milliseconds(1)});
  EventApi api(s.events());
  TimeEvaluatorOptions options;
  options.number = 3;
  options.repeat = 2;
  options.cache_flush_bytes = 4096;
  ASSERT_THAT(s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options), IsOk());
  // Hot: one flush per timed attempt, the calls back to back.
  EXPECT_THAT(s.events(), ElementsAre("call", "sync",  // discarded call; the flush buffers made
                                      "flush", "sync", "start", "call", "call", "call", "stop",  //
                                      "flush", "sync", "start", "call", "call", "call", "stop"));
}

TEST(TimeEvaluator, ColdFlushesBeforeEveryCallAndTimesEachAlone) {
  // Each call reads 1 ms: a repeat of 3 calls is the sum, 3 ms, 1 ms per call.
  ScriptedEvaluation s({absl::Milliseconds(1)});
  EventApi api(s.events());
  TimeEvaluatorOptions options;
  options.number = 3;
  options.repeat = 2;
  options.cache_flush_bytes = 4096;
  options.cold = true;
  auto evaluation = s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(evaluation, IsOk());
  EXPECT_THAT(evaluation->seconds_per_call, ElementsAre(DoubleEq(1e-3), DoubleEq(1e-3)));
  EXPECT_THAT(evaluation->numbers, ElementsAre(3, 3));
  std::vector<std::string> expected = {"call", "sync"};
  for (int call = 0; call < 6; ++call) {
    for (const char* e : {"flush", "sync", "start", "call", "stop"}) expected.push_back(e);
  }
  EXPECT_EQ(s.events(), expected);

  // Cold needs something to flush with.
  options.cache_flush_bytes = 0;
  EXPECT_THAT(s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cache_flush_bytes")));
}

TEST(TimeEvaluator, ColdCountsTheFlushesTowardsMinRepeatButNotInTheTime) {
  // Each flush takes 4 ms of the clock, each call 1 ms: one call and its flush pass min_repeat
  // 2.5 ms, so number stays 1, and the time is the call's alone.
  ScriptedEvaluation s({absl::Milliseconds(1)});
  class SlowFlush final : public DeviceApi {
   public:
    explicit SlowFlush(FakeClock& clock) : clock_(clock) {}
    absl::Status Sync(base::Device) override { return absl::OkStatus(); }
    absl::StatusOr<void*> Alloc(base::Device d, size_t n) override { return cpu_->Alloc(d, n); }
    void Free(base::Device d, void* p) override { cpu_->Free(d, p); }
    absl::Status Copy(base::Device d, void* dst, const void* src, size_t n, CopyKind k) override {
      clock_.Advance(absl::Milliseconds(4));
      return cpu_->Copy(d, dst, src, n, k);
    }
    absl::Status Memset(base::Device d, void* p, uint8_t v, size_t n) override {
      return cpu_->Memset(d, p, v, n);
    }
    absl::Status FlushCache(base::Device, const void*, size_t) override { return absl::OkStatus(); }

   private:
    FakeClock& clock_;
    DeviceApi* cpu_ = *GetDeviceApi(base::DeviceType::kCpu);
  } api(s.clock());
  TimeEvaluatorOptions options;
  options.min_repeat = absl::Microseconds(2500);
  options.cache_flush_bytes = 64;
  options.cold = true;
  options.repeat = 2;
  auto evaluation = s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(evaluation, IsOk());
  EXPECT_THAT(s.attempts(), ElementsAre(1, 1));
  EXPECT_THAT(evaluation->numbers, ElementsAre(1, 1));
  EXPECT_THAT(evaluation->seconds_per_call, ElementsAre(DoubleEq(1e-3), DoubleEq(1e-3)));
}

TEST(TimeEvaluator, ColdGrowsNumberOnTheCallsTimeAlone) {
  // 1 call of 1 ms against min_repeat 2.5 ms: number grows to 3 (max(2.5 / 1 + 1, 1.618)).
  ScriptedEvaluation s({absl::Milliseconds(1)});
  EventApi api(s.events());
  TimeEvaluatorOptions options;
  options.min_repeat = absl::Microseconds(2500);
  options.cache_flush_bytes = 64;
  options.cold = true;
  auto evaluation = s.Evaluator(&api).Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(evaluation, IsOk());
  EXPECT_THAT(s.attempts(), ElementsAre(1, 1, 1, 1));  // one alone, then three alone
  EXPECT_EQ(evaluation->final_number, 3);
  EXPECT_THAT(evaluation->seconds_per_call, ElementsAre(DoubleEq(1e-3)));
}

TEST(TimeEvaluator, FlushBuffersAreFreedOnErrorPaths) {
  ScriptedEvaluation s({absl::Milliseconds(1)});
  CountingApi api;
  TimeEvaluatorOptions options;
  options.cache_flush_bytes = 4096;
  int calls = 0;
  EXPECT_THAT(
      s.Evaluator(&api).Evaluate(
          [&] { return ++calls == 2 ? absl::AbortedError("x") : absl::OkStatus(); }, options),
      StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(api.allocs, 2);
  EXPECT_EQ(api.frees, 2);

  CountingApi failing;
  failing.fail_alloc = true;
  EXPECT_THAT(s.Evaluator(&failing).Evaluate([&] { return s.Call(); }, options),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(TimeEvaluator, OptionsOutOfRangeAreInvalidArgumentNamingTheOption) {
  struct Case {
    void (*set)(TimeEvaluatorOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](TimeEvaluatorOptions& o) { o.number = 0; }, "number = 0 is out of range"},
      {[](TimeEvaluatorOptions& o) { o.number = kMaxNumber + 1; }, "number = "},
      {[](TimeEvaluatorOptions& o) { o.repeat = 0; }, "repeat = 0 is out of range"},
      {[](TimeEvaluatorOptions& o) { o.min_repeat = absl::Milliseconds(-1); },
       "min_repeat_ms = -1"},
      {[](TimeEvaluatorOptions& o) { o.limit_zero_time_iterations = -1; },
       "limit_zero_time_iterations = -1"},
      {[](TimeEvaluatorOptions& o) { o.cooldown_interval = absl::Milliseconds(-2); },
       "cooldown_interval_ms = -2"},
      {[](TimeEvaluatorOptions& o) { o.repeats_to_cooldown = 0; },
       "repeats_to_cooldown = 0 is out of range (accepted: 1 or more"},
      {[](TimeEvaluatorOptions& o) { o.cache_flush_bytes = -4; }, "cache_flush_bytes = -4"},
  };
  for (const Case& c : cases) {
    ScriptedEvaluation s({absl::Microseconds(1)});
    TimeEvaluatorOptions options;
    c.set(options);
    EXPECT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
    EXPECT_EQ(s.calls(), 0) << "the function must not run with bad options";
  }
}

TEST(TimeEvaluator, ConvergesAtMinRepeatsWhenTheRepeatsAgree) {
  ScriptedEvaluation s({absl::Microseconds(100)});
  TimeEvaluatorOptions options;
  options.repeat = 1000;
  options.max_relative_stddev = 0.01;
  options.min_repeats = 4;
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call.size(), 4u);
  EXPECT_TRUE(result->converged);
  EXPECT_EQ(result->stop, StopReason::kConverged);
  EXPECT_EQ(result->rel_stddev, 0);
}

TEST(TimeEvaluator, ConvergesOnceTheSpreadFallsUnderTheThreshold) {
  // 110, 90, then 100 for ever: the sample relative std is sqrt(200 / (n - 1)) % after n
  // repeats — 10% after 3, 5.8% after 7, and first under 5.5% after 8 (5.3%).
  ScriptedEvaluation s({absl::Microseconds(110), absl::Microseconds(90), absl::Microseconds(100)});
  TimeEvaluatorOptions options;
  options.repeat = 100;
  options.max_relative_stddev = 0.055;
  options.min_repeats = 3;
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call.size(), 8u);
  EXPECT_TRUE(result->converged);
  EXPECT_NEAR(result->rel_stddev,
              report::CoefficientOfVariation(result->seconds_per_call) * std::sqrt(8.0 / 7), 1e-12);
  EXPECT_LE(result->rel_stddev, 0.055);
}

TEST(TimeEvaluator, StopsAtTheTimeBudgetUnconverged) {
  // Alternating 1 ms and 3 ms: a relative std of 50% for ever. The scripted timer advances the
  // fake clock by what it reads: 1+3+1+3+1 = 9 ms is within the budget of 10, the sixth repeat
  // brings 12 and is the last.
  std::vector<absl::Duration> readings;
  for (int i = 0; i < 50; ++i) {
    readings.push_back(absl::Milliseconds(i % 2 == 0 ? 1 : 3));
  }
  ScriptedEvaluation s(readings);
  TimeEvaluatorOptions options;
  options.repeat = 1000;
  options.max_relative_stddev = 0.01;
  options.max_time = absl::Milliseconds(10);
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_FALSE(result->converged);
  EXPECT_EQ(result->stop, StopReason::kTimeBudget);
  EXPECT_EQ(result->seconds_per_call.size(), 6u);
  EXPECT_NEAR(result->rel_stddev, 0.5 * std::sqrt(6.0 / 5), 1e-9);  // sample std, n - 1
}

TEST(TimeEvaluator, StopsAtTheRepeatCountUnconverged) {
  ScriptedEvaluation s({absl::Milliseconds(1), absl::Milliseconds(1), absl::Milliseconds(3),
                        absl::Milliseconds(1), absl::Milliseconds(3)});
  TimeEvaluatorOptions options;
  options.repeat = 4;
  options.max_relative_stddev = 0.01;
  options.min_repeats = 3;
  options.max_time = absl::Hours(1);
  auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_FALSE(result->converged);
  EXPECT_EQ(result->stop, StopReason::kRepeatCount);
  EXPECT_EQ(result->seconds_per_call.size(), 4u);
}

TEST(TimeEvaluator, AnOutlierFilterLetsASingleSpikeConverge) {
  // About 100 µs with one 10 ms spike at the third repeat: unfiltered, the spike alone keeps
  // the relative std far above 5%; filtered, it is set aside and the rest agree (1.7%).
  const std::vector<absl::Duration> readings = {absl::Microseconds(100), absl::Microseconds(102),
                                                absl::Milliseconds(10),  absl::Microseconds(98),
                                                absl::Microseconds(101), absl::Microseconds(99)};
  for (OutlierFilter filter : {OutlierFilter::kNone, OutlierFilter::kTukey}) {
    ScriptedEvaluation s(readings);
    TimeEvaluatorOptions options;
    options.repeat = 200;
    options.max_relative_stddev = 0.05;
    options.min_repeats = 5;
    options.outliers = filter;
    auto result = s.Evaluator().Evaluate([&] { return s.Call(); }, options);
    ASSERT_THAT(result, IsOk());
    ASSERT_GE(result->seconds_per_call.size(), 5u);
    EXPECT_DOUBLE_EQ(result->seconds_per_call[2], 0.010);  // the raw repeats keep the spike
    if (filter == OutlierFilter::kTukey) {
      EXPECT_TRUE(result->converged);
      EXPECT_EQ(result->seconds_per_call.size(), 5u);
      EXPECT_THAT(result->outliers, ElementsAre(2));
    } else {
      EXPECT_FALSE(result->converged);  // 200 repeats are not enough to dilute it under 5%
      EXPECT_EQ(result->seconds_per_call.size(), 200u);
      EXPECT_THAT(result->outliers, ::testing::IsEmpty());
    }
  }
}

TEST(TimeEvaluator, NoSpreadIsKnownFromOneRepeatOrFromZeroReadings) {
  // The budget ends after one repeat: no spread, not converged.
  ScriptedEvaluation one({absl::Milliseconds(20)});
  TimeEvaluatorOptions options;
  options.repeat = 100;
  options.max_relative_stddev = 0.5;
  options.max_time = absl::Milliseconds(10);
  auto result = one.Evaluator().Evaluate([&] { return one.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call.size(), 1u);
  EXPECT_TRUE(std::isnan(result->rel_stddev));
  EXPECT_FALSE(result->converged);
  // A clock that reads nothing: a mean of zero is no measurement to converge on.
  ScriptedEvaluation zero({absl::ZeroDuration()});
  options.max_time = absl::Hours(1);
  options.repeat = 10;
  options.limit_zero_time_iterations = 0;
  result = zero.Evaluator().Evaluate([&] { return zero.Call(); }, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->seconds_per_call.size(), 10u);
  EXPECT_FALSE(result->converged);
}

TEST(TimeEvaluator, ConvergenceOptionsOutOfRangeAreInvalidArgument) {
  const auto check = [](void (*set)(TimeEvaluatorOptions&), const char* message) {
    ScriptedEvaluation s({absl::Microseconds(1)});
    TimeEvaluatorOptions options;
    options.repeat = 10;
    options.max_relative_stddev = 0.01;
    set(options);
    EXPECT_THAT(s.Evaluator().Evaluate([&] { return s.Call(); }, options),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  };
  check([](TimeEvaluatorOptions& o) { o.max_relative_stddev = -0.1; }, "max_relative_stddev");
  check([](TimeEvaluatorOptions& o) { o.max_relative_stddev = std::nan(""); },
        "max_relative_stddev = nan");
  check([](TimeEvaluatorOptions& o) { o.min_repeats = 1; }, "min_repeats = 1");
  check([](TimeEvaluatorOptions& o) { o.min_repeats = 11; }, "2 to repeat = 10");
  check([](TimeEvaluatorOptions& o) { o.max_time = absl::ZeroDuration(); }, "max_time_ms = 0");
  check([](TimeEvaluatorOptions& o) { o.repeat = kMaxRepeat + 1; }, "repeat = 1000001");
}

TEST(TimeEvaluator, RealClockRepeatsLastAtLeastMinRepeat) {
  auto evaluator = TimeEvaluator::Create(kCpu);
  ASSERT_THAT(evaluator, IsOk());
  TimeEvaluatorOptions options;
  options.repeat = 3;
  options.min_repeat = absl::Milliseconds(2);
  volatile int64_t sink = 0;
  auto result = evaluator->Evaluate(
      [&] {
        for (int i = 0; i < 1000; ++i) sink = sink + i;
        return absl::OkStatus();
      },
      options);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(result->seconds_per_call.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    // By construction a repeat ends only once it has lasted min_repeat.
    EXPECT_GE(result->seconds_per_call[i] * static_cast<double>(result->numbers[i]), 0.002);
  }
}

}  // namespace
}  // namespace kprof::core
