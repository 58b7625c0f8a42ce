// Metric values: what one cell of a report holds.
//
// The five kinds are those of the standard JSON report (and of TVM's profiler, which defined
// it): a string, a count, a duration in microseconds, a percent and a ratio. A metric is a
// std::variant of small structs, so the kind is part of the type and never a runtime tag that
// could disagree with the value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kprof::report {

struct Count {
  int64_t value = 0;
  friend bool operator==(Count a, Count b) { return a.value == b.value; }
  friend bool operator!=(Count a, Count b) { return !(a == b); }
};

struct Duration {
  double microseconds = 0;
  friend bool operator==(Duration a, Duration b) { return a.microseconds == b.microseconds; }
  friend bool operator!=(Duration a, Duration b) { return !(a == b); }
};

struct Percent {
  double percent = 0;
  friend bool operator==(Percent a, Percent b) { return a.percent == b.percent; }
  friend bool operator!=(Percent a, Percent b) { return !(a == b); }
};

struct Ratio {
  double ratio = 0;
  friend bool operator==(Ratio a, Ratio b) { return a.ratio == b.ratio; }
  friend bool operator!=(Ratio a, Ratio b) { return !(a == b); }
};

// The order of the alternatives is the order of MetricKind.
using MetricValue = std::variant<std::string, Count, Duration, Percent, Ratio>;

// A row of a report: metric name -> value. Ordered, so every rendering is deterministic.
using MetricMap = std::map<std::string, MetricValue, std::less<>>;

enum class MetricKind { kString = 0, kCount, kDuration, kPercent, kRatio };

MetricKind KindOf(const MetricValue& value);

// The kind's key in the standard JSON: "string", "count", "microseconds", "percent", "ratio".
std::string_view KindKey(MetricKind kind);

// The inverse of KindKey; nullopt for anything else.
std::optional<MetricKind> KindFromKey(std::string_view key);

// The value as a table cell: counts and durations with thousands separators ("1,234",
// "1,234.57"), percents with two decimals, ratios with two significant digits, strings as they
// are. Independent of the process locale, so output is the same on every host.
std::string FormatForTable(const MetricValue& value);

// The shortest decimal text that reads back as the same double ("0.1", "812.5", "1e-07");
// "nan", "inf" and "-inf" for non-finite values.
std::string ShortestDecimal(double value);

}  // namespace kprof::report
