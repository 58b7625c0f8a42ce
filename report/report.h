// The report: what a profiling run produced, and its renderings.
//
// A Report is TVM's report model, in plain data: one metric map per call, the totals per
// device, and the configuration that describes the run. It renders as a human table, as CSV
// and as the standard JSON report (DESIGN.md), and reads the standard JSON back, from kprofd or
// from TVM.
//
//   Report report;
//   report.calls.push_back({{"Name", "matmul"}, {"Duration (us)", Duration{812.5}},
//                           {"Count", Count{1}}, {"Device", "cpu0"}});
//   report.device_metrics["cpu0"] = {{"Duration (us)", Duration{1332.0}}};
//   std::cout << AsTable(report);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "report/metric.h"

namespace kprof::report {

// Names of the metrics that the report model itself gives meaning to.
inline constexpr std::string_view kNameMetric = "Name";
inline constexpr std::string_view kHashMetric = "Hash";
inline constexpr std::string_view kDurationMetric = "Duration (us)";
inline constexpr std::string_view kPercentMetric = "Percent";
inline constexpr std::string_view kDeviceMetric = "Device";
inline constexpr std::string_view kCountMetric = "Count";
inline constexpr std::string_view kArgumentShapesMetric = "Argument Shapes";
// Where each argument lay: "+256 (aligned 256), ..." past a page boundary.
inline constexpr std::string_view kArgumentPlacementMetric = "Argument Placement";

struct Report {
  // One row per call, in the order the calls happened.
  std::vector<MetricMap> calls;
  // Device name ("cpu0", "cuda1") -> that device's totals over the whole run. Kept apart from
  // `calls`: a total is never mistaken for a call, nor a call for a total.
  std::map<std::string, MetricMap, std::less<>> device_metrics;
  // What describes the run: "Number of threads", the host, the timer...
  MetricMap configuration;

  friend bool operator==(const Report& a, const Report& b) {
    return a.calls == b.calls && a.device_metrics == b.device_metrics &&
           a.configuration == b.configuration;
  }
};

// Combines values of one metric over several calls: durations, counts and percents sum,
// ratios average, strings stay when all are equal and become "" otherwise. Values of mixed
// kinds also become "". `values` must not be empty.
MetricValue AggregateMetric(const std::vector<const MetricValue*>& values);

// Merges the calls that share a key — Hash (else Name), Argument Shapes and Device — into one
// row each, in order of first appearance. Each component of the key is compared whole, with
// its kind: ("ab", "c") and ("a", "bc") are different keys, as are "1" and Count{1}.
std::vector<MetricMap> AggregateCalls(const std::vector<MetricMap>& calls);

struct TableOptions {
  bool sort = true;              // longest Duration first
  bool aggregate = true;         // AggregateCalls before rendering
  bool compute_col_sums = true;  // a separator and a "Sum" row of column sums
};

// The table's columns for `rows`: Name, Duration (us), Percent, Device, Count, Argument Shapes,
// then the other metrics of the rows by name.
std::vector<std::string> TableColumns(const std::vector<MetricMap>& rows);

// A human-readable table: a row per (aggregated) call, optional Sum row, a "Total" row per
// device, then a Configuration block. Columns Name, Duration (us), Percent, Device, Count,
// Argument Shapes come first, the other metrics after them by name.
std::string AsTable(const Report& report, const TableOptions& options = {});

// The calls as RFC 4180 CSV: a header of every metric name, in the table's order (Name,
// Duration, Percent, Device, Count, Argument Shapes where present, then the others by name), a
// row per call. String values are
// always quoted (so "12" and a count of 12 stay apart), quotes inside are doubled; numbers are
// written in full precision.
std::string AsCsv(const Report& report);

// `text` as one quoted RFC 4180 field, quotes inside doubled.
std::string CsvQuoted(std::string_view text);

// `text` for XML and HTML text and attribute values: & < > " escaped, and the control
// characters other than tab, newline and return left out (XML 1.0 has none of them).
std::string XmlEscaped(std::string_view text);

// The Chrome trace event format (JSON object form; Perfetto and chrome://tracing open it): a
// track ("thread") per device, named after it; a complete event ("X") per call, its metrics as
// args, laid end to end on its device's track in the calls' order, since a report holds
// durations and no start times (otherData says so); the configuration and the devices' totals
// in otherData. One line, object keys sorted.
std::string AsChromeTrace(const Report& report);

// A self-contained HTML page (no script, nothing fetched): each device's calls, aggregated, as
// bars as long as their durations, then the table of AsTable.
std::string AsHtml(const Report& report);

// The standard JSON report. `indent` < 0 writes one line; otherwise pretty-prints. Non-finite
// numbers are written as null, which ReportFromJson reads back as NaN.
std::string AsJson(const Report& report, int indent = -1);

// The metrics as one JSON object of plain values, in name order: a string, a count, or a number
// (microseconds, percent or ratio as they are; null for NaN or an infinity). The environment of
// a result in `kprof time --format json`.
std::string AsPlainJson(const MetricMap& metrics);

// Parses the standard JSON report. Unknown top-level keys are ignored; a missing section is
// empty. Malformed JSON, a wrong type or an unknown metric kind is INVALID_ARGUMENT naming the
// place, e.g. `calls[2]."Duration (us)": unknown metric kind "seconds" (accepted: ...)`.
absl::StatusOr<Report> ReportFromJson(std::string_view json);

}  // namespace kprof::report
