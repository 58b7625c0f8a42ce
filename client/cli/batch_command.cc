// kprof batch JOBS.jsonl: many TimeEvaluate jobs over every daemon the target names, a result
// line (JSONL) per job as it finishes, progress on a terminal's stderr; with --rank, a race of
// the jobs as candidates (race.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/cli/batch_summary.h"
#include "client/cli/call_spec.h"
#include "client/cli/check_options.h"
#include "client/cli/command.h"
#include "client/cli/gbench_format.h"
#include "client/cli/json_input.h"
#include "client/cli/json_line.h"
#include "client/cli/output.h"
#include "client/cli/race.h"
#include "client/cli/rank_command.h"
#include "client/cli/time_json.h"
#include "client/interleave.h"

namespace kprof::client {
namespace {

struct BatchFlags {
  std::string jobs;  // a file, or - for standard input
  std::string module_format = "auto";
  PriorityFlag priority;  // for the lines that give none
  bool rank = false;
  RankFlags race;
  std::optional<uint64_t> interleave;  // --interleave SEED
  CheckFlags check;                    // for the lines that give no reference of their own
};

// MODULE of a line as a module id: a file is registered with the farm once per path (it goes
// to each daemon with the first job there that needs it).
ModuleResolver FarmResolver(Farm& farm, const std::string& module_format,
                            std::map<std::string, absl::StatusOr<std::string>>& uploaded) {
  return [&farm, module_format, &uploaded](const std::string& name) -> absl::StatusOr<std::string> {
    auto found = uploaded.find(name);
    if (found == uploaded.end()) {
      absl::StatusOr<std::string> id = name;
      if (name != "builtin" && !IsModuleId(name)) id = farm.AddModuleFile(name, module_format);
      found = uploaded.emplace(name, std::move(id)).first;
    }
    return found->second;
  };
}

// One job line of `kprof batch` as a BatchJob: "id", "module" (builtin, an id, or a file,
// uploaded once per path), "function", "args", "launch", and any TimeEvaluateRequest field by
// its proto name ("device", "number", "repeat", "min_repeat_ms", ...).
absl::StatusOr<kprof::v1::BatchJob> BatchJobFromLine(
    const std::string& line, const ModuleResolver& resolve,
    const std::optional<kprof::v1::AnswerCheck>& default_check, std::string* module) {
  bool too_deep = false;
  Json json = ParseInput(line, &too_deep);
  if (too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat("nests deeper than ", kMaxInputDepth, " levels"));
  }
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  kprof::v1::BatchJob job;
  if (!json.value("id", Json()).is_string() || json["id"].get<std::string>().empty()) {
    return absl::InvalidArgumentError("needs an \"id\" string");
  }
  job.set_id(json["id"].get<std::string>());
  json.erase("id");
  kprof::v1::TimeEvaluateRequest* request = job.mutable_time_evaluate();
  KPROF_ASSIGN_OR_RETURN(*request->mutable_call(), CallFromJson(json, module));
  KPROF_ASSIGN_OR_RETURN(std::optional<kprof::v1::AnswerCheck> check,
                         CheckFromJson(json, resolve, default_check));
  for (const char* key : kCheckKeys) json.erase(key);
  // The rest are TimeEvaluateRequest's own fields, read as protobuf reads JSON.
  kprof::v1::FunctionCall call = std::move(*request->mutable_call());
  // "priority" as on the command line ("batch", "interactive") or by its enum name.
  if (const auto p = json.find("priority"); p != json.end() && p->is_string()) {
    const std::string given = p->get<std::string>();
    if (given == "batch" || given == "interactive") *p = "PRIORITY_" + absl::AsciiStrToUpper(given);
  }
  if (const absl::Status s = JsonToMessage(json, request); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("options: ", s.message()));
  }
  // After the parse, which clears the message.
  *request->mutable_call() = std::move(call);
  if (check.has_value()) *request->mutable_check() = *check;
  KPROF_ASSIGN_OR_RETURN(*request->mutable_call()->mutable_module_id(), resolve(*module));
  return job;
}

// One `kprof batch` run: the jobs its lines give, and each job's result line as it comes.
class BatchRun {
 public:
  BatchRun(const BatchFlags& o, const std::string& format)
      : o_(o), gbench_(format == "gbench"), format_(format) {
    if (!o.rank && (format == "table" || format == "csv")) summary_.emplace();
  }

