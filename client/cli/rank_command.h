// Rankings as kprof prints them: `kprof rank FILE...` over result files, and the last words of
// `kprof batch --rank` (report/ranking.h). Table, JSON or CSV; the Python client's Ranking renders
// the same bytes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/ranking.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kprof::client {

// The options of a ranking, as `kprof rank` and `kprof batch --rank` take them; the race's own
// (initial, max repeats, budget) only with `race`.
struct RankFlags {
  double confidence = 0.95;
  double threshold = 1;  // percent
  int64_t initial = 10;
  int64_t max_repeats = 300;
  double budget = 0;          // seconds; 0: none
  bool accept_noisy = false;  // compare and rank files: judge noisy measurements too
};
void AddRankFlags(CLI::App& command, RankFlags& flags, bool race);

// The flags as RankOptions, checked: a usage error naming the flag and what it takes.
absl::StatusOr<report::RankOptions> RankOptionsFrom(const RankFlags& flags);

// {"fastest", "ties", "decided", "confidence", "threshold", "looks", "alpha", "rounds",
// "repeats", "seconds", "candidates": [{"name", "state", "repeats", "median", "change",
// "interval", ("error")}]}; numbers that are not finite are null.
nlohmann::ordered_json RankingJson(const report::Ranking& ranking);

// The ranking as "table", "json" (indented; {"ranking": ...}) or "csv".
std::string RenderRanking(const report::Ranking& ranking, const std::string& format);

// kprof rank FILE...: the measurements of the files (as kprof compare reads them) ranked as one
// set of repeats each, printed in `format`; a noisy one (Measurement::noise) is left out of the
// ranking, naming why, unless `accept_noisy`. INVALID_ARGUMENT for a name in two files, or files
// that hold no measurement.
absl::Status RankFiles(const std::vector<std::string>& paths, const report::RankOptions& options,
                       const std::string& format, bool accept_noisy);

}  // namespace kprof::client
