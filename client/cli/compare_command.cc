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

absl::Status NotResults(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' ", why,
                   ": kprof compare reads the output of `kprof time --format json` (an object with "
                   "\"results\"), `kprof batch` (JSONL, a line per job) or Google Benchmark's "
                   "--benchmark_format=json (an object with \"benchmarks\")"));
}

// A member's text, or `fallback` when it is missing or not a string (a file of the wrong shape
// is read as far as it goes, never thrown on).
std::string Text(const Json& object, const char* key, const std::string& fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// Whether a member is the boolean true.
bool IsTrue(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// "MODULE FUNCTION ARG...", from a result's "module", "function" and "args", where it has them.
std::string CallOf(const Json& result) {
  if (!result.contains("function") || !result["function"].is_string()) return "";
  std::vector<std::string> words;
  if (result.contains("module") && result["module"].is_string()) {
    words.push_back(result["module"].get<std::string>());
  }
  words.push_back(result["function"].get<std::string>());
  if (result.contains("args") && result["args"].is_array()) {
    for (const Json& arg : result["args"]) {
      if (arg.is_string()) words.push_back(arg.get<std::string>());
    }
  }
  return absl::StrJoin(words, " ");
}

// A measurement with a time that is not positive, finite and normal (zero, negative, infinite
// and subnormal ones make ratios of inf or 0 and a test of nothing) is compared as a failed one,
// its times dropped; python/kprof/compare.py says it in the same words.
void RefuseOddTimes(Measurement& m) {
  for (size_t k = 0; k < m.seconds.size(); ++k) {
    if (m.seconds[k] > 0 && std::isnormal(m.seconds[k])) continue;
    m.error = absl::StrCat("INVALID_ARGUMENT: repeat ", k + 1, " of ", m.seconds.size(),
                           " is not a positive, finite, normal number of seconds");
    m.seconds.clear();
    return;
  }
}

// A `kprof time --format json` result, or an OK line of `kprof batch`.
absl::StatusOr<Measurement> FromResult(const Json& result, const std::string& name,
                                       const std::string& where) {
  Measurement m;
  m.name =
      result.contains("id") && result["id"].is_string() ? result["id"].get<std::string>() : name;
  m.call = CallOf(result);
  if (result.contains("check") && result["check"].is_object() &&
      Text(result["check"], "outcome", "") != "passed") {
    // A wrong answer's times count for nothing (kprofd never sends them; an edited file might).
    return absl::InvalidArgumentError(absl::StrCat(where, ": its answer's check says '",
                                                   Text(result["check"], "outcome", ""),
                                                   "': a wrong answer has no time to compare"));
  }
  if (!result["results"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"results\" is not an array"));
  }
  for (const Json& seconds : result["results"]) {
    if (!seconds.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"results\" holds ", Echo(seconds), ", not seconds per call"));
    }
    m.seconds.push_back(seconds.get<double>());
  }
  RefuseOddTimes(m);
  return m;
}

absl::StatusOr<std::vector<Measurement>> FromGoogleBenchmark(const Json& json,
                                                             const std::string& path) {
  if (!json["benchmarks"].is_array()) return NotResults(path, "has \"benchmarks\" but no array");
  std::vector<Measurement> measurements;
  std::map<std::string, size_t> index;
  for (const Json& run : json["benchmarks"]) {
    if (!run.is_object()) return NotResults(path, "holds a benchmark that is not an object");
    if (Text(run, "run_type", "iteration") == "aggregate") continue;  // mean, median, stddev
    const std::string name = run.contains("run_name") && run["run_name"].is_string()
                                 ? run["run_name"].get<std::string>()
                                 : Text(run, "name", "");
    auto [at, fresh] = index.emplace(name, measurements.size());
    if (fresh) measurements.push_back(Measurement{name, "", {}, ""});
    Measurement& m = measurements[at->second];
    if (IsTrue(run, "error_occurred")) {
      m.error = Text(run, "error_message", "the benchmark reported an error");
      continue;
    }
    const std::string unit = Text(run, "time_unit", "ns");
    const std::map<std::string, double> scale = {
        {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    const auto factor = scale.find(unit);
    if (factor == scale.end() || !run.contains("real_time") || !run["real_time"].is_number()) {
      return NotResults(
          path, absl::StrCat("has a run of '", name, "' without a real_time in ns, us, ms or s"));
    }
    m.seconds.push_back(run["real_time"].get<double>() * factor->second);
  }
  for (Measurement& m : measurements) {
    if (m.error.empty()) RefuseOddTimes(m);
  }
  return measurements;
}

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string PValue(double p) { return std::isnan(p) ? "-" : absl::StrFormat("%.3g", p); }

// A number for JSON and CSV: NaN is null in JSON, empty in CSV.
Json Number(double v) { return std::isnan(v) ? Json() : Json(v); }
std::string CsvNumber(double v) { return std::isnan(v) ? "" : report::ShortestDecimal(v); }

struct Row {
  std::string name;
  report::Comparison c;
  std::string error;  // why a side has no repeats
};

}  // namespace

// 812.5 us, 1.204 ms: four significant digits in a unit that suits.
std::string Seconds(double s) {
  if (std::isnan(s)) return "-";
  const double a = std::fabs(s);
  if (a < 1e-6) return absl::StrFormat("%.1f ns", s * 1e9);
  if (a < 1e-3) return absl::StrFormat("%.2f us", s * 1e6);
  if (a < 1) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.3f s", s);
}

std::string Percent(double change) {
  return std::isnan(change) ? "-" : absl::StrFormat("%+.2f%%", change * 100);
}

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
      absl::StrAppend(&out, "  (", notes[r - 1], ")\n");
    }
  }
  return out;
}

