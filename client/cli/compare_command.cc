#include "client/cli/compare_command.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/json_input.h"
#include "client/cli/output.h"
#include "client/cli/plot_svg.h"
#include "client/cli/rank_command.h"
#include "nlohmann/json.hpp"
#include "report/metric.h"
#include "report/report.h"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;

std::string PValue(double p) { return std::isnan(p) ? "-" : absl::StrFormat("%.3g", p); }

// A number for JSON: NaN is null.
Json Number(double v) { return std::isnan(v) ? Json() : Json(v); }

struct Row {
  std::string name;
  report::Comparison c;
  std::string error;  // why a side has no repeats
  std::string noise;  // why a side's times are not to be judged by
};

// What the figures of a comparison are, for the table's foot and the JSON.
constexpr char kMethod[] =
    "change: the new median over the base's, less 1; interval: percentile bootstrap of that "
    "change; p: two-sided Mann-Whitney U";

}  // namespace

// 812.5 us, 1.204 ms: four significant digits in a unit that suits.
std::string Percent(double change) {
  return std::isnan(change) ? "-" : absl::StrFormat("%+.2f%%", change * 100);
}

std::string CsvNumber(double v) { return std::isnan(v) ? "" : report::ShortestDecimal(v); }

std::string AlignedTable(const std::vector<std::vector<std::string>>& cells,
                         const std::vector<size_t>& left, const std::vector<std::string>& notes) {
  std::vector<size_t> width(cells.front().size(), 0);
  for (const auto& line : cells) {
    for (size_t k = 0; k < line.size(); ++k) width[k] = std::max(width[k], line[k].size());
  }
  std::string out;
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line;
    for (size_t k = 0; k < cells[r].size(); ++k) {
      const std::string& cell = cells[r][k];
      const std::string pad(width[k] - cell.size(), ' ');
      const bool padded_right = std::find(left.begin(), left.end(), k) != left.end();
      absl::StrAppend(&line, k > 0 ? "  " : "", padded_right ? cell + pad : pad + cell);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
    if (r > 0 && r - 1 < notes.size() && !notes[r - 1].empty()) {
      absl::StrAppend(&out, Wrapped(absl::StrCat("(", notes[r - 1], ")"), "  "));
    }
  }
  return out;
}

absl::Status WritePlot(const std::string& path, const std::string& svg) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << svg;
  if (!out || !out.flush()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the plot '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Which measurements of two files are compared: the one of each, or those whose ids match, else
// those whose calls match; and those left on either side.
struct Pairing {
  std::vector<std::pair<size_t, size_t>> pairs;  // (base, new) indices
  std::vector<std::string> base_only, new_only;
};

absl::StatusOr<Pairing> Pair(const std::vector<Measurement>& base,
                             const std::vector<Measurement>& fresh, const std::string& base_path,
                             const std::string& new_path) {
  Pairing p;
  if (base.size() == 1 && fresh.size() == 1) {
    p.pairs.emplace_back(0, 0);
    return p;
  }
  for (const bool by_call : {false, true}) {
    const auto key = [by_call](const Measurement& m) { return by_call ? m.call : m.name; };
    std::map<std::string, size_t> in_new;
    for (size_t j = 0; j < fresh.size(); ++j) {
      if (!key(fresh[j]).empty()) in_new.emplace(key(fresh[j]), j);
    }
    std::vector<bool> matched(fresh.size(), false);
    p.base_only.clear();
    for (size_t i = 0; i < base.size(); ++i) {
      const auto j = in_new.find(key(base[i]));
      if (key(base[i]).empty() || j == in_new.end() || matched[j->second]) {
        p.base_only.push_back(base[i].name);
        continue;
      }
      matched[j->second] = true;
      p.pairs.emplace_back(i, j->second);
    }
    p.new_only.clear();
    for (size_t j = 0; j < fresh.size(); ++j) {
      if (!matched[j]) p.new_only.push_back(fresh[j].name);
    }
    if (!p.pairs.empty()) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no measurement of '", base_path, "' is in '", new_path,
                   "': neither their ids (e.g. '", base.front().name, "' and '", fresh.front().name,
                   "') nor their module, function and arguments match"));
}

