#include "client/cli/batch_summary.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/compare_command.h"
#include "client/cli/output.h"
#include "report/report.h"

namespace kprof::client {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kCallWidth = 40;  // what the call may take of a 100-column line

// `text` cut to `width` characters (UTF-8 aware enough for a call: bytes of ASCII), "..." ending.
std::string Cut(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

}  // namespace

void BatchSummary::Done(int64_t line, const std::string& id, const std::string& call,
                        const kprof::v1::TimeEvaluateResponse& result, const std::string& daemon) {
  Row row{id,
          call,
          "OK",
          daemon,
          "",
          result.statistics().median(),
          result.seconds_per_call_size() > 1 ? result.rel_stddev() : kNaN,
          result.seconds_per_call_size()};
  if (result.has_converged() && !result.converged()) {
    row.status = "unconverged";
    row.note = absl::StrFormat("not converged: relative std %.2f%% (%s)", result.rel_stddev() * 100,
                               result.stop_reason());
  } else if (result.warnings_size() > 0) {
    row.status = "warned";
    row.note = result.warnings(0);
  }
  rows_[line] = std::move(row);
}

void BatchSummary::Failed(int64_t line, const std::string& id, const std::string& call,
                          const absl::Status& status) {
  rows_[line] = Row{
      id,   call, absl::StatusCodeToString(status.code()), "", std::string(status.message()), kNaN,
      kNaN, 0};
}

bool BatchSummary::SeveralDaemons() const {
  std::set<std::string> daemons;
  for (const auto& [line, row] : rows_) {
    if (!row.daemon.empty()) daemons.insert(row.daemon);
  }
  return daemons.size() > 1;
}

std::string BatchSummary::Table() const {
  const bool daemons = SeveralDaemons();
  std::vector<std::vector<std::string>> cells = {
      {"id", "call", "median", "relative std", "repeats", "status"}};
  if (daemons) cells[0].push_back("daemon");
  std::vector<std::string> notes;
  int64_t ok = 0;
  for (const auto& [line, row] : rows_) {
    ok += row.status == "OK" ? 1 : 0;
    cells.push_back(
        {row.id.empty() ? absl::StrCat("line ", line) : row.id, Cut(row.call, kCallWidth),
         Seconds(row.median),
         std::isnan(row.relative_std) ? "-" : absl::StrFormat("%.2f%%", row.relative_std * 100),
         absl::StrCat(row.repeats), row.status});
    if (daemons) cells.back().push_back(row.daemon);
    notes.push_back(row.note);
  }
  std::string out = AlignedTable(cells, {0, 1, 5, 6}, notes);
  int64_t noisy = 0;
  for (const auto& [line, row] : rows_)
    noisy += row.status == "unconverged" || row.status == "warned";
  const int64_t failed = static_cast<int64_t>(rows_.size()) - ok - noisy;
  absl::StrAppend(&out, "\n", rows_.size(), " jobs: ", ok, " measured, ", noisy,
                  " noisy (not converged or warned), ", failed, " failed\n");
  return out;
}

std::string BatchSummary::Csv() const {
  std::string out = "id,call,median_seconds,relative_std,repeats,status,daemon,note\n";
  for (const auto& [line, row] : rows_) {
    absl::StrAppend(&out, report::CsvQuoted(row.id.empty() ? absl::StrCat("line ", line) : row.id),
                    ",", report::CsvQuoted(row.call), ",", CsvNumber(row.median), ",",
                    CsvNumber(row.relative_std), ",", row.repeats, ",", row.status, ",",
                    report::CsvQuoted(row.daemon), ",", report::CsvQuoted(row.note), "\n");
  }
  return out;
}

}  // namespace kprof::client