absl::StatusOr<std::vector<Measurement>> ReadMeasurements(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a directory, not a result file"));
  }
  absl::StatusOr<std::string> text = base::ReadFile(path, "result file");
  if (!text.ok()) return text.status();
  bool too_deep = false;
  const Json whole = ParseInput(*text, &too_deep);
  if (too_deep) {
    return NotResults(path, absl::StrCat("nests deeper than ", kMaxInputDepth, " levels"));
  }
  if (!whole.is_discarded() && whole.is_object() && whole.contains("benchmarks")) {
    return FromGoogleBenchmark(whole, path);
  }
  if (!whole.is_discarded() && whole.is_object() && !whole.contains("status")) {
    if (!whole.contains("results")) return NotResults(path, "is a JSON object without results");
    absl::StatusOr<Measurement> m = FromResult(whole, FileName(path), "'" + path + "'");
    if (!m.ok()) return m.status();
    return std::vector<Measurement>{*std::move(m)};
  }
  if (!whole.is_discarded() && !whole.is_object()) return NotResults(path, "is not an object");
  // JSONL: a line per job.
  std::vector<Measurement> measurements;
  int number = 0;
  for (const absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    const std::string where = absl::StrCat("'", path, "' line ", number);
    const Json json = ParseInput(line, &too_deep);
    if (too_deep) {
      return NotResults(
          path, absl::StrCat("line ", number, " nests deeper than ", kMaxInputDepth, " levels"));
    }
    if (json.is_discarded() || !json.is_object()) {
      return NotResults(path, absl::StrCat("line ", number, " is not a JSON object"));
    }
    if (json.contains("ranking") && !json.contains("id")) continue;  // kprof batch --rank's last
    if (json.contains("results")) {
      absl::StatusOr<Measurement> m = FromResult(json, absl::StrCat("line ", number), where);
      if (!m.ok()) return m.status();
      measurements.push_back(*std::move(m));
    } else if (json.contains("status") && json["status"].is_string()) {
      Measurement m;
      m.name = json.contains("id") && json["id"].is_string() ? json["id"].get<std::string>()
                                                             : absl::StrCat("line ", number);
      m.error = absl::StrCat(json["status"].get<std::string>(), ": ", Text(json, "error", ""));
      measurements.push_back(std::move(m));
    } else {
      return NotResults(path, absl::StrCat("line ", number,
                                           " has neither \"results\" nor "
                                           "\"status\""));
    }
  }
  if (measurements.empty()) return NotResults(path, "holds no measurement");
  return measurements;
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

