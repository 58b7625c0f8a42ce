// kprof batch --rank: the batch's jobs are candidates in a race (report/ranking.h), measured
// round by round over the farm, more repeats only of the candidates still in doubt.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/cli/output.h"
#include "client/farm.h"
#include "report/ranking.h"

namespace kprof::client {

// Each job's "module" (as its line gives it), "function" and "args", by job id.
using CallsById = std::unordered_map<std::string, Json>;

// Runs the race. In JSONL (`format` "jsonl", a batch's default) each candidate's line carries
// every repeat it got, and a last line {"ranking": ...} the verdicts; "table" and "csv" print
// the ranking alone, "gbench" Google Benchmark's document. `calls` holds each job's module,
// function and args for its line; `refused` the lines that are no candidates (named, with
// why), ranked as failed. Some candidates failed: ABORTED and *exit_code 3.
absl::Status RaceBatch(Farm& farm, const report::RankOptions& options, double budget_seconds,
                       const std::string& format, const std::vector<kprof::v1::BatchJob>& jobs,
                       CallsById& calls,
                       const std::vector<std::pair<std::string, std::string>>& refused,
                       int* exit_code);

}  // namespace kprof::client
