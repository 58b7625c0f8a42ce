#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/report.h"

namespace kprof::report {
namespace {

// A strict RFC 4180 reader, enough to prove that what AsCsv writes comes back field by field.
std::vector<std::vector<std::string>> ReadCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        field += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      record.push_back(std::move(field));
      field.clear();
    } else if (ch == '\n') {
      record.push_back(std::move(field));
      field.clear();
      records.push_back(std::move(record));
      record.clear();
    } else {
      field += ch;
    }
  }
  return records;
}

TEST(AsCsv, HeaderOfEveryMetricAndARowPerCall) {
  Report r;
  r.calls = {
      {{"Name", std::string("matmul")}, {"Duration (us)", Duration{812.5}}, {"Count", Count{1}}},
      {{"Name", std::string("add")}, {"Percent", Percent{0.1}}, {"Ratio", Ratio{1e-7}}}};
  r.device_metrics["cpu0"] = {{"Duration (us)", Duration{1332}}};  // not a call: not in the CSV
  EXPECT_EQ(AsCsv(r),
            "Name,Duration (us),Percent,Count,Ratio\n"
            "\"matmul\",812.5,,1,\n"
            "\"add\",,0.1,,1e-07\n");
}

TEST(AsCsv, EmptyReportIsAnEmptyHeader) { EXPECT_EQ(AsCsv(Report{}), "\n"); }

TEST(AsCsv, QuotesAndEscapesStringsAndHeaders) {
  Report r;
  r.calls = {{{"Name", std::string("a, \"b\"\nc")}, {"Shapes, all", std::string("x")}}};
  EXPECT_EQ(AsCsv(r),
            "Name,\"Shapes, all\"\n"
            "\"a, \"\"b\"\"\nc\",\"x\"\n");
  const auto records = ReadCsv(AsCsv(r));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], (std::vector<std::string>{"Name", "Shapes, all"}));
  EXPECT_EQ(records[1], (std::vector<std::string>{"a, \"b\"\nc", "x"}));
}

TEST(AsCsv, NumbersKeepFullPrecision) {
  Report r;
  r.calls = {{{"D", Duration{1.0 / 3}}, {"C", Count{INT64_MIN}}}};
  const auto records = ReadCsv(AsCsv(r));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(std::strtod(records[1][1].c_str(), nullptr), 1.0 / 3);
  EXPECT_EQ(records[1][0], "-9223372036854775808");
}

}  // namespace
}  // namespace kprof::report