absl::Status CompareFiles(const std::string& base_path, const std::string& new_path,
                          const CompareCommandOptions& options, int* exit_code) {
  absl::StatusOr<std::vector<Measurement>> base = ReadMeasurements(base_path);
  if (!base.ok()) return base.status();
  absl::StatusOr<std::vector<Measurement>> fresh = ReadMeasurements(new_path);
  if (!fresh.ok()) return fresh.status();

  // Pairs of (base, new) indices: the one measurement of each, or matched by name, else by call.
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<std::string> base_only, new_only;
  if (base->size() == 1 && fresh->size() == 1) {
    pairs.emplace_back(0, 0);
  } else {
    for (const bool by_call : {false, true}) {
      const auto key = [by_call](const Measurement& m) { return by_call ? m.call : m.name; };
      std::map<std::string, size_t> in_new;
      for (size_t j = 0; j < fresh->size(); ++j) {
        if (!key((*fresh)[j]).empty()) in_new.emplace(key((*fresh)[j]), j);
      }
      std::vector<bool> matched(fresh->size(), false);
      base_only.clear();
      for (size_t i = 0; i < base->size(); ++i) {
        const auto j = in_new.find(key((*base)[i]));
        if (key((*base)[i]).empty() || j == in_new.end() || matched[j->second]) {
          base_only.push_back((*base)[i].name);
          continue;
        }
        matched[j->second] = true;
        pairs.emplace_back(i, j->second);
      }
      new_only.clear();
      for (size_t j = 0; j < fresh->size(); ++j) {
        if (!matched[j]) new_only.push_back((*fresh)[j].name);
      }
      if (!pairs.empty()) break;
    }
    if (pairs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no measurement of '", base_path, "' is in '", new_path,
                       "': neither their ids (e.g. '", base->front().name, "' and '",
                       fresh->front().name, "') nor their module, function and arguments match"));
    }
  }

  std::vector<Row> rows;
  for (const auto& [i, j] : pairs) {
    const Measurement& a = (*base)[i];
    const Measurement& b = (*fresh)[j];
    Row row;
    row.name = a.name == b.name ? a.name : absl::StrCat(a.name, " -> ", b.name);
    row.c = report::CompareRepeats(a.seconds, b.seconds, options.compare);
    if (!a.error.empty()) row.error = "base: " + a.error;
    if (!b.error.empty()) row.error += (row.error.empty() ? "new: " : "; new: ") + b.error;
    rows.push_back(std::move(row));
  }
  if (!options.plot.empty()) {
    std::vector<PlottedComparison> plotted;
    for (size_t k = 0; k < rows.size(); ++k) {
      plotted.push_back({rows[k].name, rows[k].c, (*base)[pairs[k].first].seconds,
                         (*fresh)[pairs[k].second].seconds});
    }
    if (absl::Status written =
            WritePlot(options.plot, ComparisonSvg(plotted, options.compare.confidence));
        !written.ok()) {
      return written;
    }
  }
  std::map<std::string, int> counts = {
      {"faster", 0}, {"slower", 0}, {"same", 0}, {"insufficient", 0}};
  for (const Row& row : rows) ++counts[report::VerdictName(row.c.verdict)];

  const std::string interval_title =
      absl::StrFormat("%g%% interval", options.compare.confidence * 100);
  if (options.format == "json") {
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
      comparisons.push_back(std::move(c));
    }
    out["comparisons"] = std::move(comparisons);
    out["base_only"] = base_only;
    out["new_only"] = new_only;
    out["summary"] = counts;
    PrintF("%s\n", out.dump(2).c_str());
  } else if (options.format == "csv") {
    std::string out =
        "name,verdict,change,interval_low,interval_high,p_value,base_repeats,"
        "base_median_seconds,new_repeats,new_median_seconds\n";
    for (const Row& row : rows) {
      absl::StrAppend(&out, report::CsvQuoted(row.name), ",", report::VerdictName(row.c.verdict),
                      ",", CsvNumber(row.c.change), ",", CsvNumber(row.c.interval.low), ",",
                      CsvNumber(row.c.interval.high), ",", CsvNumber(row.c.p), ",",
                      row.c.base_repeats, ",", CsvNumber(row.c.base_median), ",", row.c.new_repeats,
                      ",", CsvNumber(row.c.new_median), "\n");
    }
    Print(out);
  } else {
    std::vector<std::vector<std::string>> cells = {
        {"measurement", "base", "new", "change", interval_title, "p", "verdict", "repeats"}};
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
    for (const Row& row : rows) notes.push_back(row.error);
    std::string out = AlignedTable(cells, {0, 6, 7}, notes);
    absl::StrAppend(&out, "\n", counts["faster"], " faster, ", counts["slower"], " slower, ",
                    counts["same"], " the same within the noise, ", counts["insufficient"],
                    " with too few repeats to say (fewer than ", options.compare.min_repeats,
                    " on a side)\n");
    if (!base_only.empty()) {
      absl::StrAppend(&out, base_only.size(), " only in ", base_path, "\n");
    }
    if (!new_only.empty()) absl::StrAppend(&out, new_only.size(), " only in ", new_path, "\n");
    Print(out);
  }
  std::fflush(stdout);

  if (options.fail_on_regression < 0) return absl::OkStatus();
  std::vector<std::string> regressions;
  for (const Row& row : rows) {
    if (row.c.verdict == report::Verdict::kSlower &&
        row.c.change * 100 > options.fail_on_regression) {
      regressions.push_back(absl::StrCat(row.name, " (", Percent(row.c.change), ")"));
    }
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