  // Reads the job lines; a line that is no job gets its failed result at once, naming it.
  void ReadJobs(std::istream& in, const ModuleResolver& resolve,
                const std::optional<kprof::v1::AnswerCheck>& check);
  // Measures the jobs read, writing each result as it comes (progress on a terminal), then
  // the lines of jobs left unanswered; exit code 3 when some failed.
  absl::Status Measure(Farm& farm, int* exit_code);

  std::vector<kprof::v1::BatchJob>& jobs() { return jobs_; }
  CallsById& calls() { return calls_; }
  std::vector<std::pair<std::string, std::string>>& refused() { return refused_; }

 private:
  // The job of a line, the batch's priority given, refused when its id is another line's or
  // when it sets repeats a race sets.
  absl::StatusOr<kprof::v1::BatchJob> JobOfLine(const std::string& line,
                                                const ModuleResolver& resolve,
                                                const std::optional<kprof::v1::AnswerCheck>& check,
                                                std::string* module);
  void Failure(Json id, int64_t line, const absl::Status& status);
  void OnUpdate(const kprof::v1::BatchUpdate& update);
  void Progress() const;
  // "spin_us float64:100": the function and arguments of the job `id`'s line; "" for none.
  std::string CallText(const std::string& id) const;

  const BatchFlags& o_;
  const bool gbench_;  // --format gbench: one document at the end, its runs gathered here
  const std::string format_;
  std::optional<BatchSummary> summary_;  // --format table or csv: printed at the end
  Json gbench_runs_ = Json::array();
  std::optional<kprof::v1::MetricMap> gbench_environment_;  // of the first result
  int64_t failed_ = 0, done_ = 0, total_ = 0;
  // --rank: the lines that are no candidates, named in the ranking as failed.
  std::vector<std::pair<std::string, std::string>> refused_;
  std::vector<kprof::v1::BatchJob> jobs_;
  std::unordered_map<std::string, int64_t> lines_;    // job id -> its line
  std::unordered_map<std::string, size_t> index_of_;  // job id -> its place in `jobs_`
  // job id -> its "module" (as the line gives it), "function" and "args", for its result line
  CallsById calls_;
  std::unordered_set<std::string> running_;  // over every daemon of the farm
  std::unordered_set<std::string> answered_;
  bool bar_ = false;  // progress on stderr
};

std::string BatchRun::CallText(const std::string& id) const {
  const auto call = calls_.find(id);
  if (call == calls_.end()) return "";
  std::string text = call->second.value("function", "");
  for (const Json& arg : call->second.value("args", Json::array())) {
    absl::StrAppend(&text, " ", arg.get<std::string>());
  }
  return text;
}

void BatchRun::Failure(Json id, int64_t line, const absl::Status& status) {
  ++failed_;
  if (o_.rank) {
    // Named by its line too: its id may be another line's (a duplicate), and names are unique.
    refused_.emplace_back(
        id.is_string() ? absl::StrCat(id.get<std::string>(), " (line ", line, ")")
                       : absl::StrCat("line ", line),
        absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
    return;
  }
  if (summary_) {
    const std::string name = id.is_string() ? id.get<std::string>() : "";
    summary_->Failed(line, name, CallText(name), status);
    return;
  }
  if (gbench_) {
    const std::string name = id.is_string() ? id.get<std::string>() : absl::StrCat("line ", line);
    gbench_runs_.push_back(GbenchError(
        name, absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message())));
    return;
  }
  Json result = {{"id", std::move(id)},
                 {"status", absl::StatusCodeToString(status.code())},
                 {"error", std::string(status.message())}};
  if (const auto verdict = VerdictOf(status)) result["check"] = VerdictJson(*verdict);
  if (line > 0) result["line"] = line;
  Print(result.dump() + "\n");
}

absl::StatusOr<kprof::v1::BatchJob> BatchRun::JobOfLine(
    const std::string& line, const ModuleResolver& resolve,
    const std::optional<kprof::v1::AnswerCheck>& check, std::string* module) {
  absl::StatusOr<kprof::v1::BatchJob> job = BatchJobFromLine(line, resolve, check, module);
  if (!job.ok()) return job;
  if (job->time_evaluate().priority() == kprof::v1::PRIORITY_DEFAULT) {
    o_.priority.To(*job->mutable_time_evaluate());
  }
  if (lines_.count(job->id()) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("id '", job->id(), "' is also on line ", lines_[job->id()]));
  }
  if (o_.rank &&
      (job->time_evaluate().has_repeat() || job->time_evaluate().max_relative_stddev() != 0)) {
    return absl::InvalidArgumentError(
        "with --rank the race sets each candidate's repeats: leave out \"repeat\" and "
        "\"max_relative_stddev\"");
  }
  // A line that gives neither number nor repeat is timed until its repeats agree, as `kprof
  // time` is; a race and an interleaved batch set the repeats themselves.
  kprof::v1::TimeEvaluateRequest& request = *job->mutable_time_evaluate();
  if (!o_.rank && !o_.interleave.has_value() && !request.has_number() && !request.has_repeat()) {
    request.set_until_stable(true);
  }
  return job;
}

