// AsChromeTrace against the trace event format's rules (the JSON object form: traceEvents,
// metadata events naming tracks, complete events with ts and dur in microseconds).
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace kprof::report {
namespace {

using Json = nlohmann::json;

Report TwoDevices() {
  Report r;
  r.calls.push_back({{"Name", "matmul"},
                     {"Duration (us)", Duration{812.5}},
                     {"Count", Count{1}},
                     {"Device", "cpu0"},
                     {"Argument Shapes", "float32[256, 256]"},
                     {"Percent", Percent{61.0}}});
  r.calls.push_back({{"Name", "gemm \"q\" ∑"},
                     {"Duration (us)", Duration{40.25}},
                     {"Device", "cuda0"},
                     {"Ratio", Ratio{std::numeric_limits<double>::quiet_NaN()}}});
  r.calls.push_back({{"Name", "relu"}, {"Duration (us)", Duration{100}}, {"Device", "cpu0"}});
  r.calls.push_back({{"Duration (us)", Duration{-3}}});  // no name, no device, a bad duration
  r.device_metrics["cpu0"] = {{"Duration (us)", Duration{912.5}}};
  r.device_metrics["cuda0"] = {{"Duration (us)", Duration{40.25}}};
  r.configuration = {{"Host", "lab1"}, {"Number of threads", Count{2}}};
  return r;
}

// The rules a viewer relies on, checked event by event; the slices of each track by track.
std::map<int, std::vector<Json>> CheckTrace(const Json& trace) {
  EXPECT_TRUE(trace.is_object());
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["displayTimeUnit"] == "ns" || trace["displayTimeUnit"] == "ms");
  std::map<int, std::string> track_names;
  std::map<int, std::vector<Json>> slices;
  for (const Json& e : trace["traceEvents"]) {
    EXPECT_TRUE(e["name"].is_string()) << e;
    EXPECT_TRUE(e["pid"].is_number_integer()) << e;
    EXPECT_TRUE(e["tid"].is_number_integer()) << e;
    const std::string ph = e["ph"];
    if (ph == "M") {
      EXPECT_TRUE(e["name"] == "process_name" || e["name"] == "thread_name") << e;
      EXPECT_TRUE(e["args"]["name"].is_string()) << e;
      if (e["name"] == "thread_name") track_names[e["tid"]] = e["args"]["name"];
      continue;
    }
    EXPECT_EQ(ph, "X") << e;
    EXPECT_TRUE(e["ts"].is_number()) << e;
    EXPECT_TRUE(e["dur"].is_number()) << e;
    EXPECT_GE(e["ts"].get<double>(), 0) << e;
    EXPECT_GE(e["dur"].get<double>(), 0) << e;
    EXPECT_TRUE(e["args"].is_object()) << e;
    EXPECT_EQ(track_names.count(e["tid"]), 1u) << "a slice on an unnamed track: " << e;
    slices[e["tid"]].push_back(e);
  }
  // On each track, slices in order and never overlapping.
  for (const auto& [tid, list] : slices) {
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_GE(list[i]["ts"].get<double>(),
                list[i - 1]["ts"].get<double>() + list[i - 1]["dur"].get<double>());
    }
  }
  return slices;
}

TEST(ReportTraceTest, ATrackPerDeviceAndASlicePerCall) {
  const Json trace = Json::parse(AsChromeTrace(TwoDevices()));
  const std::map<int, std::vector<Json>> slices = CheckTrace(trace);
  std::map<std::string, int> tid_of;
  for (const Json& e : trace["traceEvents"]) {
    if (e["name"] == "thread_name") tid_of[e["args"]["name"]] = e["tid"];
  }
  ASSERT_EQ(tid_of.size(), 3u);  // cpu0, cuda0, and the call that names no device
  const std::vector<Json>& cpu = slices.at(tid_of.at("cpu0"));
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[0]["name"], "matmul");
  EXPECT_EQ(cpu[0]["ts"], 0.0);
  EXPECT_EQ(cpu[0]["dur"], 812.5);
  EXPECT_EQ(cpu[1]["name"], "relu");
  EXPECT_EQ(cpu[1]["ts"], 812.5);  // laid after matmul on its device
  EXPECT_EQ(cpu[0]["args"]["Argument Shapes"], "float32[256, 256]");
  EXPECT_EQ(cpu[0]["args"]["Count"], 1);
  EXPECT_EQ(cpu[0]["args"]["Percent"], 61.0);
  const std::vector<Json>& gpu = slices.at(tid_of.at("cuda0"));
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0]["name"], "gemm \"q\" ∑");
  EXPECT_EQ(gpu[0]["ts"], 0.0);                    // a track of its own, from 0
  EXPECT_TRUE(gpu[0]["args"]["Ratio"].is_null());  // NaN has no JSON
  const std::vector<Json>& unknown = slices.at(tid_of.at("unknown device"));
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0]["name"], "call");
  EXPECT_EQ(unknown[0]["dur"], 0.0);
  EXPECT_EQ(unknown[0]["args"]["Duration (us)"], -3.0);  // kept as measured, in the args
  EXPECT_EQ(trace["otherData"]["configuration"]["Host"], "lab1");
  EXPECT_EQ(trace["otherData"]["device_totals"]["cpu0"]["Duration (us)"], 912.5);
}

TEST(ReportTraceTest, AnEmptyReportIsAValidTrace) {
  const Json trace = Json::parse(AsChromeTrace(Report{}));
  EXPECT_TRUE(CheckTrace(trace).empty());
  EXPECT_EQ(trace["traceEvents"].size(), 1u);  // the process's name alone
}

}  // namespace
}  // namespace kprof::report
