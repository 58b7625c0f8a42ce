#include "report/ranking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::report {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

TEST(RacePlanTest, GrowsByHalfUpToTheMost) {
  EXPECT_THAT(RacePlan(10, 300), ElementsAre(10, 15, 23, 35, 53, 80, 120, 180, 270, 300));
  EXPECT_THAT(RacePlan(2, 4), ElementsAre(2, 3, 4));  // at least one more each round
  EXPECT_THAT(RacePlan(10, 10), ElementsAre(10));
}

// Moses' interval for samples of 5 and 5 at 95% uses the third smallest and third largest of
// the 25 differences: P(U <= 2) = 4/252 is within 2.5%, P(U <= 3) = 7/252 is not (the critical
// value 2 of the U tables).
TEST(LowerCountTest, MatchesTheUTables) {
  EXPECT_EQ(LowerCount(5, 5, 0.05), 3u);
  EXPECT_EQ(LowerCount(5, 5, 0.01), 1u);      // P(U = 0) = 1/252 <= 0.005; P(U <= 1) is not
  EXPECT_EQ(LowerCount(5, 5, 0.001), 0u);     // too few repeats for 99.9%
  EXPECT_EQ(LowerCount(8, 8, 0.05), 14u);     // table: critical value 13
  EXPECT_EQ(LowerCount(20, 20, 0.05), 128u);  // table: 127
  // Past exact counting, the normal approximation: close to mn/2 - 1.96 sd.
  const double sd = std::sqrt(200.0 * 200 * 401 / 12);
  EXPECT_NEAR(static_cast<double>(LowerCount(200, 200, 0.05)), 20000 - 1.96 * sd, 2);
  EXPECT_EQ(LowerCount(200, 200, 0.05), 17734u);  // as the Python client computes it
  EXPECT_EQ(LowerCount(100, 60, 0.001), 2066u);
  // Whatever alpha, the ends stay in order (at most the middle of the m n differences).
  EXPECT_EQ(LowerCount(5, 5, 5.0), 12u);
}

TEST(LogShiftTest, FindsAKnownShiftAndHoldsItInTheInterval) {
  std::mt19937_64 random(7);
  std::lognormal_distribution<double> noise(0, 0.01);
  std::vector<double> base, fresh;
  for (int i = 0; i < 40; ++i) {
    base.push_back(100e-6 * noise(random));
    fresh.push_back(103e-6 * noise(random));
  }
  const Shift shift = LogShift(base, fresh, 0.01);
  EXPECT_NEAR(std::expm1(shift.estimate), 0.03, 0.006);
  EXPECT_LT(shift.interval.low, std::log(1.03));
  EXPECT_GT(shift.interval.high, std::log(1.03));
  EXPECT_GT(shift.interval.low, 0);  // 3% with 1% noise and 40 repeats: surely slower
  // A sample shifted exactly: the estimate is the shift.
  std::vector<double> shifted;
  for (const double v : base) shifted.push_back(v * std::exp(0.1));
  EXPECT_NEAR(LogShift(base, shifted, 0.05).estimate, 0.1, 1e-12);
  // Too few repeats for the confidence: an interval without ends.
  const Shift tiny = LogShift({1, 2, 3}, {2, 3, 4}, 0.001);
  EXPECT_TRUE(std::isinf(tiny.interval.low) && std::isinf(tiny.interval.high));
}

// LogShift as its definition reads: every pairwise difference held and sorted.
Shift EveryDifference(const std::vector<double>& base, const std::vector<double>& fresh,
                      double alpha) {
  std::vector<double> d;
  for (const double a : base) {
    for (const double b : fresh) d.push_back(std::log(b) - std::log(a));
  }
  std::sort(d.begin(), d.end());
  const size_t c = LowerCount(base.size(), fresh.size(), alpha);
  Shift shift;
  shift.interval = c < 1 ? Interval{-INFINITY, INFINITY} : Interval{d[c - 1], d[d.size() - c]};
  const size_t middle = (d.size() - 1) / 2;
  shift.estimate = d.size() % 2 == 1 ? d[middle] : d[middle] + (d[middle + 1] - d[middle]) * 0.5;
  return shift;
}

