#include "client/cli/race.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/cli/gbench_format.h"
#include "client/cli/rank_command.h"
#include "client/interleave.h"
#include "report/statistics.h"

namespace kprof::client {
namespace {

// Repeats per job of a race's round: the candidates' jobs go out in turns of this many repeats
// each, so that whatever drifts on the host while a round runs falls on all of them alike.
constexpr size_t kRaceTurn = 5;

// The race's ranking as `format` asks: a table or CSV, Google Benchmark's JSON of the measured
// candidates' merged repeats, or a line per candidate (a batch's line for those measured) and
// the ranking's.
void PrintRace(const report::Ranking& ranking, const std::string& format,
               const std::vector<kprof::v1::BatchJob>& jobs, const std::vector<std::string>& names,
               const std::vector<kprof::v1::TimeEvaluateResponse>& merged,
               const std::vector<bool>& measured, CallsById& calls) {
  if (format == "table" || format == "csv") {
    Print(RenderRanking(ranking, format));
  } else if (format == "gbench") {
    Json runs = Json::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!measured[i]) continue;
      for (auto& run :
           GbenchRuns(GbenchName(jobs[i].id(), jobs[i].time_evaluate().call()), merged[i])) {
        runs.push_back(std::move(run));
      }
    }
    const size_t first =
        static_cast<size_t>(std::find(measured.begin(), measured.end(), true) - measured.begin());
    Print(GbenchDocument(first < jobs.size() ? &merged[first].environment() : nullptr,
                         std::move(runs))
              .dump(2) +
          "\n");
  } else {
    for (const report::RankedCandidate& c : ranking.candidates) {
      const size_t i =
          static_cast<size_t>(std::find(names.begin(), names.end(), c.name) - names.begin());
      Json line = {{"id", c.name}};
      absl::StatusOr<Json> result = i < jobs.size() && c.state != report::RankState::kFailed
                                        ? TimeJson(merged[i])
                                        : absl::StatusOr<Json>(Json());
      if (c.state == report::RankState::kFailed || !result.ok()) {
        const std::string error = result.ok() ? c.error : std::string(result.status().message());
        const size_t colon = error.find(": ");
        line["status"] = colon == std::string::npos ? "UNKNOWN" : error.substr(0, colon);
        line["error"] = colon == std::string::npos ? error : error.substr(colon + 2);
      } else {
        line["status"] = "OK";
        line.update(calls[c.name]);
        line.update(*result);
      }
      Print(line.dump() + "\n");
    }
    Print(Json({{"ranking", RankingJson(ranking)}}).dump() + "\n");
  }
}

}  // namespace

absl::Status RaceBatch(Farm& farm, const report::RankOptions& options, double budget_seconds,
                       const std::string& format, const std::vector<kprof::v1::BatchJob>& jobs,
                       CallsById& calls,
                       const std::vector<std::pair<std::string, std::string>>& refused,
                       int* exit_code) {
  std::vector<std::string> names;
  for (const kprof::v1::BatchJob& job : jobs) names.push_back(job.id());
  for (const auto& [name, error] : refused) names.push_back(name);
  report::Race race(names, options);
  for (size_t i = jobs.size(); i < names.size(); ++i) race.Fail(i, refused[i - jobs.size()].second);
  std::vector<kprof::v1::TimeEvaluateResponse> merged(jobs.size());
  std::vector<bool> measured(jobs.size(), false);
  // Each candidate's repeats sent so far: with randomize_layout, its next job goes on through
  // the candidate's layouts instead of drawing the first ones again.
  std::vector<int64_t> sent(jobs.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  absl::Status stream = absl::OkStatus();  // of the last round's batch
  double seconds_per_repeat = 0;           // of the rounds so far, for the budget
  size_t repeats_so_far = 0;
  for (;;) {
    const std::vector<std::pair<size_t, size_t>> round = race.NextRound();
    if (round.empty()) break;
    size_t planned = 0, turns = 0;
    for (const auto& [i, add] : round) {
      planned += add;
      turns = std::max(turns, (add + kRaceTurn - 1) / kRaceTurn);
    }
    if (budget_seconds > 0 && race.round() > 1 &&
        elapsed() + seconds_per_repeat * static_cast<double>(planned) > budget_seconds) {
      race.Withdraw();
      break;
    }
    std::vector<kprof::v1::BatchJob> batch;
    std::map<std::string, size_t> candidate_of;
    for (size_t turn = 0; turn < turns; ++turn) {
      for (const auto& [i, add] : round) {
        if (turn * kRaceTurn >= add) continue;
        kprof::v1::BatchJob job = jobs[i];
        job.set_id(absl::StrCat(race.round(), ".", turn, ".", i));
        const auto repeat = static_cast<int64_t>(std::min(kRaceTurn, add - turn * kRaceTurn));
        job.mutable_time_evaluate()->set_repeat(repeat);
        if (job.time_evaluate().randomize_layout()) {
          job.mutable_time_evaluate()->set_first_layout_repeat(
              jobs[i].time_evaluate().first_layout_repeat() + sent[i]);
        }
        sent[i] += repeat;
        candidate_of[job.id()] = i;
        batch.push_back(std::move(job));
      }
    }
    std::set<size_t> failed_now;
    stream = farm.MeasureBatch(batch, [&](const kprof::v1::BatchUpdate& update) {
      const auto found = candidate_of.find(update.id());
      if (found == candidate_of.end()) return;
      const size_t i = found->second;
      if (update.state() == kprof::v1::BatchUpdate::DONE) {
        const auto& r = update.time_evaluate();
        race.Add(i, std::vector<double>(r.seconds_per_call().begin(), r.seconds_per_call().end()));
        MergeRepeats(&merged[i], r, !measured[i]);
        measured[i] = true;
      } else if (update.state() == kprof::v1::BatchUpdate::FAILED && failed_now.insert(i).second) {
        const absl::Status failed = client::StatusOf(update);
        race.Fail(i, absl::StrCat(absl::StatusCodeToString(failed.code()), ": ", failed.message()));
      }
    });
    if (!stream.ok()) break;  // the ranking of the rounds so far still comes out
    repeats_so_far += planned;
    seconds_per_repeat = elapsed() / static_cast<double>(std::max<size_t>(1, repeats_so_far));
  }
  report::Ranking ranking = race.Current();
  ranking.seconds = elapsed();
  size_t failures = 0;
  for (const report::RankedCandidate& c : ranking.candidates) {
    failures += c.state == report::RankState::kFailed ? 1 : 0;
  }
  PrintRace(ranking, format, jobs, names, merged, measured, calls);
  std::fflush(stdout);
  if (!stream.ok()) {
    return absl::Status(
        stream.code(), absl::StrCat("the race broke off in round ", race.round(),
                                    " (the ranking is of the repeats so far): ", stream.message()));
  }
  if (failures > 0) {
    *exit_code = 3;
    return absl::AbortedError(
        absl::StrCat(failures, " of ", names.size(), " candidates failed (see the ranking)"));
  }
  return absl::OkStatus();
}

}  // namespace kprof::client
