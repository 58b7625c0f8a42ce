#include "client/cli/rank_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/compare_command.h"
#include "client/cli/output.h"
#include "report/metric.h"
#include "report/report.h"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;

Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(); }

// At most ten names, then how many more.
std::string Names(const std::vector<std::string>& names) {
  const size_t shown = std::min<size_t>(names.size(), 10);
  std::string out =
      absl::StrJoin(names.begin(), names.begin() + static_cast<ptrdiff_t>(shown), ", ");
  if (names.size() > shown) absl::StrAppend(&out, " and ", names.size() - shown, " more");
  return out;
}

// What a ranking's figures are, beneath its table.
constexpr char kRankMethod[] =
    "change: from the fastest, the Hodges-Lehmann shift of log-times; interval: Moses', every "
    "one at the confidence together (kprof compare shows the median ratio, one pair at a time)";

}  // namespace

Json RankingJson(const report::Ranking& ranking) {
  const std::string fastest = ranking.Fastest();
  Json out = {{"method", kRankMethod},
              {"fastest", fastest.empty() ? Json() : Json(fastest)},
              {"ties", ranking.Ties()},
              {"decided", ranking.Decided()},
              {"confidence", ranking.confidence},
              {"threshold", ranking.threshold},
              {"looks", ranking.looks},
              {"alpha", ranking.alpha},
              {"rounds", ranking.rounds},
              {"repeats", ranking.repeats},
              {"seconds", Number(ranking.seconds)}};
  Json candidates = Json::array();
  for (const report::RankedCandidate& c : ranking.candidates) {
    Json item = {{"name", c.name},
                 {"state", report::RankStateName(c.state)},
                 {"repeats", c.repeats},
                 {"median", Number(c.median)},
                 {"change", Number(c.change)},
                 {"interval", {Number(c.interval.low), Number(c.interval.high)}}};
    if (!c.error.empty()) item["error"] = c.error;
    if (c.decided_round > 0) item["decided_round"] = c.decided_round;
    candidates.push_back(std::move(item));
  }
  out["candidates"] = std::move(candidates);
  return out;
}

std::string RenderRanking(const report::Ranking& ranking, const std::string& format) {
  if (format == "json") return Json({{"ranking", RankingJson(ranking)}}).dump(2) + "\n";
  if (format == "csv") {
    std::string out = "name,state,median_seconds,change,interval_low,interval_high,repeats\n";
    for (const report::RankedCandidate& c : ranking.candidates) {
      absl::StrAppend(&out, report::CsvQuoted(c.name), ",", report::RankStateName(c.state), ",",
                      CsvNumber(c.median), ",", CsvNumber(c.change), ",", CsvNumber(c.interval.low),
                      ",", CsvNumber(c.interval.high), ",", c.repeats, "\n");
    }
    return out;
  }
  std::vector<std::vector<std::string>> cells = {
      {"rank", "candidate", "median", "change", "interval", "state", "repeats"}};
  std::map<std::string, size_t> counts;
  for (size_t i = 0; i < ranking.candidates.size(); ++i) {
    const report::RankedCandidate& c = ranking.candidates[i];
    ++counts[report::RankStateName(c.state)];
    const bool failed = c.state == report::RankState::kFailed;
    const std::string interval =
        failed || c.state == report::RankState::kFastest
            ? "-"
            : absl::StrCat("[", Percent(c.interval.low), ", ", Percent(c.interval.high), "]");
    cells.push_back({failed ? "-" : absl::StrCat(i + 1), c.name, Seconds(c.median),
                     c.state == report::RankState::kFastest ? "-" : Percent(c.change), interval,
                     report::RankStateName(c.state), absl::StrCat(c.repeats)});
  }
  std::vector<std::string> notes;
  for (const report::RankedCandidate& c : ranking.candidates) {
    notes.push_back(c.decided_round > 0 ? absl::StrCat("slower in round ", c.decided_round,
                                                       ": its change and interval are that "
                                                       "round's; measured no more")
                                        : c.error);
  }
  std::string out = AlignedTable(cells, {1, 5}, notes);
  const std::string percent = report::ShortestDecimal(ranking.threshold * 100);
  const std::string confidence = absl::StrFormat("%g%%", ranking.confidence * 100);
  const std::string fastest = ranking.Fastest();
  absl::StrAppend(
      &out, "\nfastest: ",
      fastest.empty()
          ? "none left (every candidate failed, or was found slower than one that failed)"
          : fastest,
      "\n");
  absl::StrAppend(&out, "tie set: ", Names(ranking.Ties()),
                  " (not shown slower than the fastest by over ", percent, "%; every verdict at ",
                  confidence, " confidence together)\n");
  std::vector<std::string> undecided;
  for (const report::RankedCandidate& c : ranking.candidates) {
    if (c.state == report::RankState::kUndecided) undecided.push_back(c.name);
  }
  if (undecided.empty()) {
    absl::StrAppend(&out, "decided: each of the tie set is shown within ", percent,
                    "% of the fastest\n");
  } else {
    absl::StrAppend(&out, "undecided: ", Names(undecided),
                    " (the repeats ran out before each was shown within ", percent,
                    "% or beyond it)\n");
  }
  absl::StrAppend(&out, counts["slower"], " slower, ", counts["failed"], " failed; ",
                  ranking.repeats, " repeats in ", ranking.rounds,
                  ranking.rounds == 1 ? " round" : " rounds");
  if (std::isfinite(ranking.seconds)) {
    absl::StrAppend(&out, absl::StrFormat(", %.1f s", ranking.seconds));
  }
  absl::StrAppend(&out, "\n", kRankMethod, "\n");
  return out;
}

