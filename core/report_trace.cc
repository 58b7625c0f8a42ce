// A Report as the Chrome trace event format (the JSON object form), which Perfetto's UI and
// chrome://tracing open: a track per device, a slice per call.
#include <cmath>
#include <map>
#include <string>

#include "core/report.h"
#include "nlohmann/json.hpp"

namespace kprof::core {
namespace {

using Json = nlohmann::json;

// A metric as a plain JSON value: its text, count or number (null for NaN or infinity, which
// JSON cannot hold).
Json Plain(const MetricValue& value) {
  Json out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        double number = 0;
        if constexpr (std::is_same_v<T, std::string>) {
          out = v;
          return;
        } else if constexpr (std::is_same_v<T, Count>) {
          out = v.value;
          return;
        } else if constexpr (std::is_same_v<T, Duration>) {
          number = v.microseconds;
        } else if constexpr (std::is_same_v<T, Percent>) {
          number = v.percent;
        } else {
          number = v.ratio;
        }
        out = std::isfinite(number) ? Json(number) : Json();
      },
      value);
  return out;
}

}  // namespace

std::string AsChromeTrace(const Report& report) {
  constexpr int kPid = 1;
  // Tracks: the devices, by name, in order (the calls' devices first, then the totals').
  std::map<std::string, int> tracks;
  const auto device_of = [](const MetricMap& call) {
    const auto it = call.find(kDeviceMetric);
    if (it != call.end() && std::holds_alternative<std::string>(it->second)) {
      return std::get<std::string>(it->second);
    }
    return std::string("unknown device");
  };
  for (const MetricMap& call : report.calls) tracks.emplace(device_of(call), 0);
  for (const auto& [device, metrics] : report.device_metrics) tracks.emplace(device, 0);
  int tid = 0;
  for (auto& [device, track] : tracks) track = ++tid;

  Json events = Json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kPid},
                    {"tid", 0},
                    {"args", {{"name", "kprof profile"}}}});
  for (const auto& [device, track] : tracks) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", kPid},
                      {"tid", track},
                      {"args", {{"name", device}}}});
  }
  // kprofd measures each call's duration, not when it began: a device's calls are laid end to
  // end in their order, from 0.
  std::map<std::string, double> clock;
  for (const MetricMap& call : report.calls) {
    const std::string device = device_of(call);
    double duration = 0;
    if (const auto it = call.find(kDurationMetric);
        it != call.end() && std::holds_alternative<Duration>(it->second) &&
        std::isfinite(std::get<Duration>(it->second).microseconds) &&
        std::get<Duration>(it->second).microseconds > 0) {
      duration = std::get<Duration>(it->second).microseconds;
    }
    std::string name = "call";
    if (const auto it = call.find(kNameMetric);
        it != call.end() && std::holds_alternative<std::string>(it->second)) {
      name = std::get<std::string>(it->second);
    }
    Json args = Json::object();
    for (const auto& [metric, value] : call) args[metric] = Plain(value);
    double& at = clock[device];
    events.push_back({{"name", name},
                      {"cat", "call"},
                      {"ph", "X"},
                      {"pid", kPid},
                      {"tid", tracks.at(device)},
                      {"ts", at},
                      {"dur", duration},
                      {"args", std::move(args)}});
    at += duration;
  }
  Json other = Json::object();
  for (const auto& [metric, value] : report.configuration) other[metric] = Plain(value);
  Json totals = Json::object();
  for (const auto& [device, metrics] : report.device_metrics) {
    Json m = Json::object();
    for (const auto& [metric, value] : metrics) m[metric] = Plain(value);
    totals[device] = std::move(m);
  }
  Json root = {{"traceEvents", std::move(events)},
               {"displayTimeUnit", "ns"},
               {"otherData",
                {{"configuration", std::move(other)},
                 {"device_totals", std::move(totals)},
                 {"layout",
                  "a track per device; its calls laid end to end in their order (kprofd "
                  "measures durations, not start times)"}}}};
  return root.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace kprof::core
