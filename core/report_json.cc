// The standard JSON report: writing it, and reading it back (from kprofd or from TVM).
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/report.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace kprof::core {
namespace {

using Json = nlohmann::json;

// A valid report nests four levels deep; anything past this is refused before it is built, so
// a hostile document cannot exhaust the stack or the heap through depth.
constexpr int kMaxDepth = 16;

Json MetricToJson(const MetricValue& value) {
  Json number;
  std::visit(
      [&number](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          number = v;
        } else if constexpr (std::is_same_v<T, Count>) {
          number = v.value;
        } else if constexpr (std::is_same_v<T, Duration>) {
          number = v.microseconds;
        } else if constexpr (std::is_same_v<T, Percent>) {
          number = v.percent;
        } else {
          number = v.ratio;
        }
      },
      value);
  return Json::object({{std::string(KindKey(KindOf(value))), std::move(number)}});
}

Json MetricMapToJson(const MetricMap& metrics) {
  Json object = Json::object();
  for (const auto& [name, value] : metrics) object[name] = MetricToJson(value);
  return object;
}

std::string TypeName(const Json& value) {
  if (value.is_number_float()) return "a number";
  if (value.is_number()) return "an integer";
  return absl::StrCat("a", value.is_array() || value.is_object() ? "n " : " ", value.type_name());
}

// `calls[2]."Duration (us)"`: where in the document something was found.
std::string Member(const std::string& where, const std::string& key) {
  return absl::StrCat(where, where.empty() ? "" : ".", Json(key).dump());
}

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("report JSON: ", where, ": ", what));
}

absl::StatusOr<double> ReadDouble(const Json& value, const std::string& where) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();  // AsJson's non-finite
  if (!value.is_number()) {
    return Invalid(where, absl::StrCat("expected a number, got ", TypeName(value)));
  }
  return value.get<double>();  // the parser already refused numbers beyond a double
}

absl::StatusOr<int64_t> ReadCount(const Json& value, const std::string& where) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(u);
    }
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= -kTwoTo63 && d < kTwoTo63 && std::trunc(d) == d) return static_cast<int64_t>(d);
  } else {
    return Invalid(where, absl::StrCat("expected an integer count, got ", TypeName(value)));
  }
  return Invalid(where,
                 absl::StrCat("count ", value.dump(), " is not an integer in [-2^63, 2^63)"));
}

absl::StatusOr<MetricValue> ReadMetric(const Json& value, const std::string& where) {
  static const std::string kAccepted = "string, count, microseconds, percent, ratio";
  if (!value.is_object() || value.size() != 1) {
    return Invalid(
        where,
        absl::StrCat("expected an object with one key naming the metric kind (", kAccepted,
                     "), got ", TypeName(value),
                     value.is_object() ? absl::StrCat(" with ", value.size(), " keys") : ""));
  }
  // Not items(): its proxy would be a temporary that the key refers into.
  const auto only = value.begin();
  const std::string& key = only.key();
  const Json& inner = only.value();
  const std::optional<MetricKind> kind = KindFromKey(key);
  const std::string inner_where = Member(where, key);
  if (!kind) {
    return Invalid(where, absl::StrCat("unknown metric kind ", Json(key).dump(),
                                       " (accepted: ", kAccepted, ")"));
  }
  switch (*kind) {
    case MetricKind::kString:
      if (!inner.is_string()) {
        return Invalid(inner_where, absl::StrCat("expected a string, got ", TypeName(inner)));
      }
      return inner.get<std::string>();
    case MetricKind::kCount: {
      KPROF_ASSIGN_OR_RETURN(const int64_t count, ReadCount(inner, inner_where));
      return Count{count};
    }
    case MetricKind::kDuration: {
      KPROF_ASSIGN_OR_RETURN(const double us, ReadDouble(inner, inner_where));
      return Duration{us};
    }
    case MetricKind::kPercent: {
      KPROF_ASSIGN_OR_RETURN(const double percent, ReadDouble(inner, inner_where));
      return Percent{percent};
    }
    case MetricKind::kRatio: {
      KPROF_ASSIGN_OR_RETURN(const double ratio, ReadDouble(inner, inner_where));
      return Ratio{ratio};
    }
  }
  return Invalid(where, "unreachable metric kind");
}

absl::StatusOr<MetricMap> ReadMetricMap(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return Invalid(where, absl::StrCat("expected an object of metrics, got ", TypeName(value)));
  }
  MetricMap metrics;
  for (const auto& [name, metric] : value.items()) {
    KPROF_ASSIGN_OR_RETURN(MetricValue parsed, ReadMetric(metric, Member(where, name)));
    metrics.emplace(name, std::move(parsed));
  }
  return metrics;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the reader needs the rest.
std::string WithoutExceptionId(const std::string& what) {
  const size_t end = what.find("] ");
  return std::string(what.substr(end == std::string_view::npos ? 0 : end + 2));
}

}  // namespace

std::string AsJson(const Report& report, int indent) {
  Json root = Json::object();
  Json calls = Json::array();
  for (const MetricMap& call : report.calls) calls.push_back(MetricMapToJson(call));
  root["calls"] = std::move(calls);
  Json devices = Json::object();
  for (const auto& [device, metrics] : report.device_metrics) {
    devices[device] = MetricMapToJson(metrics);
  }
  root["device_metrics"] = std::move(devices);
  root["configuration"] = MetricMapToJson(report.configuration);
  // Invalid UTF-8 in a name becomes U+FFFD rather than an exception.
  return root.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

absl::StatusOr<Report> ReportFromJson(std::string_view text) {
  bool too_deep = false;
  const Json::parser_callback_t limit_depth = [&too_deep](int depth, Json::parse_event_t event,
                                                          Json& /*parsed*/) {
    if (depth > kMaxDepth &&
        (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start)) {
      too_deep = true;
      return false;  // skip the nested value without building it
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), limit_depth);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("report JSON is malformed: ", WithoutExceptionId(e.what())));
  }
  if (too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat("report JSON nests deeper than ", kMaxDepth, " levels"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("report JSON: expected an object with \"calls\", \"device_metrics\" and "
                     "\"configuration\" at the top, got ",
                     TypeName(root)));
  }

  Report report;
  if (const auto it = root.find("calls"); it != root.end()) {
    if (!it->is_array()) {
      return Invalid("calls", absl::StrCat("expected an array of calls, got ", TypeName(*it)));
    }
    report.calls.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      KPROF_ASSIGN_OR_RETURN(MetricMap call,
                             ReadMetricMap((*it)[i], absl::StrCat("calls[", i, "]")));
      report.calls.push_back(std::move(call));
    }
  }
  if (const auto it = root.find("device_metrics"); it != root.end()) {
    if (!it->is_object()) {
      return Invalid("device_metrics",
                     absl::StrCat("expected an object of devices, got ", TypeName(*it)));
    }
    for (const auto& [device, metrics] : it->items()) {
      KPROF_ASSIGN_OR_RETURN(MetricMap parsed,
                             ReadMetricMap(metrics, Member("device_metrics", device)));
      report.device_metrics.emplace(device, std::move(parsed));
    }
  }
  if (const auto it = root.find("configuration"); it != root.end()) {
    KPROF_ASSIGN_OR_RETURN(report.configuration, ReadMetricMap(*it, "configuration"));
  }
  return report;
}

}  // namespace kprof::core
