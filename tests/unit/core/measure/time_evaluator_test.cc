// The time evaluator: how number grows, the warm-up and hooks around repeats, errors, options.
#include "core/measure/time_evaluator.h"

#include <string>
#include <vector>

#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scripted_evaluation.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

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
