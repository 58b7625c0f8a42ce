#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/report.h"

namespace kprof::report {
namespace {

MetricMap Call(std::string name, double us, std::string shapes = "", std::string device = "cpu0") {
  MetricMap call = {{"Name", std::move(name)},
                    {"Duration (us)", Duration{us}},
                    {"Count", Count{1}},
                    {"Device", std::move(device)}};
  if (!shapes.empty()) call["Argument Shapes"] = std::move(shapes);
  return call;
}

TEST(AggregateMetric, SumsDurationsCountsAndPercents) {
  const MetricValue a = Duration{1.5}, b = Duration{2.0};
  EXPECT_EQ(AggregateMetric({&a, &b}), MetricValue(Duration{3.5}));
  const MetricValue c = Count{2}, d = Count{40};
  EXPECT_EQ(AggregateMetric({&c, &d}), MetricValue(Count{42}));
  const MetricValue e = Percent{10}, f = Percent{15};
  EXPECT_EQ(AggregateMetric({&e, &f}), MetricValue(Percent{25}));
}

TEST(AggregateMetric, AveragesRatios) {
  const MetricValue a = Ratio{0.5}, b = Ratio{1.0}, c = Ratio{0.0};
  EXPECT_EQ(AggregateMetric({&a, &b, &c}), MetricValue(Ratio{0.5}));
}

TEST(AggregateMetric, StringsStayWhenEqualAndEmptyOtherwise) {
  const MetricValue a = std::string("x"), b = std::string("x"), c = std::string("y");
  EXPECT_EQ(AggregateMetric({&a, &b}), MetricValue(std::string("x")));
  EXPECT_EQ(AggregateMetric({&a, &b, &c}), MetricValue(std::string()));
}

TEST(AggregateMetric, MixedKindsBecomeEmpty) {
  const MetricValue a = Count{1}, b = Duration{1};
  EXPECT_EQ(AggregateMetric({&a, &b}), MetricValue(std::string()));
}

TEST(AggregateCalls, MergesSameNameShapesAndDeviceInOrderOfFirstAppearance) {
  const std::vector<MetricMap> rows =
      AggregateCalls({Call("b", 1, "f32[1]"), Call("a", 2, "f32[1]"), Call("b", 3, "f32[1]")});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("Name"), MetricValue(std::string("b")));
  EXPECT_EQ(rows[0].at("Duration (us)"), MetricValue(Duration{4}));
  EXPECT_EQ(rows[0].at("Count"), MetricValue(Count{2}));
  EXPECT_EQ(rows[1].at("Name"), MetricValue(std::string("a")));
}

TEST(AggregateCalls, DifferentShapesOrDevicesStayApart) {
  EXPECT_EQ(AggregateCalls({Call("f", 1, "f32[1]"), Call("f", 1, "f32[2]")}).size(), 2u);
  EXPECT_EQ(AggregateCalls({Call("f", 1, "", "cpu0"), Call("f", 1, "", "cuda0")}).size(), 2u);
  // A call without shapes is not the same as one with empty shapes.
  MetricMap with_empty_shapes = Call("f", 1);
  with_empty_shapes["Argument Shapes"] = std::string();
  EXPECT_EQ(AggregateCalls({Call("f", 1), with_empty_shapes}).size(), 2u);
}

TEST(AggregateCalls, KeyComponentsNeverRunTogether) {
  // The reference concatenates name, shapes and device: "ab"+"c" == "a"+"bc".
  EXPECT_EQ(AggregateCalls({Call("ab", 1, "c", "d"), Call("a", 1, "bc", "d")}).size(), 2u);
  EXPECT_EQ(AggregateCalls({Call("a", 1, "b", "cd"), Call("a", 1, "bc", "d")}).size(), 2u);
  // Nor do values of different kinds that print alike.
  MetricMap count_name = Call("", 1);
  count_name["Name"] = Count{1};
  EXPECT_EQ(AggregateCalls({Call("1", 1), count_name}).size(), 2u);
}

TEST(AggregateCalls, HashTakesPrecedenceOverName) {
  MetricMap a = Call("fused_add", 1), b = Call("fused_add_1", 2), c = Call("fused_add", 4);
  a["Hash"] = std::string("h1");
  b["Hash"] = std::string("h1");
  c["Hash"] = std::string("h2");
  const std::vector<MetricMap> rows = AggregateCalls({a, b, c});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("Duration (us)"), MetricValue(Duration{3}));
  EXPECT_EQ(rows[0].at("Name"), MetricValue(std::string()));  // names differed
  EXPECT_EQ(rows[1].at("Duration (us)"), MetricValue(Duration{4}));
}

TEST(AggregateCalls, MetricsPresentInOnlySomeCallsAggregateWhatIsThere) {
  MetricMap a = Call("f", 1), b = Call("f", 2);
  a["Cache Misses"] = Count{7};
  const std::vector<MetricMap> rows = AggregateCalls({a, b});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("Cache Misses"), MetricValue(Count{7}));
}

TEST(AggregateCalls, EmptyInputGivesNoRows) { EXPECT_TRUE(AggregateCalls({}).empty()); }

}  // namespace
}  // namespace kprof::report
