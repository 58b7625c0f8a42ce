// The time evaluator's convergence: when the repeats agree, the time budget, the repeat count,
// outliers, and what no spread can be known from.
#include <cmath>
#include <string>
#include <vector>

#include "core/measure/time_evaluator.h"
#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/statistics.h"
#include "scripted_evaluation.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace kprof::core
