#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/report.h"
#include "status_matchers.h"

namespace kprof::report {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

Report SmallReport() {
  Report r;
  r.calls.push_back({{"Name", std::string("matmul")},
                     {"Duration (us)", Duration{812.5}},
                     {"Count", Count{1}},
                     {"Percent", Percent{61.0}},
                     {"Device", std::string("cpu0")},
                     {"Argument Shapes", std::string("float32[256, 256], float32[256, 256]")}});
  r.device_metrics["cpu0"] = {{"Name", std::string("Total")}, {"Duration (us)", Duration{1332.0}}};
  r.configuration = {{"Number of threads", Count{2}}};
  return r;
}

TEST(AsJson, WritesTheStandardReport) {
  EXPECT_EQ(AsJson(SmallReport()),
            R"j({"calls":[{"Argument Shapes":{"string":"float32[256, 256], float32[256, 256]"},)j"
            R"j("Count":{"count":1},"Device":{"string":"cpu0"},)j"
            R"j("Duration (us)":{"microseconds":812.5},"Name":{"string":"matmul"},)j"
            R"j("Percent":{"percent":61.0}}],)j"
            R"j("configuration":{"Number of threads":{"count":2}},)j"
            R"j("device_metrics":{"cpu0":{"Duration (us)":{"microseconds":1332.0},)j"
            R"j("Name":{"string":"Total"}}}})j");
}

TEST(AsJson, EmptyReportHasAllThreeSections) {
  EXPECT_EQ(AsJson(Report{}), R"j({"calls":[],"configuration":{},"device_metrics":{}})j");
}

TEST(AsJson, EscapesStringsThatBreakTheReference) {
  Report r;
  r.calls.push_back({{"Name", std::string("a \"quoted\", back\\slash\nnew line\t\x01")}});
  EXPECT_EQ(AsJson(r),
            R"j({"calls":[{"Name":{"string":"a \"quoted\", back\\slash\nnew line\t\u0001"}}],)j"
            R"j("configuration":{},"device_metrics":{}})j");
}

TEST(AsJson, InvalidUtf8IsReplacedNotThrown) {
  Report r;
  r.configuration["Host"] = std::string("bad\xff");
  EXPECT_THAT(AsJson(r), HasSubstr("bad\xEF\xBF\xBD"));  // U+FFFD
}

TEST(ReportFromJson, ReadsTheDesignExample) {
  const auto report = ReportFromJson(R"json(
    {"calls": [{"Name": {"string": "matmul"}, "Duration (us)": {"microseconds": 812.5},
                "Count": {"count": 1}, "Percent": {"percent": 61.0}, "Device": {"string": "cpu0"},
                "Argument Shapes": {"string": "float32[256, 256], float32[256, 256]"}}],
     "device_metrics": {"cpu0": {"Name": {"string": "Total"}, "Duration (us)": {"microseconds": 1332.0}}},
     "configuration": {"Number of threads": {"count": 2}}})json");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(*report, SmallReport());
}

TEST(ReportFromJson, ReadsTvmsFixedPrecisionNumbersAndRatios) {
  // TVM writes doubles with std::fixed and max_digits10 digits.
  const auto report = ReportFromJson(
      R"j({"calls":[{"Duration (us)":{"microseconds":812.50000000000000000},)j"
      R"j("Ratio":{"ratio":0.25000000000000000}}],"device_metrics":{},"configuration":{}})j");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->calls.at(0).at("Duration (us)"), MetricValue(Duration{812.5}));
  EXPECT_EQ(report->calls.at(0).at("Ratio"), MetricValue(Ratio{0.25}));
}

TEST(ReportFromJson, IntegerWhereADoubleIsExpectedIsAccepted) {
  const auto report = ReportFromJson(R"j({"calls":[{"Duration (us)":{"microseconds":5}}]})j");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->calls.at(0).at("Duration (us)"), MetricValue(Duration{5}));
}

