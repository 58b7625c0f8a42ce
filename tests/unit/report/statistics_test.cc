#include "report/statistics.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::report {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(Statistics, EmptyInputIsNaNEverywhere) {
  const std::vector<double> none;
  EXPECT_TRUE(std::isnan(Mean(none)));
  EXPECT_TRUE(std::isnan(Median(none)));
  EXPECT_TRUE(std::isnan(Min(none)));
  EXPECT_TRUE(std::isnan(Max(none)));
  EXPECT_TRUE(std::isnan(StdDev(none)));
  EXPECT_TRUE(std::isnan(CoefficientOfVariation(none)));
  EXPECT_TRUE(std::isnan(Percentile(none, 50)));
  const Summary s = Summarize(none);
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(std::isnan(s.mean));
}

TEST(Statistics, SingleSample) {
  const std::vector<double> one = {2.5};
  EXPECT_EQ(Mean(one), 2.5);
  EXPECT_EQ(Median(one), 2.5);
  EXPECT_EQ(Min(one), 2.5);
  EXPECT_EQ(Max(one), 2.5);
  EXPECT_EQ(StdDev(one), 0.0);
  EXPECT_EQ(CoefficientOfVariation(one), 0.0);
  EXPECT_EQ(Percentile(one, 0), 2.5);
  EXPECT_EQ(Percentile(one, 99), 2.5);
}

TEST(Statistics, LiteralVectors) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(Mean(v), 2.5);
  EXPECT_DOUBLE_EQ(Median(v), 2.5);
  EXPECT_EQ(Min(v), 1);
  EXPECT_EQ(Max(v), 4);
  EXPECT_DOUBLE_EQ(StdDev(v), std::sqrt(1.25));  // population: divides by n
  EXPECT_DOUBLE_EQ(CoefficientOfVariation(v), std::sqrt(1.25) / 2.5);

  const std::vector<double> odd = {5, 1, 9};
  EXPECT_EQ(Median(odd), 5);
  // numpy.std([2, 4, 4, 4, 5, 5, 7, 9]) == 2.0
  EXPECT_DOUBLE_EQ(StdDev({2, 4, 4, 4, 5, 5, 7, 9}), 2.0);
}

TEST(Statistics, PercentilesInterpolateLinearlyLikeNumpy) {
  const std::vector<double> v = {10, 20, 30, 40, 50};
  EXPECT_EQ(Percentile(v, 0), 10);
  EXPECT_EQ(Percentile(v, 100), 50);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 30);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 46);    // numpy.percentile(v, 90) == 46.0
  EXPECT_DOUBLE_EQ(Percentile(v, 12.5), 15);  // rank 0.5
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 99), 1.99);
}

TEST(Statistics, PercentileOutsideRangeIsNaN) {
  EXPECT_TRUE(std::isnan(Percentile({1, 2, 3}, -1)));
  EXPECT_TRUE(std::isnan(Percentile({1, 2, 3}, 100.5)));
  EXPECT_TRUE(std::isnan(Percentile({1, 2, 3}, std::nan(""))));
}

TEST(Statistics, InfiniteSamplesDoNotPoisonExactRanks) {
  EXPECT_EQ(Percentile({1, INFINITY}, 0), 1);
  EXPECT_EQ(Percentile({1, INFINITY}, 100), INFINITY);
}

TEST(Statistics, CoefficientOfVariationOfZeroMeanIsNaN) {
  EXPECT_TRUE(std::isnan(CoefficientOfVariation({-1, 1})));
}

TEST(Statistics, SummaryAgreesWithTheFunctions) {
  const std::vector<double> v = {3e-6, 1e-6, 2e-6, 2e-6};
  const Summary s = Summarize(v);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.mean, Mean(v));
  EXPECT_EQ(s.median, Median(v));
  EXPECT_EQ(s.min, 1e-6);
  EXPECT_EQ(s.max, 3e-6);
  EXPECT_EQ(s.stddev, StdDev(v));
  EXPECT_EQ(s.cv, CoefficientOfVariation(v));
}

TEST(Statistics, TukeyOutliersAreBeyondOneAndAHalfIqr) {
  // Quartiles of {10, 10, 11, 11, 12, 12, 100} are 10.5 and 12: fences at 8.25 and 14.25.
  EXPECT_THAT(TukeyOutliers({10, 100, 11, 11, 12, 12, 10}), ElementsAre(1));
  EXPECT_THAT(TukeyOutliers({1, 10, 10, 11, 11, 12, 12, 100}), ElementsAre(0, 7));
  EXPECT_THAT(TukeyOutliers({10, 11, 12, 13, 14}), IsEmpty());
  EXPECT_THAT(TukeyOutliers({1, 1, 1, 1}), IsEmpty());
  // Three samples cannot tell an outlier from the spread.
  EXPECT_THAT(TukeyOutliers({1, 1, 1000}), IsEmpty());
  // k = 0: the fences are the quartiles themselves (2.75 and 6.25 here).
  EXPECT_THAT(TukeyOutliers({1, 2, 3, 4, 5, 6, 7, 8}, 0), ElementsAre(0, 1, 6, 7));
  // Q1 = Q3 (a coarse clock): no fences, rather than every other value an outlier.
  EXPECT_THAT(TukeyOutliers({5, 5, 5, 5, 6}), IsEmpty());
  EXPECT_THAT(TukeyOutliers({5, 5, 5, 5, 5, 9, 1}), IsEmpty());
}

TEST(Statistics, WithoutDropsTheGivenIndices) {
  EXPECT_THAT(Without({1, 2, 3, 4}, {0, 3}), ElementsAre(2, 3));
  EXPECT_THAT(Without({1, 2, 3}, {}), ElementsAre(1, 2, 3));
  EXPECT_THAT(Without({}, {}), IsEmpty());
}

TEST(HistogramTest, CountsSamplesInEqualBinsFromTheSmallestToTheLargest) {
  EXPECT_EQ(Histogram({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 3), (std::vector<size_t>{3, 3, 4}));
  EXPECT_EQ(Histogram({5, 5, 5}, 4), (std::vector<size_t>{3, 0, 0, 0}));
  EXPECT_EQ(Histogram({1, 100}, 2), (std::vector<size_t>{1, 1}));
  EXPECT_EQ(Histogram({1, std::nan(""), 3}, 2), (std::vector<size_t>{1, 1}));
  EXPECT_TRUE(Histogram({}, 4).empty());
  EXPECT_TRUE(Histogram({1, 2}, 0).empty());
}

}  // namespace
}  // namespace kprof::report