TEST(LogShiftTest, SelectsTheSameBitsAsSortingEveryDifference) {
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t m = 1 + random() % 90, n = 1 + random() % 90;
    // Half the trials from a few values only: ties within and across the samples, as times
    // read off a coarse clock have.
    const bool coarse = trial % 2 == 0;
    std::lognormal_distribution<double> spread(0, 0.05);
    const auto draw = [&] {
      return coarse ? 1e-6 * static_cast<double>(1 + random() % 4) : 1e-4 * spread(random);
    };
    std::vector<double> base(m), fresh(n);
    for (double& v : base) v = draw();
    for (double& v : fresh) v = draw();
    const Shift fast = LogShift(base, fresh, 0.05), slow = EveryDifference(base, fresh, 0.05);
    ASSERT_EQ(fast.estimate, slow.estimate) << m << " x " << n << " trial " << trial;
    ASSERT_EQ(fast.interval.low, slow.interval.low) << m << " x " << n << " trial " << trial;
    ASSERT_EQ(fast.interval.high, slow.interval.high) << m << " x " << n << " trial " << trial;
  }
}

TEST(LogShiftTest, TakesAHundredThousandRepeatsAsideWithoutTheirTenBillionDifferences) {
  std::mt19937_64 random(5);
  std::lognormal_distribution<double> noise(0, 0.02);
  std::vector<double> base(100000), fresh(100000);
  for (double& v : base) v = 100e-6 * noise(random);
  for (double& v : fresh) v = 102e-6 * noise(random);
  const Shift shift = LogShift(base, fresh, 0.01);  // held, the differences would be 80 GB
  EXPECT_NEAR(std::expm1(shift.estimate), 0.02, 0.001);
  EXPECT_GT(shift.interval.low, 0);
  EXPECT_LT(shift.interval.low, shift.estimate);
  EXPECT_GT(shift.interval.high, shift.estimate);
}

// Seconds per call of a kernel of `cost` seconds: log-normal with a 1% coefficient of variation,
// and now and then (2%) a repeat 3x as long, as a preempted one is.
class Kernel {
 public:
  Kernel(double cost, uint64_t seed) : cost_(cost), random_(seed) {}
  std::vector<double> Repeats(size_t n) {
    std::vector<double> out;
    for (size_t i = 0; i < n; ++i) {
      double v = cost_ * noise_(random_);
      if (outlier_(random_) < 0.02) v *= 3;
      out.push_back(v);
    }
    return out;
  }

 private:
  double cost_;
  std::mt19937_64 random_;
  std::lognormal_distribution<double> noise_{0, 0.01};
  std::uniform_real_distribution<double> outlier_{0, 1};
};

// 20 candidates: three within 0.5% of each other, the rest 5% to 37% slower.
std::vector<double> Costs() {
  std::vector<double> costs = {100e-6, 100.3e-6, 100.5e-6};
  for (int i = 0; i < 17; ++i) costs.push_back(100e-6 * (1.05 + 0.02 * i));
  return costs;
}

std::vector<std::string> Names(size_t n) {
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back("k" + std::to_string(i));
  return names;
}

struct RaceResult {
  Ranking ranking;
  size_t repeats = 0;
};

RaceResult RunRace(const std::vector<double>& costs, uint64_t seed, const RankOptions& options) {
  std::vector<Kernel> kernels;
  for (size_t i = 0; i < costs.size(); ++i) kernels.emplace_back(costs[i], seed * 1000 + i);
  Race race(Names(costs.size()), options);
  RaceResult result;
  for (auto round = race.NextRound(); !round.empty(); round = race.NextRound()) {
    for (const auto& [i, add] : round) {
      race.Add(i, kernels[i].Repeats(add));
      result.repeats += add;
    }
  }
  result.ranking = race.Current();
  return result;
}