void PrintJson(const std::vector<Row>& rows, const Pairing& p,
               const std::map<std::string, int>& counts, const CompareCommandOptions& options) {
  Json out = {{"confidence", options.compare.confidence},
              {"threshold", options.compare.threshold},
              {"min_repeats", options.compare.min_repeats},
              {"resamples", options.compare.resamples}};
  Json comparisons = Json::array();
  for (const Row& row : rows) {
    Json c = {{"name", row.name},
              {"base", {{"repeats", row.c.base_repeats}, {"median", Number(row.c.base_median)}}},
              {"new", {{"repeats", row.c.new_repeats}, {"median", Number(row.c.new_median)}}},
              {"change", Number(row.c.change)},
              {"interval", {Number(row.c.interval.low), Number(row.c.interval.high)}},
              {"p_value", Number(row.c.p)},
              {"verdict", report::VerdictName(row.c.verdict)}};
    if (!row.error.empty()) c["error"] = row.error;
    if (!row.noise.empty()) c["noise"] = row.noise;
    comparisons.push_back(std::move(c));
  }
  out["method"] = kMethod;
  out["accept_noisy"] = options.accept_noisy;
  out["comparisons"] = std::move(comparisons);
  out["base_only"] = p.base_only;
  out["new_only"] = p.new_only;
  out["summary"] = counts;
  PrintF("%s\n", out.dump(2).c_str());
}

void PrintCsv(const std::vector<Row>& rows) {
  std::string out =
      "name,verdict,change,interval_low,interval_high,p_value,base_repeats,"
      "base_median_seconds,new_repeats,new_median_seconds,noise\n";
  for (const Row& row : rows) {
    absl::StrAppend(&out, report::CsvQuoted(row.name), ",", report::VerdictName(row.c.verdict), ",",
                    CsvNumber(row.c.change), ",", CsvNumber(row.c.interval.low), ",",
                    CsvNumber(row.c.interval.high), ",", CsvNumber(row.c.p), ",",
                    row.c.base_repeats, ",", CsvNumber(row.c.base_median), ",", row.c.new_repeats,
                    ",", CsvNumber(row.c.new_median), ",", report::CsvQuoted(row.noise), "\n");
  }
  Print(out);
}

void PrintTable(const std::vector<Row>& rows, const Pairing& p, std::map<std::string, int> counts,
                const CompareCommandOptions& options, const std::string& base_path,
                const std::string& new_path) {
  std::vector<std::vector<std::string>> cells = {
      {"measurement", "base", "new", "change",
       absl::StrFormat("%g%% interval", options.compare.confidence * 100), "p", "verdict",
       "repeats"}};
  for (const Row& row : rows) {
    const std::string interval = std::isnan(row.c.interval.low)
                                     ? "-"
                                     : absl::StrCat("[", Percent(row.c.interval.low), ", ",
                                                    Percent(row.c.interval.high), "]");
    cells.push_back({row.name, Seconds(row.c.base_median), Seconds(row.c.new_median),
                     Percent(row.c.change), interval, PValue(row.c.p),
                     report::VerdictName(row.c.verdict),
                     absl::StrCat(row.c.base_repeats, "/", row.c.new_repeats)});
  }
  std::vector<std::string> notes;
  for (const Row& row : rows) {
    std::string note = row.error;
    if (!row.noise.empty()) absl::StrAppend(&note, note.empty() ? "" : "; ", "noisy: ", row.noise);
    notes.push_back(std::move(note));
  }
  std::string out = AlignedTable(cells, {0, 6, 7}, notes);
  absl::StrAppend(&out, "\n", counts["faster"], " faster, ", counts["slower"], " slower, ",
                  counts["same"], " the same within the noise, ", counts["insufficient"],
                  " with too few repeats to say (fewer than ", options.compare.min_repeats,
                  " on a side)");
  if (counts["noisy"] > 0) {
    absl::StrAppend(&out, ", ", counts["noisy"],
                    " noisy (not judged: --accept-noisy judges them all the same)");
  }
  absl::StrAppend(&out, "\n", kMethod, "\n");
  if (!p.base_only.empty()) absl::StrAppend(&out, p.base_only.size(), " only in ", base_path, "\n");
  if (!p.new_only.empty()) absl::StrAppend(&out, p.new_only.size(), " only in ", new_path, "\n");
  Print(out);
}