void BatchRun::ReadJobs(std::istream& in, const ModuleResolver& resolve,
                        const std::optional<kprof::v1::AnswerCheck>& check) {
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++total_;
    std::string module;
    absl::StatusOr<kprof::v1::BatchJob> job = JobOfLine(line, resolve, check, &module);
    if (!job.ok()) {
      bool too_deep = false;
      const Json parsed = ParseInput(line, &too_deep);
      Json id =
          parsed.is_object() && parsed.value("id", Json()).is_string() ? parsed["id"] : Json();
      Failure(std::move(id), number,
              absl::Status(job.status().code(),
                           absl::StrCat("line ", number, ": ", job.status().message())));
      continue;
    }
    lines_[job->id()] = number;
    index_of_[job->id()] = jobs_.size();
    const kprof::v1::FunctionCall& call = job->time_evaluate().call();
    calls_[job->id()] = {
        {"module", module},
        {"function", call.function()},
        {"args", std::vector<std::string>(call.args().begin(), call.args().end())}};
    jobs_.push_back(*std::move(job));
  }
}

void BatchRun::Progress() const {
  if (!bar_) return;
  const int64_t finished = done_ + failed_;
  const int width = 30;
  const int filled =
      total_ > 0 ? static_cast<int>(width * std::min(finished, total_) / total_) : width;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld  running %lld  failed %lld ",
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(),
               static_cast<long long>(finished), static_cast<long long>(total_),
               static_cast<long long>(running_.size()), static_cast<long long>(failed_));
}

void BatchRun::OnUpdate(const kprof::v1::BatchUpdate& update) {
  if (update.state() == kprof::v1::BatchUpdate::DONE ||
      update.state() == kprof::v1::BatchUpdate::FAILED) {
    if (!answered_.insert(update.id()).second) return;
  }
  if (update.state() == kprof::v1::BatchUpdate::DONE && gbench_) {
    if (!gbench_environment_) gbench_environment_ = update.time_evaluate().environment();
    const kprof::v1::BatchJob& job = jobs_[index_of_[update.id()]];
    for (auto& run :
         GbenchRuns(GbenchName(update.id(), job.time_evaluate().call()), update.time_evaluate())) {
      gbench_runs_.push_back(std::move(run));
    }
    ++done_;
  } else if (update.state() == kprof::v1::BatchUpdate::DONE && summary_) {
    summary_->Done(lines_[update.id()], update.id(), CallText(update.id()), update.time_evaluate(),
                   update.daemon());
    ++done_;
  } else if (update.state() == kprof::v1::BatchUpdate::DONE) {
    // Written straight, not as a document: a batch writes thousands of these.
    JsonLine line;
    line.Open().Key("id").String(update.id()).Key("status").String("OK");
    if (!update.daemon().empty()) line.Key("daemon").String(update.daemon());
    const Json& call = calls_[update.id()];
    line.Key("module").String(call.value("module", "")).Key("function");
    line.String(call.value("function", "")).Key("args").OpenArray();
    if (const auto args = call.find("args"); args != call.end()) {
      for (const Json& arg : *args) line.String(arg.get_ref<const std::string&>());
    }
    line.CloseArray();
    if (const absl::Status written = WriteTimeMembers(update.time_evaluate(), line);
        !written.ok()) {
      Failure(update.id(), lines_[update.id()], written);
    } else {
      line.Close().text().push_back('\n');
      Print(line.text());
      ++done_;
    }
  } else if (update.state() == kprof::v1::BatchUpdate::FAILED) {
    Failure(update.id(), lines_[update.id()], client::StatusOf(update));
  }
  if (update.state() == kprof::v1::BatchUpdate::RUNNING) {
    running_.insert(update.id());
  } else {
    running_.erase(update.id());
  }
}