TEST(ReportFromJson, CountsAcceptIntegralNumbersInRange) {
  const auto report = ReportFromJson(
      R"j({"configuration":{"a":{"count":-9223372036854775808},"b":{"count":9223372036854775807},)j"
      R"j("c":{"count":1000.0}}})j");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->configuration.at("a"), MetricValue(Count{INT64_MIN}));
  EXPECT_EQ(report->configuration.at("b"), MetricValue(Count{INT64_MAX}));
  EXPECT_EQ(report->configuration.at("c"), MetricValue(Count{1000}));
}

TEST(ReportFromJson, IgnoresUnknownTopLevelKeysAndMissingSections) {
  const auto report = ReportFromJson(R"j({"version": [1, {"x": null}], "calls": []})j");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(*report, Report{});
}

TEST(ReportFromJson, AnObjectThatIsNoReportIsRefusedSayingWhatItHas) {
  EXPECT_THAT(ReportFromJson("{}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("this has nothing")));
  EXPECT_THAT(ReportFromJson(R"({"mean": 1e-6, "median": 1e-6, "results": [1e-6]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not a report"), HasSubstr("\"mean\""),
                             HasSubstr("a time result (kprof time --format json)"))));
}

TEST(ReportFromJson, NullReadsAsNaNSoNonFiniteValuesRoundTrip) {
  Report r;
  r.calls.push_back({{"Duration (us)", Duration{std::numeric_limits<double>::quiet_NaN()}},
                     {"Ratio", Ratio{INFINITY}}});
  const std::string json = AsJson(r);
  EXPECT_THAT(json, HasSubstr(R"j("microseconds":null)j"));
  const auto back = ReportFromJson(json);
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(std::isnan(std::get<Duration>(back->calls.at(0).at("Duration (us)")).microseconds));
  EXPECT_EQ(AsJson(*back), json);
}

TEST(ReportFromJson, ReadsNaNAndInfinitiesAsTvmAndPythonSpellThem) {
  // TVM's writer (an ostream: nan, inf, -inf) and Python's json (NaN, Infinity, -Infinity).
  const auto report = ReportFromJson(
      R"j({"calls": [{"Duration (us)": {"microseconds": nan}, "Percent": {"percent": inf},
                      "Ratio": {"ratio": -inf}, "Name": {"string": "NaN inf"}},
                     {"Duration (us)": {"microseconds": NaN}, "Percent": {"percent": Infinity},
                      "Ratio": {"ratio": -Infinity}, "Name": {"string": "k\"nan"}},
                     {"Duration (us)": {"microseconds": -nan}, "Ratio": {"ratio":1.5}}],
          "device_metrics": {}, "configuration": {}})j");
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->calls.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const MetricMap& call = report->calls[i];
    EXPECT_TRUE(std::isnan(std::get<Duration>(call.at("Duration (us)")).microseconds)) << i;
    EXPECT_EQ(std::get<Percent>(call.at("Percent")).percent, INFINITY) << i;
    EXPECT_EQ(std::get<Ratio>(call.at("Ratio")).ratio, -INFINITY) << i;
  }
  // Words inside strings stay as they were.
  EXPECT_EQ(std::get<std::string>(report->calls[0].at("Name")), "NaN inf");
  EXPECT_EQ(std::get<std::string>(report->calls[1].at("Name")), "k\"nan");
  EXPECT_TRUE(std::isnan(std::get<Duration>(report->calls[2].at("Duration (us)")).microseconds));
  EXPECT_EQ(std::get<Ratio>(report->calls[2].at("Ratio")).ratio, 1.5);
}

