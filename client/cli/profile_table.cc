#include "client/cli/profile_table.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/compare_command.h"
#include "client/cli/output.h"
#include "report/metric.h"

namespace kprof::client {
namespace {

using report::MetricMap;

// The columns the table has a place for already, or that say little at a glance (--wide shows
// them): the device (one a job), the shapes (the title says the call), the placement, perf's
// counting domain and running ratio.
const std::set<std::string>& Placed() {
  static const auto* const placed =
      new std::set<std::string>{std::string(report::kNameMetric),
                                std::string(report::kDurationMetric),
                                std::string(report::kPercentMetric),
                                std::string(report::kDeviceMetric),
                                std::string(report::kCountMetric),
                                std::string(report::kArgumentShapesMetric),
                                std::string(report::kArgumentPlacementMetric),
                                "perf domain",
                                "perf running ratio"};
  return *placed;
}

double Microseconds(const MetricMap& row) {
  const auto it = row.find(report::kDurationMetric);
  const auto* d = it == row.end() ? nullptr : std::get_if<report::Duration>(&it->second);
  return d != nullptr && !std::isnan(d->microseconds) ? d->microseconds : NAN;
}

int64_t Calls(const MetricMap& row) {
  const auto it = row.find(report::kCountMetric);
  const auto* c = it == row.end() ? nullptr : std::get_if<report::Count>(&it->second);
  return c != nullptr ? c->value : 0;
}

// Counts of nanoseconds, by name (perf's clocks).
bool InNanoseconds(const std::string& metric) {
  return metric == "task-clock" || metric == "cpu-clock" || metric == "duration_time";
}

// A cell: times in a unit that suits each, the rest as the report's table writes them.
std::string Cell(const std::string& metric, const report::MetricValue& value) {
  if (const auto* d = std::get_if<report::Duration>(&value)) return Seconds(d->microseconds / 1e6);
  if (const auto* c = std::get_if<report::Count>(&value); c != nullptr && InNanoseconds(metric)) {
    return Seconds(static_cast<double>(c->value) / 1e9);
  }
  return report::FormatForTable(value);
}

// A column's heading: times carry their unit in each cell, so their name goes without one.
std::string Heading(const std::string& metric) {
  constexpr std::string_view kMicroseconds = " (us)";
  if (metric.size() > kMicroseconds.size() &&
      metric.compare(metric.size() - kMicroseconds.size(), kMicroseconds.size(), kMicroseconds) ==
          0) {
    return metric.substr(0, metric.size() - kMicroseconds.size());
  }
  return metric;
}

}  // namespace

std::string ProfileTable(const report::Report& report, const ProfileTableOptions& options) {
  std::vector<MetricMap> rows = report::AggregateCalls(report.calls);
  if (options.sort) {
    std::stable_sort(rows.begin(), rows.end(), [](const MetricMap& a, const MetricMap& b) {
      return !(Microseconds(a) <= Microseconds(b)) && !std::isnan(Microseconds(a));
    });
  }
  std::vector<std::vector<std::string>> cells = {{"function", "calls", "total", "per call", "%"}};
  for (const MetricMap& row : rows) {
    const auto name = row.find(report::kNameMetric);
    const auto percent = row.find(report::kPercentMetric);
    const double us = Microseconds(row);
    const int64_t calls = Calls(row);
    cells.push_back({name == row.end() ? "" : report::FormatForTable(name->second),
                     absl::StrCat(calls), Seconds(us / 1e6),
                     calls > 0 ? Seconds(us / 1e6 / static_cast<double>(calls)) : "-",
                     percent == row.end() ? "" : report::FormatForTable(percent->second)});
  }
  std::set<std::string> named;
  for (const MetricMap& row : rows) {
    for (const auto& entry : row) {
      if (Placed().count(entry.first) == 0) named.insert(entry.first);
    }
  }
  // The shortest names first, so that the most fit; each that still fits, and the ones that do
  // not named beneath.
  std::vector<std::string> others(named.begin(), named.end());
  std::stable_sort(others.begin(), others.end(), [](const std::string& a, const std::string& b) {
    return Heading(a).size() < Heading(b).size();
  });
  const auto width_of = [&cells](size_t column) {
    size_t w = 0;
    for (const auto& line : cells) w = std::max(w, line[column].size());
    return w;
  };
  size_t used = 0;
  for (size_t c = 0; c < cells.front().size(); ++c) used += width_of(c) + (c > 0 ? 2 : 0);
  std::vector<std::string> left_out;
  for (const std::string& metric : others) {
    std::vector<std::string> column = {Heading(metric)};
    for (const MetricMap& row : rows) {
      const auto it = row.find(metric);
      column.push_back(it == row.end() ? "" : Cell(metric, it->second));
    }
    size_t w = 0;
    for (const std::string& cell : column) w = std::max(w, cell.size());
    if (used + 2 + w > options.width) {
      left_out.push_back(column.front());
      continue;
    }
    used += 2 + w;
    for (size_t r = 0; r < cells.size(); ++r) cells[r].push_back(std::move(column[r]));
  }
  std::string out = AlignedTable(cells, {0}, {});
  if (!left_out.empty()) {
    absl::StrAppend(
        &out, Wrapped(absl::StrCat("(", left_out.size(), " more: ", absl::StrJoin(left_out, ", "),
                                   "; --wide shows "
                                   "every column)"),
                      "", options.width));
  }
  for (const auto& [device, metrics] : report.device_metrics) {
    const double us = Microseconds(metrics);
    if (!std::isnan(us)) absl::StrAppend(&out, device, ": ", Seconds(us / 1e6), " in all\n");
  }
  return out;
}

}  // namespace kprof::client
