#include "report/metric.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gtest/gtest.h"

namespace kprof::report {
namespace {

TEST(MetricKind, KeysRoundTripAndUnknownKeysAreRejected) {
  for (MetricKind kind : {MetricKind::kString, MetricKind::kCount, MetricKind::kDuration,
                          MetricKind::kPercent, MetricKind::kRatio}) {
    EXPECT_EQ(KindFromKey(KindKey(kind)), kind);
  }
  EXPECT_EQ(KindKey(MetricKind::kDuration), "microseconds");
  EXPECT_EQ(KindFromKey("seconds"), std::nullopt);
  EXPECT_EQ(KindFromKey(""), std::nullopt);
}

TEST(MetricKind, KindOfFollowsTheAlternative) {
  EXPECT_EQ(KindOf(std::string("x")), MetricKind::kString);
  EXPECT_EQ(KindOf(Count{1}), MetricKind::kCount);
  EXPECT_EQ(KindOf(Duration{1}), MetricKind::kDuration);
  EXPECT_EQ(KindOf(Percent{1}), MetricKind::kPercent);
  EXPECT_EQ(KindOf(Ratio{1}), MetricKind::kRatio);
}

TEST(FormatForTable, CountsGroupThousands) {
  EXPECT_EQ(FormatForTable(Count{0}), "0");
  EXPECT_EQ(FormatForTable(Count{999}), "999");
  EXPECT_EQ(FormatForTable(Count{1000}), "1,000");
  EXPECT_EQ(FormatForTable(Count{-1234567}), "-1,234,567");
  EXPECT_EQ(FormatForTable(Count{std::numeric_limits<int64_t>::min()}),
            "-9,223,372,036,854,775,808");
}

TEST(FormatForTable, DurationsHaveTwoDecimalsAndGroupThousands) {
  EXPECT_EQ(FormatForTable(Duration{812.5}), "812.50");
  EXPECT_EQ(FormatForTable(Duration{1332.004}), "1,332.00");
  EXPECT_EQ(FormatForTable(Duration{-1234.567}), "-1,234.57");
  EXPECT_EQ(FormatForTable(Duration{123456789.0}), "123,456,789.00");
  EXPECT_EQ(FormatForTable(Duration{std::nan("")}), "nan");
  EXPECT_EQ(FormatForTable(Duration{-INFINITY}), "-inf");
  // The largest double prints in full rather than overflowing a buffer.
  EXPECT_EQ(FormatForTable(Duration{std::numeric_limits<double>::max()}).size(), 309u + 102u + 3u);
}

TEST(FormatForTable, PercentsRatiosAndStrings) {
  EXPECT_EQ(FormatForTable(Percent{61.0}), "61.00");
  EXPECT_EQ(FormatForTable(Percent{1234.5}), "1234.50");
  EXPECT_EQ(FormatForTable(Ratio{0.5}), "0.5");
  EXPECT_EQ(FormatForTable(Ratio{1.2345}), "1.2");
  EXPECT_EQ(FormatForTable(Ratio{12345}), "1.2e+04");
  EXPECT_EQ(FormatForTable(Percent{INFINITY}), "inf");
  EXPECT_EQ(FormatForTable(std::string("a, \"b\"")), "a, \"b\"");
}

TEST(ShortestDecimal, ReadsBackAsTheSameDouble) {
  EXPECT_EQ(ShortestDecimal(0.1), "0.1");
  EXPECT_EQ(ShortestDecimal(812.5), "812.5");
  EXPECT_EQ(ShortestDecimal(1e-7), "1e-07");
  EXPECT_EQ(ShortestDecimal(std::nan("")), "nan");
  EXPECT_EQ(ShortestDecimal(-INFINITY), "-inf");
  for (double v : {1.0 / 3, 2.0 / 3 * 1e300, 5e-324, 123456.789}) {
    EXPECT_EQ(std::strtod(ShortestDecimal(v).c_str(), nullptr), v) << ShortestDecimal(v);
  }
}

}  // namespace
}  // namespace kprof::report
