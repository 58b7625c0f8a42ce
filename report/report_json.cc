// The JSON renderings of a Report: the standard JSON report (written, and read back from
// kprofd or from TVM) and the Chrome trace event format.
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace kprof::report {
namespace {

using Json = nlohmann::json;

// A valid report nests four levels deep; anything past this is refused before it is built, so
// a hostile document cannot exhaust the stack or the heap through depth.
constexpr int kMaxDepth = 16;

// A metric as a plain JSON value: its text, count or number (null for NaN or an infinity, which
// JSON cannot hold).
Json PlainJson(const MetricValue& value) {
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

// A metric of the standard JSON report: an object of its kind and value.
Json MetricToJson(const MetricValue& value) {
  return Json::object({{std::string(KindKey(KindOf(value))), PlainJson(value)}});
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

// The non-finite numbers that JSON has no spelling for, as other writers spell them bare: TVM's
// (an ostream's "nan", "inf", "-inf") and Python's json ("NaN", "Infinity", "-Infinity"). TVM's
// reader takes them; nlohmann's parser does not, so a document that fails to parse is read
// again with each such word (outside strings) turned into a string that starts with
// kNonFinite, which ReadDouble knows.
constexpr absl::string_view kNonFinite = "\x01kprof-non-finite:";

struct NonFiniteWord {
  absl::string_view word;
  double value;
};
constexpr NonFiniteWord kNonFiniteWords[] = {
    {"-Infinity", -std::numeric_limits<double>::infinity()},
    {"Infinity", std::numeric_limits<double>::infinity()},
    {"-inf", -std::numeric_limits<double>::infinity()},
    {"inf", std::numeric_limits<double>::infinity()},
    {"-NaN", std::numeric_limits<double>::quiet_NaN()},
    {"NaN", std::numeric_limits<double>::quiet_NaN()},
    {"-nan", std::numeric_limits<double>::quiet_NaN()},
    {"nan", std::numeric_limits<double>::quiet_NaN()},
};

bool IsWordCharacter(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.'; }

// `text` with the non-finite words quoted; nullopt when it has none.
std::optional<std::string> QuoteNonFiniteWords(absl::string_view text) {
  std::string out;
  bool replaced = false;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && i + 1 < text.size()) {
        out.append(text.data() + i, 2);
        ++i;
        continue;
      }
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if (i == 0 || !IsWordCharacter(text[i - 1])) {
      const NonFiniteWord* found = nullptr;
      for (const NonFiniteWord& w : kNonFiniteWords) {
        const size_t end = i + w.word.size();
        if (text.substr(i, w.word.size()) == w.word &&
            (end == text.size() || !IsWordCharacter(text[end]))) {
          found = &w;
          break;
        }
      }
      if (found != nullptr) {
        absl::StrAppend(&out, "\"\\u0001", kNonFinite.substr(1), found->word, "\"");
        i += found->word.size() - 1;
        replaced = true;
        continue;
      }
    }
    out.push_back(c);
  }
  if (!replaced) return std::nullopt;
  return out;
}

absl::StatusOr<double> ReadDouble(const Json& value, const std::string& where) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();  // AsJson's non-finite
  if (value.is_string()) {
    absl::string_view text = value.get_ref<const std::string&>();
    if (absl::ConsumePrefix(&text, kNonFinite)) {
      for (const NonFiniteWord& w : kNonFiniteWords) {
        if (w.word == text) return w.value;
      }
    }
  }
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
      if (absl::StartsWith(inner.get_ref<const std::string&>(), kNonFinite)) {
        return Invalid(inner_where, "expected a string, got a non-finite number");
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

// The Chrome trace event format (its JSON object form): a track per device, a slice per call.
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
    for (const auto& [metric, value] : call) args[metric] = PlainJson(value);
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
  for (const auto& [metric, value] : report.configuration) other[metric] = PlainJson(value);
  Json totals = Json::object();
  for (const auto& [device, metrics] : report.device_metrics) {
    Json m = Json::object();
    for (const auto& [metric, value] : metrics) m[metric] = PlainJson(value);
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

std::string AsPlainJson(const MetricMap& metrics) {
  Json object = Json::object();
  for (const auto& [name, value] : metrics) object[name] = PlainJson(value);
  return object.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
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
    // Read again with NaN and the infinities as other writers spell them; the first error is
    // the one to report when that does not help either.
    const std::optional<std::string> quoted =
        QuoteNonFiniteWords(absl::string_view(text.data(), text.size()));
    bool parsed = false;
    if (quoted) {
      too_deep = false;
      try {
        root = Json::parse(quoted->begin(), quoted->end(), limit_depth);
        parsed = true;
      } catch (const Json::exception&) {
      }
    }
    if (!parsed) {
      return absl::InvalidArgumentError(
          absl::StrCat("report JSON is malformed: ", WithoutExceptionId(e.what())));
    }
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

  if (!root.contains("calls") && !root.contains("device_metrics") &&
      !root.contains("configuration")) {
    // Some other JSON (a `kprof time` result, a batch line): an empty table would hide that.
    std::vector<std::string> keys;
    for (const auto& [key, value] : root.items()) {
      if (keys.size() == 6) {
        keys.push_back("...");
        break;
      }
      keys.push_back(absl::StrCat("\"", key, "\""));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "not a report: a report has \"calls\", \"device_metrics\" or \"configuration\" at the "
        "top, and this has ",
        keys.empty() ? std::string("nothing") : absl::StrJoin(keys, ", "),
        root.contains("mean") || root.contains("results")
            ? " — a time result (kprof time --format json), which kprof compare reads"
            : ""));
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

}  // namespace kprof::report