// FAILED_PRECONDITION naming the measurements slower by more than --fail-on-regression (exit
// 4), else OK.
absl::Status Regressions(const std::vector<Row>& rows, const CompareCommandOptions& options,
                         int* exit_code) {
  if (options.fail_on_regression < 0) return absl::OkStatus();
  std::vector<std::string> regressions;
  for (const Row& row : rows) {
    if (row.c.verdict == report::Verdict::kSlower &&
        row.c.change * 100 > options.fail_on_regression) {
      regressions.push_back(absl::StrCat(row.name, " (", Percent(row.c.change), ")"));
    }
  }
  std::vector<std::string> noisy;
  for (const Row& row : rows) {
    if (row.c.verdict == report::Verdict::kNoisy) noisy.push_back(row.name);
  }
  if (regressions.empty() && !noisy.empty()) {
    // A gate that could not judge a measurement cannot say it did not regress.
    *exit_code = 4;
    return absl::FailedPreconditionError(absl::StrCat(
        noisy.size(), " of ", rows.size(), " measurements noisy, not judged for a regression: ",
        absl::StrJoin(noisy.begin(), noisy.begin() + std::min<ptrdiff_t>(noisy.size(), 10), ", "),
        noisy.size() > 10 ? ", ..." : "",
        " (measure them on a quiet host, or --accept-noisy to judge them all the same)"));
  }
  if (regressions.empty()) return absl::OkStatus();
  *exit_code = 4;
  const size_t shown = std::min<size_t>(regressions.size(), 10);
  return absl::FailedPreconditionError(absl::StrCat(
      regressions.size(), " of ", rows.size(), " measurements slower by more than ",
      report::ShortestDecimal(options.fail_on_regression), "%: ",
      absl::StrJoin(regressions.begin(), regressions.begin() + static_cast<ptrdiff_t>(shown), ", "),
      regressions.size() > shown ? ", ..." : ""));
}

}  // namespace

absl::Status CompareFiles(const std::string& base_path, const std::string& new_path,
                          const CompareCommandOptions& options, int* exit_code) {
  absl::StatusOr<std::vector<Measurement>> base = ReadMeasurements(base_path);
  if (!base.ok()) return base.status();
  absl::StatusOr<std::vector<Measurement>> fresh = ReadMeasurements(new_path);
  if (!fresh.ok()) return fresh.status();
  absl::StatusOr<Pairing> paired = Pair(*base, *fresh, base_path, new_path);
  if (!paired.ok()) return paired.status();

  std::vector<Row> rows;
  for (const auto& [i, j] : paired->pairs) {
    const Measurement& a = (*base)[i];
    const Measurement& b = (*fresh)[j];
    Row row;
    row.name = a.name == b.name ? a.name : absl::StrCat(a.name, " -> ", b.name);
    row.c = report::CompareRepeats(a.seconds, b.seconds, options.compare);
    if (!a.error.empty()) row.error = "base: " + a.error;
    if (!b.error.empty()) row.error += (row.error.empty() ? "new: " : "; new: ") + b.error;
    if (!a.noise.empty()) row.noise = "base: " + a.noise;
    if (!b.noise.empty()) row.noise += (row.noise.empty() ? "new: " : "; new: ") + b.noise;
    // Unjudged unless asked: a verdict on repeats a busy host shaped is the host's, not the
    // kernels'. One without a verdict anyway (too few repeats) keeps its reason.
    if (!row.noise.empty() && !options.accept_noisy &&
        row.c.verdict != report::Verdict::kInsufficient) {
      row.c.verdict = report::Verdict::kNoisy;
    }
    rows.push_back(std::move(row));
  }
  if (!options.plot.empty()) {
    std::vector<PlottedComparison> plotted;
    for (size_t k = 0; k < rows.size(); ++k) {
      plotted.push_back({rows[k].name, rows[k].c, (*base)[paired->pairs[k].first].seconds,
                         (*fresh)[paired->pairs[k].second].seconds});
    }
    if (absl::Status written =
            WritePlot(options.plot, ComparisonSvg(plotted, options.compare.confidence));
        !written.ok()) {
      return written;
    }
  }
  std::map<std::string, int> counts = {
      {"faster", 0}, {"slower", 0}, {"same", 0}, {"insufficient", 0}, {"noisy", 0}};
  for (const Row& row : rows) ++counts[report::VerdictName(row.c.verdict)];
  if (options.format == "json") {
    PrintJson(rows, *paired, counts, options);
  } else if (options.format == "csv") {
    PrintCsv(rows);
  } else {
    PrintTable(rows, *paired, counts, options, base_path, new_path);
  }
  std::fflush(stdout);
  return Regressions(rows, options, exit_code);
}