// The fixed plan: every candidate `n` repeats, ranked once (at the same confidence: split over
// the candidates, and one look).
Ranking RunFixed(const std::vector<double>& costs, uint64_t seed, size_t n,
                 const RankOptions& options) {
  std::vector<std::pair<std::string, std::vector<double>>> candidates;
  const std::vector<std::string> names = Names(costs.size());
  for (size_t i = 0; i < costs.size(); ++i) {
    candidates.emplace_back(names[i], Kernel(costs[i], seed * 1000 + i).Repeats(n));
  }
  return RankRepeats(candidates, options);
}

bool FindsTheThree(const Ranking& ranking) {
  std::vector<std::string> ties = ranking.Ties();
  std::sort(ties.begin(), ties.end());
  return ranking.Decided() && ties == std::vector<std::string>{"k0", "k1", "k2"};
}

// The goal: the race finds exactly the three, decided, in less than half the repeats the fixed
// plan needs to do as well as often as the confidence promises (95% of the runs).
TEST(RaceTest, FindsTheTieSetInUnderHalfTheRepeatsOfAFixedPlan) {
  const std::vector<double> costs = Costs();
  const RankOptions options;  // 95%, 1%, 10 to 300 repeats
  constexpr int kRuns = 20;
  size_t race_repeats = 0;
  int race_right = 0;
  for (int seed = 1; seed <= kRuns; ++seed) {
    const RaceResult race = RunRace(costs, static_cast<uint64_t>(seed), options);
    race_repeats += race.repeats;
    race_right += FindsTheThree(race.ranking) ? 1 : 0;
    EXPECT_THAT(race.ranking.Fastest(), ::testing::AnyOf("k0", "k1", "k2"));
    // The losers stop early: none past the plan's third step.
    for (const RankedCandidate& c : race.ranking.candidates) {
      if (c.state == RankState::kSlower) {
        EXPECT_LE(c.repeats, 23u) << c.name;
      }
    }
  }
  EXPECT_GE(race_right, kRuns * 95 / 100);
  const double mean = static_cast<double>(race_repeats) / kRuns;
  // A fixed plan of twice the race's repeats (the same total over 20 candidates, doubled) is
  // right less often than 95% of the time: it needs more than twice the race's.
  const auto fixed_right = [&](size_t n) {
    int right = 0;
    for (int seed = 1; seed <= kRuns; ++seed) {
      right +=
          FindsTheThree(RunFixed(costs, static_cast<uint64_t>(seed) + 500, n, options)) ? 1 : 0;
    }
    return right;
  };
  const auto doubled = static_cast<size_t>(std::ceil(2 * mean / static_cast<double>(costs.size())));
  const int doubled_right = fixed_right(doubled);
  EXPECT_LT(doubled_right, kRuns * 95 / 100) << "fixed plan of " << doubled << " each";
  // ...and the fixed plan does get there with enough (so the comparison is not empty).
  EXPECT_GE(fixed_right(300), kRuns * 95 / 100);
  std::printf(
      "race: %.0f repeats on average (%d of %d right); a fixed plan of %zu each (%zu in "
      "all) is right %d of %d times\n",
      mean, race_right, kRuns, doubled, doubled * costs.size(), doubled_right, kRuns);
}

// Five candidates of one distribution: no verdict of "slower" in (far) more than 5% of races.
TEST(RaceTest, EqualCandidatesAreNotFoundSlowerMoreOftenThanTheConfidenceAllows) {
  const std::vector<double> costs(5, 50e-6);
  RankOptions options;
  options.max_repeats = 100;
  int wrong = 0;
  constexpr int kRuns = 40;
  for (int seed = 1; seed <= kRuns; ++seed) {
    const Ranking ranking = RunRace(costs, static_cast<uint64_t>(seed) + 9000, options).ranking;
    bool any_slower = false;
    for (const RankedCandidate& c : ranking.candidates) {
      any_slower = any_slower || c.state == RankState::kSlower;
    }
    wrong += any_slower ? 1 : 0;
    if (!any_slower) {
      EXPECT_EQ(ranking.Ties().size(), 5u);
    }
  }
  EXPECT_LE(wrong, 2);
}

