// The time evaluator's cache flush, warm and cold: where the flush lies against the timed
// region, what cold timing counts, and the buffers freed on every path.
#include <string>
#include <vector>

#include "core/measure/time_evaluator.h"
#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scripted_evaluation.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::FakeClock;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace kprof::core
