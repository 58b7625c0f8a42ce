// The human-readable table rendering of a Report.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "report/report.h"

namespace kprof::report {
namespace {

// Sort key: a row's duration, or -inf when it has none (such rows go last).
double DurationOf(const MetricMap& row) {
  const auto it = row.find(kDurationMetric);
  if (it == row.end()) return -INFINITY;
  const auto* d = std::get_if<Duration>(&it->second);
  return d != nullptr && !std::isnan(d->microseconds) ? d->microseconds : -INFINITY;
}

// Column sums of counts, durations and percents; ratios and strings do not sum. A column whose
// values are of mixed kinds sums those of the kind it first met.
MetricMap ColumnSums(const std::vector<MetricMap>& rows) {
  MetricMap sums;
  for (const MetricMap& row : rows) {
    for (const auto& [name, value] : row) {
      const MetricKind kind = KindOf(value);
      if (kind != MetricKind::kCount && kind != MetricKind::kDuration &&
          kind != MetricKind::kPercent) {
        continue;
      }
      auto [it, inserted] = sums.try_emplace(name, value);
      if (inserted || KindOf(it->second) != kind) continue;
      if (auto* c = std::get_if<Count>(&it->second)) {
        c->value = static_cast<int64_t>(static_cast<uint64_t>(c->value) +
                                        static_cast<uint64_t>(std::get<Count>(value).value));
      } else if (auto* d = std::get_if<Duration>(&it->second)) {
        d->microseconds += std::get<Duration>(value).microseconds;
      } else if (auto* p = std::get_if<Percent>(&it->second)) {
        p->percent += std::get<Percent>(value).percent;
      }
    }
  }
  sums[std::string(kNameMetric)] = std::string("Sum");
  return sums;
}

}  // namespace

std::vector<std::string> TableColumns(const std::vector<MetricMap>& rows) {
  std::vector<std::string> headers = {
      std::string(kNameMetric),   std::string(kDurationMetric), std::string(kPercentMetric),
      std::string(kDeviceMetric), std::string(kCountMetric),    std::string(kArgumentShapesMetric)};
  std::set<std::string_view> others;
  for (const MetricMap& row : rows) {
    for (const auto& entry : row) others.insert(entry.first);
  }
  for (std::string_view name : others) {
    if (std::find(headers.begin(), headers.end(), name) == headers.end()) {
      headers.emplace_back(name);
    }
  }
  return headers;
}

namespace {

// Columns are measured in code points, so names in any script line up (wide CJK glyphs aside).
size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char ch) {
    return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;  // not a UTF-8 continuation byte
  }));
}

void AppendPadded(std::string* out, const std::string& cell, size_t width, bool left) {
  const std::string padding(width - DisplayWidth(cell), ' ');
  out->append(left ? cell + padding : padding + cell);
}

}  // namespace

std::string AsTable(const Report& report, const TableOptions& options) {
  std::vector<MetricMap> rows = options.aggregate ? AggregateCalls(report.calls) : report.calls;
  if (options.sort) {
    std::stable_sort(rows.begin(), rows.end(), [](const MetricMap& a, const MetricMap& b) {
      return DurationOf(a) > DurationOf(b);
    });
  }
  if (options.compute_col_sums) {
    MetricMap sums = ColumnSums(rows);
    rows.push_back({{std::string(kNameMetric), std::string("----------")}});
    rows.push_back(std::move(sums));
  }
  for (const auto& [device, metrics] : report.device_metrics) {
    MetricMap total = metrics;
    total[std::string(kNameMetric)] = std::string("Total");
    rows.push_back(std::move(total));
  }

  const std::vector<std::string> headers = TableColumns(rows);
  // cells[r][c]; row 0 holds the headers.
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size() + 1);
  cells.push_back(headers);
  for (const MetricMap& row : rows) {
    std::vector<std::string>& line = cells.emplace_back();
    for (const std::string& header : headers) {
      const auto it = row.find(header);
      line.push_back(it == row.end() ? std::string() : FormatForTable(it->second));
    }
  }
  std::vector<size_t> widths(headers.size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(line[c]));
  }

  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      if (c > 0) text.append("  ");
      AppendPadded(&text, line[c], widths[c], /*left=*/c == 0);
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out.append(text).append("\n");
  }

  out.append("\nConfiguration\n-------------\n");
  for (const auto& [name, value] : report.configuration) {
    out.append(name).append(": ").append(FormatForTable(value)).append("\n");
  }
  return out;
}

}  // namespace kprof::report