TEST(RankRepeatsTest, FailsCandidatesWithoutTimesAndOrdersTheRest) {
  const Ranking ranking = RankRepeats(
      {{"zero", {1e-3, 0.0, 1e-3}},
       {"slow", {2e-3, 2.01e-3, 1.99e-3, 2e-3, 2.02e-3, 1.98e-3, 2e-3, 2.01e-3, 1.99e-3, 2e-3}},
       {"none", {}},
       {"fast", {1e-3, 1.01e-3, 0.99e-3, 1e-3, 1.02e-3, 0.98e-3, 1e-3, 1.01e-3, 0.99e-3, 1e-3}}},
      {});
  ASSERT_EQ(ranking.candidates.size(), 4u);
  EXPECT_EQ(ranking.candidates[0].name, "fast");
  EXPECT_EQ(ranking.candidates[0].state, RankState::kFastest);
  EXPECT_EQ(ranking.candidates[1].name, "slow");
  EXPECT_EQ(ranking.candidates[1].state, RankState::kSlower);
  EXPECT_NEAR(ranking.candidates[1].change, 1.0, 0.02);
  EXPECT_EQ(ranking.candidates[2].name, "zero");
  EXPECT_EQ(ranking.candidates[2].state, RankState::kFailed);
  EXPECT_EQ(ranking.candidates[2].error, "a repeat that is not a positive time");
  EXPECT_EQ(ranking.candidates[3].error, "no repeats");
  EXPECT_EQ(ranking.Fastest(), "fast");
  EXPECT_THAT(ranking.Ties(), ElementsAre("fast"));
  EXPECT_TRUE(ranking.Decided());
  // Split over two valid candidates' one comparison and one look.
  EXPECT_EQ(ranking.alpha, 1 - 0.95);
  EXPECT_EQ(ranking.repeats, 23u);
}

TEST(RankRepeatsTest, EveryCandidateFailedHasNoFastest) {
  const Ranking ranking = RankRepeats({{"a", {}}, {"b", {-1.0}}}, {});
  EXPECT_EQ(ranking.Fastest(), "");
  EXPECT_TRUE(ranking.Ties().empty());
}

TEST(RankRepeatsTest, TooFewRepeatsLeaveCandidatesUndecided) {
  const Ranking ranking = RankRepeats({{"a", {1e-3, 1.01e-3}}, {"b", {1.5e-3, 1.49e-3}}}, {});
  EXPECT_EQ(ranking.candidates[1].state, RankState::kUndecided);
  EXPECT_FALSE(ranking.Decided());
  EXPECT_THAT(ranking.Ties(), UnorderedElementsAre("a", "b"));
}

TEST(RaceTest, MeasuresOnlyTheFastestAndTheUndecidedAfterTheFirstRound) {
  Race race({"fast", "slow", "broken"}, {});
  auto round = race.NextRound();
  ASSERT_EQ(round.size(), 3u);
  for (const auto& [i, add] : round) EXPECT_EQ(add, 10u);
  Kernel fast(1e-3, 1), slow(1.5e-3, 2);
  race.Add(0, fast.Repeats(10));
  race.Add(1, slow.Repeats(10));
  race.Fail(2, "INTERNAL: the worker crashed");
  // "slow" is out after one round, and "fast" alone: nothing left in doubt.
  EXPECT_TRUE(race.NextRound().empty());
  const Ranking ranking = race.Current();
  EXPECT_EQ(ranking.Fastest(), "fast");
  EXPECT_EQ(ranking.candidates[1].state, RankState::kSlower);
  EXPECT_EQ(ranking.candidates[2].state, RankState::kFailed);
  EXPECT_EQ(ranking.candidates[2].error, "INTERNAL: the worker crashed");
  EXPECT_EQ(ranking.rounds, 1u);
  EXPECT_EQ(ranking.repeats, 20u);
}