absl::Status RankFiles(const std::vector<std::string>& paths, const report::RankOptions& options,
                       const std::string& format, bool accept_noisy) {
  std::vector<std::pair<std::string, std::vector<double>>> candidates;
  std::map<std::string, std::string> file_of;
  std::map<std::string, std::string> errors;
  for (const std::string& path : paths) {
    absl::StatusOr<std::vector<Measurement>> measurements = ReadMeasurements(path);
    if (!measurements.ok()) return measurements.status();
    for (Measurement& m : *measurements) {
      if (const auto [it, fresh] = file_of.emplace(m.name, path); !fresh) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the measurement '", m.name, "' is ",
            it->second == path ? absl::StrCat("twice in '", path, "'")
                               : absl::StrCat("in '", it->second, "' and in '", path, "'"),
            " (names must differ: rank the files apart, or give their jobs other ids)"));
      }
      if (!m.error.empty()) errors[m.name] = m.error;
      if (!m.noise.empty() && m.error.empty() && !accept_noisy) {
        // Left out: a place won on a busy host is the host's.
        errors[m.name] = absl::StrCat("noisy, not ranked (--accept-noisy ranks it): ", m.noise);
        m.seconds.clear();
      }
      candidates.emplace_back(m.name, std::move(m.seconds));
    }
  }
  report::Ranking ranking = report::RankRepeats(candidates, options);
  for (report::RankedCandidate& c : ranking.candidates) {
    if (const auto found = errors.find(c.name); found != errors.end()) c.error = found->second;
  }
  Print(RenderRanking(ranking, format));
  std::fflush(stdout);
  return absl::OkStatus();
}

void AddRankFlags(CLI::App& c, RankFlags& f, bool race) {
  c.add_option("--confidence", f.confidence, "how sure a verdict must be (default 0.95)");
  c.add_option("--threshold", f.threshold, "PERCENT: smaller changes are ties (default 1)");
  if (!race) {
    c.add_flag("--accept-noisy", f.accept_noisy,
               "judge measurements that did not converge or came with a warning (a busy host)");
    return;
  }
  c.add_option("--rank-initial", f.initial, "--rank: the first round's repeats (10)");
  c.add_option("--rank-max-repeats", f.max_repeats, "--rank: most repeats of a candidate (300)");
  c.add_option("--rank-budget", f.budget,
               "--rank: start no round that would end past SECONDS (default: none)");
}

absl::StatusOr<report::RankOptions> RankOptionsFrom(const RankFlags& f) {
  report::RankOptions options;
  if (!(f.confidence > 0 && f.confidence < 1)) {
    return UsageError(
        absl::StrCat("--confidence ", f.confidence, ": a probability between 0 and 1, e.g. 0.95"));
  }
  options.confidence = f.confidence;
  if (!(f.threshold >= 0 && f.threshold < 100)) {
    return UsageError(absl::StrCat("--threshold ", f.threshold,
                                   ": a percentage from 0 to under 100 (default 1)"));
  }
  options.threshold = f.threshold / 100;
  // A comparison holds every pairwise difference of two candidates' repeats: 2000 a side is
  // 4 million of them (32 MB).
  if (f.initial < 2 || f.initial > 2000) {
    return UsageError(absl::StrCat("--rank-initial ", f.initial,
                                   ": repeats of the first round, from 2 to 2000 (default 10)"));
  }
  if (f.max_repeats < f.initial || f.max_repeats > 2000) {
    return UsageError(absl::StrCat("--rank-max-repeats ", f.max_repeats, ": from --rank-initial (",
                                   f.initial, ") to 2000 (default 300)"));
  }
  if (!(f.budget >= 0) || std::isinf(f.budget)) {
    return UsageError(absl::StrCat("--rank-budget ", f.budget,
                                   ": seconds, more than 0 (0, the default: no budget)"));
  }
  options.initial = static_cast<size_t>(f.initial);
  options.max_repeats = static_cast<size_t>(f.max_repeats);
  return options;
}

namespace {

// kprof rank FILE...
class RankCommand final : public Command {
 public:
  explicit RankCommand(CLI::App& app)
      : Command(app, "rank",
                "rank measured results (kprof time JSON, kprof batch JSONL or Google Benchmark "
                "JSON): the fastest and those tied with it") {
    subcommand()->add_option("FILE", files_, "result files")->required();
    AddRankFlags(*subcommand(), flags_, /*race=*/false);
  }

  absl::Status Run(const Globals&, const std::string& format, int*) override {
    KPROF_ASSIGN_OR_RETURN(const report::RankOptions options, RankOptionsFrom(flags_));
    return RankFiles(files_, options, format, flags_.accept_noisy);
  }

 private:
  std::vector<std::string> files_;
  RankFlags flags_;
};

}  // namespace

std::unique_ptr<Command> AddRankCommand(CLI::App& app) {
  return std::make_unique<RankCommand>(app);
}

}  // namespace kprof::client
