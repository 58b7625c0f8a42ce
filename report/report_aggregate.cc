// Aggregation of calls that share a key, with the semantics of TVM's report tables.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/report.h"

namespace kprof::report {
namespace {

// One component of an aggregation key, encoded so that no two different (kind, text) pairs —
// and no two different sequences of them — produce the same bytes: kind, length, text.
void AppendKeyComponent(std::string* key, const MetricMap& call, std::string_view metric) {
  const auto it = call.find(metric);
  if (it == call.end()) {
    key->append("-;");
    return;
  }
  const std::string text = FormatForTable(it->second);
  absl::StrAppend(key, static_cast<int>(KindOf(it->second)), ":", text.size(), ":", text, ";");
}

std::string AggregationKey(const MetricMap& call) {
  std::string key;
  AppendKeyComponent(&key, call, call.count(kHashMetric) ? kHashMetric : kNameMetric);
  AppendKeyComponent(&key, call, kArgumentShapesMetric);
  AppendKeyComponent(&key, call, kDeviceMetric);
  return key;
}

template <typename T, typename Field>
double Sum(const std::vector<const MetricValue*>& values, Field field) {
  double sum = 0;
  for (const MetricValue* v : values) sum += std::get<T>(*v).*field;
  return sum;
}

}  // namespace

MetricValue AggregateMetric(const std::vector<const MetricValue*>& values) {
  const MetricKind kind = KindOf(*values.front());
  for (const MetricValue* v : values) {
    if (KindOf(*v) != kind) return std::string();
  }
  switch (kind) {
    case MetricKind::kDuration:
      return Duration{Sum<Duration>(values, &Duration::microseconds)};
    case MetricKind::kPercent:
      return Percent{Sum<Percent>(values, &Percent::percent)};
    case MetricKind::kRatio:
      return Ratio{Sum<Ratio>(values, &Ratio::ratio) / static_cast<double>(values.size())};
    case MetricKind::kCount: {
      // Wraps like the hardware would rather than overflowing into undefined behaviour; a sum
      // of counts past 2^63 is not a case worth more than that.
      uint64_t sum = 0;
      for (const MetricValue* v : values) sum += static_cast<uint64_t>(std::get<Count>(*v).value);
      return Count{static_cast<int64_t>(sum)};
    }
    case MetricKind::kString:
      for (const MetricValue* v : values) {
        if (*v != *values.front()) return std::string();
      }
      return *values.front();
  }
  return std::string();
}

std::vector<MetricMap> AggregateCalls(const std::vector<MetricMap>& calls) {
  std::map<std::string, size_t> group_of_key;
  std::vector<std::vector<const MetricMap*>> groups;
  for (const MetricMap& call : calls) {
    const auto [it, inserted] = group_of_key.emplace(AggregationKey(call), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(&call);
  }

  std::vector<MetricMap> rows;
  rows.reserve(groups.size());
  for (const auto& group : groups) {
    std::map<std::string_view, std::vector<const MetricValue*>> values_by_metric;
    for (const MetricMap* call : group) {
      for (const auto& [name, value] : *call) values_by_metric[name].push_back(&value);
    }
    MetricMap row;
    for (const auto& [name, values] : values_by_metric) {
      row.emplace(std::string(name), AggregateMetric(values));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace kprof::report
