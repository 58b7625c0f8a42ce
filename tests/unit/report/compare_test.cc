#include "report/compare.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::report {
namespace {

TEST(SplitMix64Test, GivesTheReferenceSequence) {
  // The first outputs for seed 0 of Vigna's reference implementation.
  SplitMix64 random(0);
  EXPECT_EQ(random.Next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(random.Next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(random.Next(), 0x06c45d188009454full);
}

TEST(SplitMix64Test, BelowStaysInRangeAndCoversIt) {
  SplitMix64 random(kCompareSeed);
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const size_t v = random.Below(7);
    ASSERT_LT(v, 7u);
    ++seen[v];
  }
  for (int count : seen) EXPECT_NEAR(count, 1000, 150);
  EXPECT_EQ(random.Below(0), 0u);
}

// U and p as scipy 1.10.1's mannwhitneyu(x, y, alternative="two-sided") gives them: exact for
// small samples without ties, the normal approximation with ties or when both are large.
TEST(MannWhitneyTest, AgreesWithScipy) {
  struct Case {
    std::vector<double> x, y;
    double u, p;
    bool exact;
  };
  const std::vector<Case> cases = {
      {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, 0.0, 0.007936507936507936, true},
      {{1.1, 2.2, 3.3, 4.4}, {2.5, 3.6, 4.7, 5.8, 6.9, 8.0}, 3.0, 0.06666666666666667, true},
      {{3, 1, 2, 2, 5, 4, 4, 6, 7, 1},
       {2, 3, 3, 8, 9, 5, 6, 7, 8, 9, 10},
       22.5,
       0.023547854534506772,
       false},
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
       {3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5},
       135.0,
       0.6288590757223551,
       false},
      {{1, 1, 1}, {1, 1, 1}, 4.5, 1.0, false},
      {{0.5, 0.7, 0.2},
       {0.1, 0.9, 0.3, 0.8, 0.4, 0.6, 1.5, 1.1, 1.2, 1.3},
       8.0,
       0.2867132867132867,
       true},
  };
  for (const Case& c : cases) {
    const MannWhitney r = MannWhitneyU(c.x, c.y);
    EXPECT_DOUBLE_EQ(r.u, c.u) << c.x.size() << "x" << c.y.size();
    EXPECT_NEAR(r.p, c.p, 1e-12 * std::max(1.0, c.p)) << c.x.size() << "x" << c.y.size();
    EXPECT_EQ(r.exact, c.exact) << c.x.size() << "x" << c.y.size();
  }
  EXPECT_EQ(MannWhitneyU({}, {1, 2}).p, 1.0);
}

// The exact tail over a large second sample (one side of 3, no ties) stays a probability and
// agrees with the normal approximation where both apply.
TEST(MannWhitneyTest, TheExactTailOfALopsidedPairIsAProbability) {
  std::vector<double> x = {10.55, 20.55, 30.55}, y;
  for (int i = 0; i < 400; ++i) y.push_back(i * 0.1);
  const MannWhitney r = MannWhitneyU(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_GT(r.p, 0.0);
  EXPECT_LE(r.p, 1.0);
  y.push_back(10.55);  // a tie: the approximation
  const MannWhitney approx = MannWhitneyU(x, y);
  EXPECT_FALSE(approx.exact);
  EXPECT_NEAR(approx.p, r.p, 0.05);
}

TEST(BootstrapTest, TheIntervalHoldsTheChangeAndNarrowsWithMoreRepeats) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> noise(0, 0.01);
  const auto draw = [&](double scale, int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(scale * std::exp(noise(gen)));
    return v;
  };
  const Interval few = BootstrapChangeInterval(draw(1.0, 10), draw(1.05, 10), 0.95, 2000);
  const Interval many = BootstrapChangeInterval(draw(1.0, 200), draw(1.05, 200), 0.95, 2000);
  EXPECT_LT(few.low, 0.05);
  EXPECT_GT(few.high, 0.05);
  EXPECT_LT(many.low, 0.05);
  EXPECT_GT(many.high, 0.05);
  EXPECT_LT(many.high - many.low, few.high - few.low);
  // The same samples give the same interval: the seed is fixed.
  const std::vector<double> a = draw(1.0, 30), b = draw(1.02, 30);
  const Interval once = BootstrapChangeInterval(a, b, 0.95, 500);
  const Interval again = BootstrapChangeInterval(a, b, 0.95, 500);
  EXPECT_EQ(once.low, again.low);
  EXPECT_EQ(once.high, again.high);
}

// Repeats as a busy machine gives them: log-normal with a 1% coefficient of variation, and now
// and then (2%) a repeat three times as long.
std::vector<double> Repeats(std::mt19937_64& gen, double median, int n) {
  std::normal_distribution<double> noise(0, std::sqrt(std::log1p(0.01 * 0.01)));
  std::bernoulli_distribution outlier(0.02);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(median * std::exp(noise(gen)) * (outlier(gen) ? 3 : 1));
  return v;
}

// The goals: equal distributions are judged the same at least 95% of the time at the
// default confidence; a 3% shift with 30 repeats each is judged correctly at least 95% of the
// time, either way.
TEST(CompareRepeatsTest, VerdictsOnDistributionsWithKnownAnswers) {
  std::mt19937_64 gen(20261202);
  constexpr int kTrials = 1000;
  CompareOptions no_threshold;  // the test and the interval alone
  no_threshold.threshold = 0;
  int same = 0, same_by_test = 0, slower = 0, faster = 0;
  for (int t = 0; t < kTrials; ++t) {
    same +=
        CompareRepeats(Repeats(gen, 1e-3, 30), Repeats(gen, 1e-3, 30)).verdict == Verdict::kSame;
    same_by_test +=
        CompareRepeats(Repeats(gen, 1e-3, 30), Repeats(gen, 1e-3, 30), no_threshold).verdict ==
        Verdict::kSame;
    slower += CompareRepeats(Repeats(gen, 1e-3, 30), Repeats(gen, 1.03e-3, 30)).verdict ==
              Verdict::kSlower;
    faster += CompareRepeats(Repeats(gen, 1e-3, 30), Repeats(gen, 0.97e-3, 30)).verdict ==
              Verdict::kFaster;
  }
  std::printf("of %d trials: same %d (%d without the threshold), slower %d, faster %d\n", kTrials,
              same, same_by_test, slower, faster);
  EXPECT_GE(same, kTrials * 95 / 100);
  EXPECT_GE(same_by_test, kTrials * 95 / 100);
  EXPECT_GE(slower, kTrials * 95 / 100);
  EXPECT_GE(faster, kTrials * 95 / 100);
}

TEST(CompareRepeatsTest, TooFewRepeatsAreInsufficient) {
  std::mt19937_64 gen(3);
  const Comparison c = CompareRepeats(Repeats(gen, 1e-3, 4), Repeats(gen, 2e-3, 30));
  EXPECT_EQ(c.verdict, Verdict::kInsufficient);
  EXPECT_STREQ(VerdictName(c.verdict), "insufficient");
  EXPECT_EQ(c.base_repeats, 4u);
  EXPECT_NEAR(c.change, 1.0, 0.1);  // the medians are still given
  EXPECT_TRUE(std::isnan(c.p));
  EXPECT_TRUE(std::isnan(c.interval.low));
  CompareOptions fewer;
  fewer.min_repeats = 4;
  EXPECT_EQ(CompareRepeats(Repeats(gen, 1e-3, 4), Repeats(gen, 2e-3, 30), fewer).verdict,
            Verdict::kSlower);
  EXPECT_EQ(CompareRepeats({}, {1e-3}).verdict, Verdict::kInsufficient);
  EXPECT_EQ(CompareRepeats({0, 0, 0, 0, 0}, Repeats(gen, 1e-3, 5)).verdict,
            Verdict::kInsufficient);  // a median of 0 has no ratio
}

// A steady kernel's 0.3% is real but below the threshold: the same by default, slower when the
// threshold is 0.
TEST(CompareRepeatsTest, ChangesWithinTheThresholdAreTheSame) {
  std::mt19937_64 gen(11);
  std::normal_distribution<double> noise(0, 0.0005);
  std::vector<double> base, fresh;
  for (int i = 0; i < 50; ++i) {
    base.push_back(1e-3 * std::exp(noise(gen)));
    fresh.push_back(1.003e-3 * std::exp(noise(gen)));
  }
  const Comparison c = CompareRepeats(base, fresh);
  EXPECT_LT(c.p, 0.001);
  EXPECT_GT(c.interval.low, 0);
  EXPECT_EQ(c.verdict, Verdict::kSame);
  CompareOptions exact;
  exact.threshold = 0;
  EXPECT_EQ(CompareRepeats(base, fresh, exact).verdict, Verdict::kSlower);
  EXPECT_EQ(CompareRepeats(fresh, base, exact).verdict, Verdict::kFaster);
}

TEST(CompareRepeatsTest, NamesTheVerdicts) {
  EXPECT_STREQ(VerdictName(Verdict::kFaster), "faster");
  EXPECT_STREQ(VerdictName(Verdict::kSlower), "slower");
  EXPECT_STREQ(VerdictName(Verdict::kSame), "same");
}

}  // namespace
}  // namespace kprof::report
