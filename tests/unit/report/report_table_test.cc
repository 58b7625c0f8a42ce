#include <string>

#include "gtest/gtest.h"
#include "report/report.h"

namespace kprof::report {
namespace {

MetricMap Call(std::string name, double us, double percent, std::string shapes) {
  return {{"Name", std::move(name)},       {"Duration (us)", Duration{us}},
          {"Percent", Percent{percent}},   {"Count", Count{1}},
          {"Device", std::string("cpu0")}, {"Argument Shapes", std::move(shapes)}};
}

TableOptions Options(bool sort, bool aggregate, bool sums) {
  TableOptions options;
  options.sort = sort;
  options.aggregate = aggregate;
  options.compute_col_sums = sums;
  return options;
}

Report ThreeCalls() {
  Report r;
  r.calls = {Call("matmul", 100, 10, "float32[2, 2]"), Call("add", 50, 5, "float32[4]"),
             Call("matmul", 200, 20, "float32[2, 2]")};
  r.device_metrics["cpu0"] = {{"Duration (us)", Duration{1000}}, {"Count", Count{1}}};
  r.configuration = {{"Number of threads", Count{2}}, {"Host", std::string("lab-01")}};
  return r;
}

TEST(AsTable, AggregatesSortsSumsAndTotals) {
  EXPECT_EQ(AsTable(ThreeCalls()),
            "Name        Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "matmul             300.00    30.00    cpu0      2    float32[2, 2]\n"
            "add                 50.00     5.00    cpu0      1       float32[4]\n"
            "----------\n"
            "Sum                350.00    35.00              3\n"
            "Total            1,000.00                       1\n"
            "\n"
            "Configuration\n"
            "-------------\n"
            "Host: lab-01\n"
            "Number of threads: 2\n");
}

TEST(AsTable, WithoutAggregationSortingOrSums) {
  EXPECT_EQ(AsTable(ThreeCalls(), Options(/*sort=*/false, /*aggregate=*/false, /*sums=*/false)),
            "Name    Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "matmul         100.00    10.00    cpu0      1    float32[2, 2]\n"
            "add             50.00     5.00    cpu0      1       float32[4]\n"
            "matmul         200.00    20.00    cpu0      1    float32[2, 2]\n"
            "Total        1,000.00                       1\n"
            "\n"
            "Configuration\n"
            "-------------\n"
            "Host: lab-01\n"
            "Number of threads: 2\n");
}

TEST(AsTable, SortsWithoutAggregatingAndKeepsTiesInOrder) {
  Report r = ThreeCalls();
  r.calls.push_back(Call("sub", 50, 5, "float32[4]"));
  r.device_metrics.clear();
  r.configuration.clear();
  EXPECT_EQ(AsTable(r, Options(/*sort=*/true, /*aggregate=*/false, /*sums=*/false)),
            "Name    Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "matmul         200.00    20.00    cpu0      1    float32[2, 2]\n"
            "matmul         100.00    10.00    cpu0      1    float32[2, 2]\n"
            "add             50.00     5.00    cpu0      1       float32[4]\n"
            "sub             50.00     5.00    cpu0      1       float32[4]\n"
            "\n"
            "Configuration\n"
            "-------------\n");
}

TEST(AsTable, ExtraMetricsFollowTheFixedColumnsByName) {
  Report r;
  MetricMap call = Call("f", 1234567.891, 100, "int8[]");
  call["Ratio"] = Ratio{0.125};
  call["Cycles"] = Count{123456789};
  r.calls = {call};
  EXPECT_EQ(
      AsTable(r, Options(/*sort=*/true, /*aggregate=*/true, /*sums=*/true)),
      "Name        Duration (us)  Percent  Device  Count  Argument Shapes       Cycles  Ratio\n"
      "f            1,234,567.89   100.00    cpu0      1           int8[]  123,456,789   0.12\n"
      "----------\n"
      "Sum          1,234,567.89   100.00              1                   123,456,789\n"
      "\n"
      "Configuration\n"
      "-------------\n");
}

TEST(AsTable, RowsWithoutDurationSortLast) {
  Report r;
  r.calls = {{{"Name", std::string("no-time")}}, Call("timed", 1, 1, "")};
  const std::string table = AsTable(r, Options(/*sort=*/true, /*aggregate=*/false, /*sums=*/false));
  EXPECT_LT(table.find("timed"), table.find("no-time"));
}

TEST(AsTable, DeviceTotalsFollowDeviceOrderAndAreNamedTotal) {
  Report r;
  r.device_metrics["cuda0"] = {{"Duration (us)", Duration{2}}, {"Device", std::string("cuda0")}};
  r.device_metrics["cpu0"] = {{"Duration (us)", Duration{1}}, {"Device", std::string("cpu0")}};
  EXPECT_EQ(AsTable(r, Options(/*sort=*/true, /*aggregate=*/true, /*sums=*/false)),
            "Name   Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "Total           1.00             cpu0\n"
            "Total           2.00            cuda0\n"
            "\n"
            "Configuration\n"
            "-------------\n");
}

TEST(AsTable, EmptyReportHasHeadersAndConfiguration) {
  EXPECT_EQ(AsTable(Report{}, Options(/*sort=*/true, /*aggregate=*/true, /*sums=*/false)),
            "Name  Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "\n"
            "Configuration\n"
            "-------------\n");
}

TEST(AsTable, NonAsciiNamesAlignByCodePoint) {
  Report r;
  r.calls = {Call("\xC3\xA9t\xC3\xA9", 1, 1, ""), Call("abcd", 2, 2, "")};  // "été"
  EXPECT_EQ(AsTable(r, Options(/*sort=*/false, /*aggregate=*/false, /*sums=*/false)),
            "Name  Duration (us)  Percent  Device  Count  Argument Shapes\n"
            "\xC3\xA9t\xC3\xA9            1.00     1.00    cpu0      1\n"
            "abcd           2.00     2.00    cpu0      1\n"
            "\n"
            "Configuration\n"
            "-------------\n");
}

}  // namespace
}  // namespace kprof::report