absl::Status BatchRun::Measure(Farm& farm, int* exit_code) {
  bar_ = isatty(STDERR_FILENO) != 0;
  absl::Status stream = absl::OkStatus();
  if (!jobs_.empty()) {
    const auto on_update = [this](const kprof::v1::BatchUpdate& update) { OnUpdate(update); };
    const auto on_pause = [this] {
      // The lines of the updates that came together go out together, before the farm waits.
      std::fflush(stdout);
      Progress();
    };
    stream = o_.interleave.has_value()
                 ? MeasureInterleaved(farm, jobs_, *o_.interleave, on_update, on_pause)
                 : farm.MeasureBatch(jobs_, on_update, /*window=*/32, on_pause);
  }
  if (bar_) std::fprintf(stderr, "\n");
  // Every job line gets its result line, even when the batch itself broke off.
  for (const kprof::v1::BatchJob& job : jobs_) {
    if (answered_.count(job.id()) > 0) continue;
    Failure(job.id(), lines_[job.id()],
            stream.ok() ? absl::UnknownError("the daemons gave no answer for this job") : stream);
  }
  if (gbench_) {
    Print(GbenchDocument(gbench_environment_ ? &*gbench_environment_ : nullptr,
                         std::move(gbench_runs_))
              .dump(2) +
          "\n");
    std::fflush(stdout);
  }
  if (summary_) {
    Print(format_ == "csv" ? summary_->Csv() : summary_->Table());
    std::fflush(stdout);
  }
  KPROF_RETURN_IF_ERROR(stream);
  if (failed_ > 0) {
    *exit_code = 3;  // the batch ran; some of its jobs failed
    return absl::AbortedError(absl::StrCat(failed_, " of ", total_, " jobs failed (see their ",
                                           summary_ ? "rows" : "lines", ")"));
  }
  return absl::OkStatus();
}

// kprof batch JOBS.jsonl: every line's result as a line of JSONL on stdout, as it finishes;
// progress on stderr when it is a terminal. Lines that are not jobs are failed results naming
// the line.
absl::Status Batch(Farm& farm, const BatchFlags& o, const std::string& format, int* exit_code) {
  std::map<std::string, absl::StatusOr<std::string>> uploaded;
  const ModuleResolver resolve = FarmResolver(farm, o.module_format, uploaded);
  KPROF_ASSIGN_OR_RETURN(const std::optional<kprof::v1::AnswerCheck> default_check,
                         o.check.ToCheck(resolve, /*level_alone=*/true));
  std::ifstream file;
  if (o.jobs != "-") {
    file.open(o.jobs);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot read '", o.jobs, "'"));
  }
  BatchRun run(o, format);
  run.ReadJobs(o.jobs == "-" ? std::cin : file, resolve, default_check);
  if (o.rank) {
    KPROF_ASSIGN_OR_RETURN(const report::RankOptions options, RankOptionsFrom(o.race));
    return RaceBatch(farm, options, o.race.budget, format, run.jobs(), run.calls(), run.refused(),
                     exit_code);
  }
  return run.Measure(farm, exit_code);
}

class BatchCommand final : public Command {
 public:
  explicit BatchCommand(CLI::App& app)
      : Command(app, "batch",
                "many TimeEvaluate jobs over every daemon the target names: a result line per "
                "job (JSONL); exit 3 when some jobs failed",
                {"jsonl", "json", "gbench", "table", "csv"}) {
    CLI::App& c = *subcommand();
    c.add_option("JOBS", flags_.jobs, "a JSONL file of jobs, - for standard input")->required();
    AddPriorityOption(c, flags_.priority, /*batch=*/true);
    c.add_option("--module-format", flags_.module_format,
                 "of the module files: auto (default), shared-library, cubin, fatbin or ptx");
    CLI::Option* rank = c.add_flag(
        "--rank", flags_.rank, "race the jobs (candidates) for the fastest and those tied with it");
    AddRankFlags(c, flags_.race, /*race=*/true);
    for (const char* name :
         {"--confidence", "--threshold", "--rank-initial", "--rank-max-repeats", "--rank-budget"}) {
      c.get_option(name)->needs(rank);
    }
    interleave_ = c.add_option("--interleave", interleave_seed_,
                               "run every job's repeats as jobs of one repeat, in a random order "
                               "across jobs drawn from SEED (one daemon)");
    interleave_->excludes(rank);
    AddCheckOptions(c, flags_.check);
  }

  absl::Status Run(const Globals& globals, const std::string& format, int* exit_code) override {
    if (interleave_->count() > 0) flags_.interleave = interleave_seed_;
    // A batch spreads over every daemon the target names.
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Farm> farm, globals.ConnectFarm());
    return Batch(*farm, flags_, format == "json" ? "jsonl" : format, exit_code);
  }

 private:
  BatchFlags flags_;
  uint64_t interleave_seed_ = 0;
  CLI::Option* interleave_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddBatchCommand(CLI::App& app) {
  return std::make_unique<BatchCommand>(app);
}

}  // namespace kprof::client
