// kprof profile MODULE FUNCTION: one function's calls under metric collectors, as a report; and
// kprof profile --sequence FILE.json: a sequence of calls (a model, layer by layer) profiled
// together.
#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "client/cli/call_spec.h"
#include "client/cli/check_options.h"
#include "client/cli/command.h"
#include "client/cli/json_input.h"
#include "client/cli/output.h"
#include "client/cli/profile_table.h"
#include "client/cli/wait_notice.h"
#include "proto/wire.h"

namespace kprof::client {
namespace {

// A sequence file: {"calls": [{"module": M, "function": F, "args": [SPEC...], "launch": {...}}
// ...], "repeat": N, "warmup": N}; M as on the command line. A call may carry a check of its
// own: kCheckKeys, as a batch line's.
absl::Status ReadSequence(const std::string& path, const ModuleResolver& resolve,
                          kprof::v1::ProfileRequest* request) {
  KPROF_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path, "sequence file"));
  bool too_deep = false;
  const Json json = ParseInput(text, &too_deep);
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (too_deep) return bad(absl::StrCat("nests deeper than ", kMaxInputDepth, " levels"));
  if (!json.is_object() || !json.contains("calls") || !json["calls"].is_array()) {
    return bad("expected {\"calls\": [{\"module\": ..., \"function\": ..., \"args\": [...]}]}");
  }
  // A key it does not know is refused, as a batch line's is: a misspelt "repeats" would
  // otherwise profile once, silently.
  for (const auto& [key, value] : json.items()) {
    if (key != "calls" && key != "repeat" && key != "warmup") {
      return bad(absl::StrCat("unknown key \"", key,
                              "\" (a sequence file has \"calls\", \"repeat\" and \"warmup\")"));
    }
  }
  for (const char* count : {"repeat", "warmup"}) {
    if (json.contains(count) && !json[count].is_number_integer()) {
      return bad(absl::StrCat("\"", count, "\" wants a whole number, got ", Echo(json[count])));
    }
  }
  for (size_t i = 0; i < json["calls"].size(); ++i) {
    Json call = json["calls"][i];
    if (!call.is_object()) return bad(absl::StrCat("calls[", i, "] is not an object"));
    absl::StatusOr<std::optional<kprof::v1::AnswerCheck>> check = CheckFromJson(call, resolve);
    if (!check.ok()) return bad(absl::StrCat("calls[", i, "] ", check.status().message()));
    for (const char* key : kCheckKeys) call.erase(key);
    // checks[i] checks calls[i]: an empty one leaves its call unchecked.
    if (check->has_value()) {
      while (request->checks_size() < static_cast<int>(i)) request->add_checks();
      *request->add_checks() = **check;
    }
    std::string module;
    absl::StatusOr<kprof::v1::FunctionCall> parsed = CallFromJson(call, &module);
    if (!parsed.ok()) return bad(absl::StrCat("calls[", i, "] ", parsed.status().message()));
    if (!call.empty()) {
      return bad(absl::StrCat("calls[", i, "] has an unknown key \"", call.begin().key(),
                              "\" (a call has \"module\", \"function\", \"args\", "
                              "\"launch\" and a check's \"reference\", \"expect\", \"rtol\", "
                              "\"atol\", \"outputs\")"));
    }
    KPROF_ASSIGN_OR_RETURN(std::string id, resolve(module));
    parsed->set_module_id(id);
    *request->add_calls() = *std::move(parsed);
  }
  if (json.value("repeat", Json()).is_number_integer()) request->set_repeat(json["repeat"]);
  if (json.value("warmup", Json()).is_number_integer()) request->set_warmup(json["warmup"]);
  return absl::OkStatus();
}

class ProfileCommand final : public Command {
 public:
  explicit ProfileCommand(CLI::App& app)
      : Command(app, "profile", "profile calls under metric collectors; prints a report",
                {"table", "json", "csv", "trace", "html"}) {
    CLI::App& c = *subcommand();
    c.add_option("MODULE", module_, "a module file, a module id, or builtin");
    c.add_option("FUNCTION", function_, "the function to profile");
    AddCallOptions(c, call_);
    c.add_option("--sequence", sequence_, "profile the sequence of calls in FILE.json instead");
    c.add_option("--seed", seed_, "seed of random argument data (default 0)");
    c.add_option("--device", device_, "cpu:0 (default) or cuda:N");
    warmup_option_ = c.add_option("--warmup", warmup_, "untimed calls first (default 0)");
    c.add_option("--number", number_, "calls measured together (default 1)");
    repeat_option_ = c.add_option("--repeat", repeat_, "--sequence: profiled runs (default 1)");
    c.add_option("--collector", collectors_, "a metric collector: NAME[:EVENT,EVENT...]")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    AddPlacementOptions(c, placement_);
    AddPriorityOption(c, priority_);
    AddCheckOptions(c, check_);
    AddTableFlags(c, table_);
    c.add_flag("--wide", wide_, "every column, and the configuration, as TVM's table has them");
    c.add_flag("--environment", environment_, "the whole configuration beneath the table");
  }