TEST(ReportFromJson, NonFiniteWordsAreNumbersOnlyWhereNumbersAre) {
  // A count cannot be infinite, and a string cannot be a bare word.
  EXPECT_THAT(ReportFromJson(R"j({"calls": [{"Count": {"count": Infinity}}]})j"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected an integer count")));
  EXPECT_THAT(ReportFromJson(R"j({"calls": [{"Name": {"string": NaN}}]})j"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected a string")));
  // Not a word of its own: still malformed, with the parser's first complaint.
  EXPECT_THAT(ReportFromJson(R"j({"calls": [{"Ratio": {"ratio": nanx}}]})j"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed")));
  EXPECT_THAT(ReportFromJson(R"j({"calls": [{"Ratio": {"ratio": Infinite}}]})j"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed")));
}

struct MalformedCase {
  const char* name;
  std::string json;
  const char* message;  // a part of the error message
};

void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

class ReportFromJsonMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(ReportFromJsonMalformed, IsInvalidArgumentNamingThePlace) {
  EXPECT_THAT(ReportFromJson(GetParam().json),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReportFromJsonMalformed,
    ::testing::Values(
        MalformedCase{"Empty", "", "malformed"}, MalformedCase{"Whitespace", "  \n", "malformed"},
        MalformedCase{"Truncated", R"j({"calls":[{"Name":{"string":"ma)j", "malformed"},
        MalformedCase{"TrailingGarbage", R"j({"calls":[]} x)j", "malformed"},
        MalformedCase{"NotJson", "calls: []", "malformed"},
        MalformedCase{"InvalidUtf8", "{\"calls\":[{\"Name\":{\"string\":\"\xff\"}}]}", "malformed"},
        MalformedCase{"TopLevelArray", "[]", "expected an object with \"calls\""},
        MalformedCase{"TopLevelNumber", "42", "got an integer"},
        MalformedCase{"CallsNotArray", R"j({"calls":{}})j", "calls: expected an array of calls"},
        MalformedCase{"CallNotObject", R"j({"calls":[{}, 3]})j",
                      "calls[1]: expected an object of metrics, got an integer"},
        MalformedCase{"MetricNotObject", R"j({"calls":[{"Name":"matmul"}]})j",
                      "calls[0].\"Name\": expected an object with one key naming the metric kind"},
        MalformedCase{"MetricWithTwoKinds", R"j({"calls":[{"X":{"count":1,"ratio":2}}]})j",
                      "calls[0].\"X\": expected an object with one key"},
        MalformedCase{"MetricWithNoKind", R"j({"calls":[{"X":{}}]})j", "with 0 keys"},
        MalformedCase{"UnknownKind", R"j({"calls":[{"Duration (us)":{"seconds":1}}]})j",
                      "calls[0].\"Duration (us)\": unknown metric kind \"seconds\" (accepted: "
                      "string, count, microseconds, percent, ratio)"},
        MalformedCase{"StringKindWithNumber", R"j({"calls":[{"Name":{"string":5}}]})j",
                      "calls[0].\"Name\".\"string\": expected a string, got an integer"},
        MalformedCase{"DurationAsString",
                      R"j({"device_metrics":{"cpu0":{"Duration (us)":{"microseconds":"1"}}}})j",
                      "device_metrics.\"cpu0\".\"Duration (us)\".\"microseconds\": expected a "
                      "number, got a string"},
        MalformedCase{"FractionalCount", R"j({"configuration":{"n":{"count":1.5}}})j",
                      "configuration.\"n\".\"count\": count 1.5 is not an integer"},
        MalformedCase{"HugeCount", R"j({"configuration":{"n":{"count":18446744073709551615}}})j",
                      "is not an integer in [-2^63, 2^63)"},
        MalformedCase{"HugeFloatCount", R"j({"configuration":{"n":{"count":1e30}}})j",
                      "is not an integer in [-2^63, 2^63)"},
        MalformedCase{"CountAsBool", R"j({"configuration":{"n":{"count":true}}})j",
                      "expected an integer count, got a boolean"},
        MalformedCase{"NumberBeyondDouble", R"j({"calls":[{"D":{"microseconds":1e400}}]})j",
                      "number overflow parsing '1e400'"},
        MalformedCase{"DeviceMetricsArray", R"j({"device_metrics":[]})j",
                      "device_metrics: expected an object of devices, got an array"},
        MalformedCase{"ConfigurationString", R"j({"configuration":"x"})j",
                      "configuration: expected an object of metrics, got a string"},
        MalformedCase{"DeepArrays", std::string(100000, '[') + std::string(100000, ']'),
                      "nests deeper than"},
        MalformedCase{"DeepObjectsInCalls",
                      R"j({"calls":[)j" + std::string(50000, '[') + std::string(50000, ']') + "]}",
                      "nests deeper than"},
        MalformedCase{"DeepUnclosed", std::string(1000000, '['), "malformed"}),
    [](const ::testing::TestParamInfo<MalformedCase>& test) { return test.param.name; });

// Random reports with awkward strings and numbers: AsJson -> ReportFromJson is the identity on
// the report, and AsJson -> ReportFromJson -> AsJson is the identity on the text.
class ReportGenerator {
 public:
  explicit ReportGenerator(uint32_t seed) : rng_(seed) {}

  Report Next() {
    Report r;
    const int calls = Uniform(0, 6);
    for (int i = 0; i < calls; ++i) r.calls.push_back(Metrics());
    const int devices = Uniform(0, 3);
    for (int i = 0; i < devices; ++i) r.device_metrics[Text()] = Metrics();
    r.configuration = Metrics();
    return r;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string Text() {
    static const std::vector<std::string> pieces = {"matmul",
                                                    "Duration (us)",
                                                    ",",
                                                    "\"",
                                                    "\\",
                                                    "\n",
                                                    "\r\n",
                                                    "\t",
                                                    "\x01",
                                                    " ",
                                                    "",
                                                    "\xC3\xA9t\xC3\xA9",         // été
                                                    "\xE6\x97\xA5\xE6\x9C\xAC",  // 日本
                                                    "\xF0\x9F\x94\xA5",  // an emoji outside the BMP
                                                    "{\"string\":1}",
                                                    "null",
                                                    "-0"};
    std::string text;
    const int n = Uniform(0, 4);
    for (int i = 0; i < n; ++i) text += pieces[Uniform(0, static_cast<int>(pieces.size()) - 1)];
    return text;
  }

  double Number() {
    switch (Uniform(0, 5)) {
      case 0:
        return 0.0;
      case 1:
        return -0.0;
      case 2:
        return std::numeric_limits<double>::denorm_min();
      case 3:
        return std::numeric_limits<double>::max();
      default:
        return std::uniform_real_distribution<double>(-1e9, 1e9)(rng_);
    }
  }

  MetricValue Value() {
    switch (Uniform(0, 4)) {
      case 0:
        return Text();
      case 1: {
        static const int64_t kCounts[] = {0, 1, -1, INT64_MIN, INT64_MAX, 1234567};
        return Count{kCounts[Uniform(0, 5)]};
      }
      case 2:
        return Duration{Number()};
      case 3:
        return Percent{Number()};
      default:
        return Ratio{Number()};
    }
  }

  MetricMap Metrics() {
    MetricMap m;
    const int n = Uniform(0, 6);
    for (int i = 0; i < n; ++i) m[Text()] = Value();
    return m;
  }

  std::mt19937 rng_;
};

TEST(ReportJsonRoundTrip, IsTheIdentityOnManyGeneratedReports) {
  ReportGenerator generator(/*seed=*/2026);
  for (int i = 0; i < 2000; ++i) {
    const Report report = generator.Next();
    const std::string json = AsJson(report);
    const auto back = ReportFromJson(json);
    ASSERT_THAT(back, IsOk()) << json;
    ASSERT_EQ(*back, report) << json;
    ASSERT_EQ(AsJson(*back), json);
    ASSERT_EQ(AsJson(*back, 2), AsJson(report, 2));
  }
}

TEST(ReportJsonRoundTrip, PrettyPrintedJsonReadsBackToo) {
  const auto back = ReportFromJson(AsJson(SmallReport(), 2));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, SmallReport());
}

TEST(ReportJsonRoundTrip, NegativeZeroKeepsItsSign) {
  Report r;
  r.configuration["z"] = Duration{-0.0};
  const auto back = ReportFromJson(AsJson(r));
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(std::signbit(std::get<Duration>(back->configuration.at("z")).microseconds));
}

}  // namespace
}  // namespace kprof::report