namespace {

// kprof compare BASE NEW
class CompareCommand final : public Command {
 public:
  explicit CompareCommand(CLI::App& app)
      : Command(app, "compare",
                "which measurements of NEW are faster or slower than BASE's, with an interval "
                "and a U-test p; exit 4 past --fail-on-regression") {
    CLI::App& c = *subcommand();
    c.add_option("BASE", base_, "kprof time JSON, kprof batch JSONL or Google Benchmark JSON")
        ->required();
    c.add_option("NEW", fresh_, "the same kinds of file")->required();
    AddRankFlags(c, flags_, /*race=*/false);
    min_repeats_ = c.add_option("--min-repeats", min_repeats_value_,
                                "fewer repeats on a side is insufficient (default 5)");
    c.add_option("--resamples", resamples_, "bootstrap resamples (default 2000)");
    fail_on_regression_ = c.add_option("--fail-on-regression", fail_on_regression_value_,
                                       "PERCENT: exit 4 when a measurement is slower by more");
    c.add_option("--plot", plot_, "also draw the comparisons as SVG in FILE");
  }

  absl::Status Run(const Globals&, const std::string& format, int* exit_code) override {
    CompareCommandOptions options;
    options.format = format;
    KPROF_ASSIGN_OR_RETURN(const report::RankOptions rank, RankOptionsFrom(flags_));
    options.compare.confidence = rank.confidence;
    options.compare.threshold = rank.threshold;
    if (min_repeats_->count() > 0) {
      if (min_repeats_value_ < 1) return UsageError("--min-repeats: at least 1");
      options.compare.min_repeats = static_cast<size_t>(min_repeats_value_);
    }
    if (resamples_ < 100 || resamples_ > 1000000) {
      return UsageError(absl::StrCat("--resamples ", resamples_, ": between 100 and 1000000"));
    }
    options.compare.resamples = static_cast<int>(resamples_);
    if (fail_on_regression_->count() > 0 && !(fail_on_regression_value_ >= 0)) {
      return UsageError(absl::StrCat("--fail-on-regression ", fail_on_regression_value_,
                                     ": a percentage, 0 or more (5 fails on a slowdown over 5%)"));
    }
    options.fail_on_regression = fail_on_regression_->count() > 0 ? fail_on_regression_value_ : -1;
    options.plot = plot_;
    options.accept_noisy = flags_.accept_noisy;
    return CompareFiles(base_, fresh_, options, exit_code);
  }

 private:
  std::string base_, fresh_, plot_;
  RankFlags flags_;
  int64_t min_repeats_value_ = 5, resamples_ = 2000;
  double fail_on_regression_value_ = -1;
  CLI::Option* min_repeats_ = nullptr;
  CLI::Option* fail_on_regression_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddCompareCommand(CLI::App& app) {
  return std::make_unique<CompareCommand>(app);
}

}  // namespace kprof::client