  absl::Status Run(const Globals& globals, const std::string& format, int*) override {
    if (sequence_.empty() && function_.empty()) {
      return UsageError(
          "usage: kprof profile MODULE FUNCTION ... or kprof profile --sequence FILE.json");
    }
    if (!sequence_.empty() && !module_.empty()) {
      return UsageError("kprof profile --sequence FILE takes no MODULE FUNCTION");
    }
    if (sequence_.empty() && repeat_option_->count() > 0) {
      return UsageError("--repeat is for --sequence: a single function's calls are --number");
    }
    if (!sequence_.empty() &&
        (!check_.reference.empty() || !check_.expect.empty() || !check_.outputs.empty() ||
         check_.rtol_option->count() > 0 || check_.atol_option->count() > 0)) {
      return UsageError(
          "--reference, --expect, --rtol, --atol and --outputs check one function; a "
          "sequence's calls name their checks in FILE.json (\"reference\", \"expect\", "
          "\"rtol\", ... in a call)");
    }
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.ConnectFor(device_));
    const ModuleResolver resolve = UploadingTo(*client, call_.module_format);
    const absl::Duration timeout = globals.TimeoutOr(absl::Seconds(120));
    kprof::v1::Report report;
    std::vector<kprof::v1::CheckVerdict> verdicts;
    kprof::v1::JobOutput output;
    if (!sequence_.empty()) {
      kprof::v1::ProfileRequest request;
      KPROF_RETURN_IF_ERROR(ReadSequence(sequence_, resolve, &request));
      request.set_device(device_);
      request.set_seed(seed_);
      if (repeat_option_->count() > 0) request.set_repeat(repeat_);
      if (warmup_option_->count() > 0) request.set_warmup(warmup_);
      for (const std::string& c : collectors_) *request.add_collectors() = ParseCollector(c);
      placement_.To(request);
      priority_.To(request);
      const WaitNotice notice(*client, device_);
      KPROF_ASSIGN_OR_RETURN(kprof::v1::ProfileResponse r, client->Profile(request, timeout));
      report = r.report();
      verdicts.assign(r.checks().begin(), r.checks().end());
      output = r.output();
    } else {
      kprof::v1::ProfileFunctionRequest request;
      KPROF_ASSIGN_OR_RETURN(*request.mutable_call(),
                             CallFromCommandLine(call_, module_, function_, resolve));
      KPROF_ASSIGN_OR_RETURN(const std::optional<kprof::v1::AnswerCheck> check,
                             check_.ToCheck(resolve));
      if (check.has_value()) *request.mutable_check() = *check;
      request.set_device(device_);
      request.set_seed(seed_);
      request.set_warmup(warmup_);
      request.set_number(number_);
      for (const std::string& c : collectors_) *request.add_collectors() = ParseCollector(c);
      placement_.To(request);
      priority_.To(request);
      const WaitNotice notice(*client, device_);
      KPROF_ASSIGN_OR_RETURN(kprof::v1::ProfileFunctionResponse r,
                             client->ProfileFunction(request, timeout));
      report = r.report();
      if (r.has_check()) verdicts.push_back(r.check());
      output = r.output();
    }
    KPROF_ASSIGN_OR_RETURN(report::Report converted, wire::FromProto(report));
    PrintProfile(converted, verdicts, format);
    if (format == "table") Print(OutputBlock(output));
    return absl::OkStatus();
  }

 private:
  std::string module_, function_, sequence_;
  CallOptions call_;
  PlacementFlags placement_;
  PriorityFlag priority_;
  uint64_t seed_ = 0;
  std::string device_ = "cpu:0";
  int64_t warmup_ = 0, number_ = 1, repeat_ = 1;
  std::vector<std::string> collectors_;
  CheckFlags check_;
  TableFlags table_;
  bool wide_ = false, environment_ = false;

  // The report, and with checks their verdicts: a line each under a table, "checks" in JSON
  // (beside the report's keys, which readers of the report format pass over).
  void PrintProfile(const report::Report& report,
                    const std::vector<kprof::v1::CheckVerdict>& verdicts,
                    const std::string& format) const {
    if (format == "json" && !verdicts.empty()) {
      Json json = Json::parse(report::AsJson(report));
      json["checks"] = Json::array();
      for (const kprof::v1::CheckVerdict& v : verdicts) {
        json["checks"].push_back(VerdictJson(v));
        if (!sequence_.empty()) json["checks"].back()["call"] = v.call();
      }
      Print(json.dump(2) + "\n");
      return;
    }
    if (format == "table" && !wide_) {
      PrintTable(report);
    } else {
      PrintReport(report, format, table_.options());
    }
    if (format != "table") return;
    for (const kprof::v1::CheckVerdict& v : verdicts) {
      Print((sequence_.empty() ? "" : absl::StrCat("call ", v.call(), ": ")) + VerdictLine(v) +
            "\n");
    }
  }
  // The table for a terminal: the call as given, the rows, the run's options on a line, the
  // environment's gist (or all of it).
  void PrintTable(const report::Report& report) const {
    if (sequence_.empty()) {
      Print(absl::StrCat(function_, call_.args.empty() ? "" : " ", absl::StrJoin(call_.args, ", "),
                         " on ", device_, ", ", number_, number_ == 1 ? " call" : " calls",
                         " a measurement\n"));
    }
    ProfileTableOptions options;
    options.sort = !table_.no_sort;
    Print(ProfileTable(report, options));
    report::MetricMap environment;
    std::vector<std::string> run;
    for (const auto& [name, value] : report.configuration) {
      if (name == "Seed" || name == "Warm-up Calls" || name == "Number of threads") {
        run.push_back(absl::StrCat(name, " ", report::FormatForTable(value)));
      } else {
        environment.emplace(name, value);
      }
    }
    if (!run.empty()) Print("  " + absl::StrJoin(run, ", ") + "\n");
    Print(environment_ ? EnvironmentBlock(environment) : EnvironmentLine(environment));
  }
  CLI::Option* warmup_option_ = nullptr;
  CLI::Option* repeat_option_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddProfileCommand(CLI::App& app) {
  return std::make_unique<ProfileCommand>(app);
}

}  // namespace kprof::client