// The fastest fails after the others were found slower than it: no fastest is left, and the
// others stay slower (nothing to measure them against).
TEST(RaceTest, AFastestThatFailsLateLeavesTheSlowerSlower) {
  Race race({"fast", "slow"}, {});
  race.NextRound();
  Kernel fast(1e-3, 5), slow(2e-3, 6);
  race.Add(0, fast.Repeats(10));
  race.Add(1, slow.Repeats(10));
  EXPECT_TRUE(race.NextRound().empty());  // decided: "slow" is slower
  race.Fail(0, "UNAVAILABLE: the daemon went away");
  const Ranking ranking = race.Current();
  EXPECT_EQ(ranking.Fastest(), "");
  ASSERT_EQ(ranking.candidates.size(), 2u);
  EXPECT_EQ(ranking.candidates[0].name, "slow");
  EXPECT_EQ(ranking.candidates[0].state, RankState::kSlower);
  EXPECT_TRUE(std::isnan(ranking.candidates[0].change));
  EXPECT_EQ(ranking.candidates[1].state, RankState::kFailed);
  EXPECT_TRUE(ranking.Ties().empty());
}

// A candidate found slower keeps the change and interval of the round that decided it, however
// the fastest's later repeats move: the table never shows "slower" beside an interval that holds
// no change.
TEST(RaceTest, ASlowerCandidateKeepsTheFiguresOfItsVerdict) {
  Race race({"a", "b", "slow"}, {});
  Kernel a(1e-3, 7), b(1.004e-3, 8), slow(1.3e-3, 9);
  race.NextRound();
  race.Add(0, a.Repeats(10));
  race.Add(1, b.Repeats(10));
  race.Add(2, slow.Repeats(10));
  const auto second = race.NextRound();  // "a" and "b" in doubt; "slow" found slower
  ASSERT_EQ(second.size(), 2u);
  const RankedCandidate at_first = race.Current().candidates.back();
  ASSERT_EQ(at_first.name, "slow");
  ASSERT_EQ(at_first.state, RankState::kSlower);
  EXPECT_EQ(at_first.decided_round, 1u);
  for (const auto& [i, add] : second) race.Add(i, (i == 0 ? a : b).Repeats(add));
  // The fastest's repeats now differ; the verdict's figures do not.
  const RankedCandidate later = race.Current().candidates.back();
  EXPECT_EQ(later.state, RankState::kSlower);
  EXPECT_EQ(later.decided_round, 1u);
  EXPECT_EQ(later.change, at_first.change);
  EXPECT_EQ(later.interval.low, at_first.interval.low);
  EXPECT_EQ(later.interval.high, at_first.interval.high);
  EXPECT_GT(later.interval.low, 0.01);
  // Ranked once from a set of repeats, nothing carries a round.
  EXPECT_EQ(RankRepeats({{"a", a.Repeats(10)}, {"slow", slow.Repeats(10)}}, {})
                .candidates[1]
                .decided_round,
            0u);
}

TEST(RaceTest, AWithdrawnRoundEndsTheRaceUndecided) {
  RankOptions options;
  options.threshold = 0;  // nothing can be shown tied: the race would run to the plan's end
  Race race({"a", "b"}, options);
  Kernel a(1e-3, 3), b(1e-3, 4);
  auto round = race.NextRound();
  race.Add(0, a.Repeats(10));
  race.Add(1, b.Repeats(10));
  round = race.NextRound();
  ASSERT_FALSE(round.empty());
  EXPECT_EQ(race.round(), 2u);
  race.Withdraw();
  EXPECT_EQ(race.round(), 1u);
  EXPECT_TRUE(race.NextRound().empty());
  const Ranking ranking = race.Current();
  EXPECT_FALSE(ranking.Decided());
  EXPECT_EQ(ranking.rounds, 1u);
}

}  // namespace
}  // namespace kprof::report
