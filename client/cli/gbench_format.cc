#include "client/cli/gbench_format.h"

#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "report/statistics.h"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;

Json Aggregate(const std::string& name, const char* aggregate, size_t repetitions, double value,
               bool percentage) {
  Json run = {{"name", name + "_" + aggregate},
              {"family_index", 0},
              {"per_family_instance_index", 0},
              {"run_name", name},
              {"run_type", "aggregate"},
              {"repetitions", repetitions},
              {"threads", 1},
              {"aggregate_name", aggregate},
              {"aggregate_unit", percentage ? "percentage" : "time"},
              {"iterations", repetitions},
              {"real_time", value},
              {"cpu_time", value},
              {"time_unit", "ns"}};
  if (percentage) run.erase("time_unit");
  return run;
}

// A manifest value as JSON: its string, count or number.
Json Value(const kprof::v1::MetricValue& v) {
  switch (v.value_case()) {
    case kprof::v1::MetricValue::kString:
      return v.string();
    case kprof::v1::MetricValue::kCount:
      return v.count();
    case kprof::v1::MetricValue::kMicroseconds:
      return v.microseconds();
    case kprof::v1::MetricValue::kPercent:
      return v.percent();
    case kprof::v1::MetricValue::kRatio:
      return v.ratio();
    case kprof::v1::MetricValue::VALUE_NOT_SET:
      break;
  }
  return nullptr;
}

}  // namespace

std::string GbenchName(const std::string& id, const kprof::v1::FunctionCall& call) {
  std::vector<std::string> parts;
  if (!id.empty()) parts.push_back(id);
  parts.push_back(call.function());
  for (const std::string& arg : call.args()) parts.push_back(arg);
  return absl::StrJoin(parts, "/");
}

Json GbenchRuns(const std::string& name, const kprof::v1::TimeEvaluateResponse& r) {
  Json runs = Json::array();
  std::vector<double> ns;
  const size_t repetitions = static_cast<size_t>(r.seconds_per_call_size());
  for (int i = 0; i < r.seconds_per_call_size(); ++i) {
    ns.push_back(r.seconds_per_call(i) * 1e9);
    runs.push_back({{"name", name},
                    {"family_index", 0},
                    {"per_family_instance_index", 0},
                    {"run_name", name},
                    {"run_type", "iteration"},
                    {"repetitions", repetitions},
                    {"repetition_index", i},
                    {"threads", 1},
                    {"iterations", i < r.numbers_size() ? r.numbers(i) : r.final_number()},
                    {"real_time", ns.back()},
                    {"cpu_time", ns.back()},
                    {"time_unit", "ns"}});
  }
  if (ns.empty()) return runs;
  // As Google Benchmark's statistics: the standard deviation of a sample (n - 1), 0 for one.
  const double mean = report::Mean(ns);
  double squares = 0;
  for (double v : ns) squares += (v - mean) * (v - mean);
  const double stddev = ns.size() > 1 ? std::sqrt(squares / static_cast<double>(ns.size() - 1)) : 0;
  runs.push_back(Aggregate(name, "mean", repetitions, mean, false));
  runs.push_back(Aggregate(name, "median", repetitions, report::Median(ns), false));
  runs.push_back(Aggregate(name, "stddev", repetitions, stddev, false));
  runs.push_back(Aggregate(name, "cv", repetitions, mean != 0 ? stddev / mean : 0, true));
  return runs;
}

Json GbenchError(const std::string& name, const std::string& message) {
  return {{"name", name},
          {"family_index", 0},
          {"per_family_instance_index", 0},
          {"run_name", name},
          {"run_type", "iteration"},
          {"repetitions", 1},
          {"repetition_index", 0},
          {"threads", 1},
          {"iterations", 0},
          {"real_time", 0},
          {"cpu_time", 0},
          {"time_unit", "ns"},
          {"error_occurred", true},
          {"error_message", message}};
}

Json GbenchDocument(const kprof::v1::MetricMap* environment, Json runs) {
  std::map<std::string, Json> manifest;
  if (environment != nullptr) {
    for (const auto& [key, value] : environment->metrics()) manifest[key] = Value(value);
  }
  const auto get = [&](const std::string& key) {
    const auto it = manifest.find(key);
    return it == manifest.end() ? Json() : it->second;
  };
  Json context = {
      {"date", absl::FormatTime("%Y-%m-%dT%H:%M:%S%Ez", absl::Now(), absl::LocalTimeZone())},
      {"host_name", get("Host").is_string() ? get("Host") : Json("")},
      {"executable", "kprof"},
      {"num_cpus", get("CPUs online").is_number() ? get("CPUs online") : Json(0)},
      {"mhz_per_cpu",
       get("CPU frequency (MHz)").is_number() ? get("CPU frequency (MHz)") : Json(0)},
      {"cpu_scaling_enabled", get("CPU governor").is_string() &&
                                  get("CPU governor") != "performance" &&
                                  get("CPU governor") != "unavailable"},
      {"caches", Json::array()},
      {"library_build_type", "release"}};
  // "0.54, 1.23, 1.42" as Google Benchmark's three numbers.
  if (get("Load average").is_string()) {
    Json load = Json::array();
    for (const absl::string_view part :
         absl::StrSplit(get("Load average").get<std::string>(), ',')) {
      double v = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(part), &v)) load.push_back(v);
    }
    context["load_avg"] = load;
  }
  context["kprof_timing"] = "wall clock per call; cpu_time repeats real_time";
  Json environment_json = Json::object();
  for (const auto& [key, value] : manifest) environment_json[key] = value;
  context["kprof_environment"] = environment_json;
  return {{"context", context}, {"benchmarks", std::move(runs)}};
}

}  // namespace kprof::client
