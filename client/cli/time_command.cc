// kprof time MODULE FUNCTION: times a function the way a benchmark harness does (TimeEvaluate),
// and prints each repeat, the statistics, the environment and the repeats' histogram.
#include <algorithm>
#include <cstdio>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/cli/call_spec.h"
#include "client/cli/check_options.h"
#include "client/cli/command.h"
#include "client/cli/compare_command.h"
#include "client/cli/gbench_format.h"
#include "client/cli/output.h"
#include "client/cli/plot_svg.h"
#include "client/cli/wait_notice.h"
#include "proto/wire.h"

namespace kprof::client {
namespace {

// Repeats listed one a line up to this many; past it the JSON has each, the histogram the shape.
constexpr int kListedRepeats = 20;

// The calls per repeat: one count, or the range they grew through.
std::string CallsPerRepeat(const kprof::v1::TimeEvaluateResponse& r) {
  if (r.numbers_size() == 0) return "0";
  const auto [low, high] = std::minmax_element(r.numbers().begin(), r.numbers().end());
  return *low == *high ? absl::StrCat(*low) : absl::StrCat(*low, "-", *high);
}

// `call`: the function and its arguments as given (scalars' values too).
void PrintTable(const std::string& call, const kprof::v1::TimeEvaluateResponse& r,
                const report::MetricMap& manifest, bool outliers, bool environment) {
  const auto& s = r.statistics();
  Print(absl::StrCat(call, " on ", r.device(), "\n"));
  const int repeats = r.seconds_per_call_size();
  for (int i = 0; i < repeats && repeats <= kListedRepeats; ++i) {
    PrintF("  repeat %d: %s per call (%lld calls)\n", i + 1, Seconds(r.seconds_per_call(i)).c_str(),
           static_cast<long long>(r.numbers(i)));
  }
  // One spread: the sample relative standard deviation the convergence test reads.
  PrintF("  median %s  mean %s  min %s  max %s  relative std %s\n", Seconds(s.median()).c_str(),
         Seconds(s.mean()).c_str(), Seconds(s.min()).c_str(), Seconds(s.max()).c_str(),
         repeats > 1 ? absl::StrFormat("%.2f%%", r.rel_stddev() * 100).c_str() : "- (one repeat)");
  PrintF("  %d repeat(s) of %s call(s); queue wait %s, execution %s\n", repeats,
         CallsPerRepeat(r).c_str(), Seconds(r.timing().queue_wait_seconds()).c_str(),
         Seconds(r.timing().execution_seconds()).c_str());
  if (r.has_converged()) {
    PrintF("  %s: relative std %.2f%% after %d repeats (%s)\n",
           r.converged() ? "converged" : "NOT converged", r.rel_stddev() * 100, repeats,
           r.stop_reason().c_str());
  }
  if (outliers) {
    const auto& f = r.filtered_statistics();
    PrintF("  without %d outlier(s): median %s  mean %s  min %s  max %s\n", r.outliers_size(),
           Seconds(f.median()).c_str(), Seconds(f.mean()).c_str(), Seconds(f.min()).c_str(),
           Seconds(f.max()).c_str());
  }
  Print("  " + PlacementLine(r) + "\n");
  Print("  " + ClockLine(r) + "\n");
  // A function of no tensors moves no bytes worth a line.
  if (r.has_throughput() &&
      (r.throughput().bytes_per_call() > 0 || r.throughput().items_per_second() > 0 ||
       r.throughput().flop_per_second() > 0)) {
    Print("  " + ThroughputLine(r.throughput()) + "\n");
  }
  if (r.has_check()) Print("  " + VerdictLine(r.check()) + "\n");
  for (int i = 0; i < r.checksums_size(); ++i) {
    PrintF("  sha256 of argument %d: %s\n", i, r.checksums(i).c_str());
  }
  for (const std::string& warning : r.warnings()) Print(Wrapped(warning, "  warning: "));
  Print(OutputBlock(r.output()));
  if (environment) {
    Print(EnvironmentBlock(manifest));
  } else if (!manifest.empty()) {
    Print(EnvironmentLine(manifest));
  }
  Print("\n" +
        RepeatsHistogram(
            std::vector<double>(r.seconds_per_call().begin(), r.seconds_per_call().end())) +
        "\n");
}

class TimeCommand final : public Command {
 public:
  explicit TimeCommand(CLI::App& app)
      : Command(app, "time", "time a function: repeats of calls, their statistics",
                {"table", "json", "csv", "gbench"}) {
    CLI::App& c = *subcommand();
    c.add_option("MODULE", module_, "a module file, a module id, or builtin")->required();
    c.add_option("FUNCTION", function_, "the function to time")->required();
    AddCallOptions(c, call_);
    AddCheckOptions(c, check_);
    c.add_option("--seed", request_seed_, "seed of random argument data (default 0)");
    c.add_option("--device", device_, "cpu:0 (default) or cuda:N");
    number_option_ = c.add_option("--number", number_,
                                  "calls per repeat (default: grown until a repeat lasts 1 ms)");
    repeat_option_ =
        c.add_option("--repeat", repeat_,
                     "repeats (default: until they agree within 1%, at least 10, for 1 s at most)");
    c.add_option("--min-repeat-ms", min_repeat_ms_, "grow number until a repeat lasts this");
    c.add_option("--warmup-ms", warmup_ms_, "untimed calls for this long before the repeats");
    c.add_option("--limit-zero-time-iterations", limit_zero_time_iterations_,
                 "zero readings allowed per repeat (default 100)");
    c.add_option("--cooldown-ms", cooldown_ms_, "sleep between groups of repeats");
    c.add_option("--repeats-to-cooldown", repeats_to_cooldown_, "repeats per cool-down");
    TakesSize(c.add_option("--cache-flush-bytes", cache_flush_bytes_,
                           "evict caches before each repeat by writing SIZE (32 MiB, 4M)"));
    c.add_option("--preproc", preproc_, "a step before each repeat: cache_flush_cpu_non_first_arg");
    c.add_flag("--flush-l2", flush_l2_, "cuda: write an L2-sized buffer before each repeat");
    c.add_flag("--checksums", checksums_, "SHA-256 of each argument after the run");
    c.add_option("--outliers", outliers_, "none or iqr: set aside repeats beyond 1.5 IQR");
    c.add_option("--max-rel-stddev", max_rel_stddev_,
                 "repeat until the repeats' relative std is at most R (default 0.01)");
    min_repeats_option_ =
        c.add_option("--min-repeats", min_repeats_, "converging: at least N repeats (default 10)");
    c.add_option("--max-time-ms", max_time_ms_, "converging: the time budget (default 1000)");
    c.add_option("--plot", plot_, "also draw the repeats as SVG in FILE");
    c.add_flag("--environment", environment_,
               "table: the whole environment manifest (else one line of it)");
    AddPlacementOptions(c, placement_);
    AddPriorityOption(c, priority_);
    c.add_flag("--randomize-layout", randomize_layout_,
               "move the arguments to random offsets within a page between repeats");
    layout_option_ = c.add_option("--repeats-per-layout", repeats_per_layout_,
                                  "with --randomize-layout: repeats per placement (1)");
    c.add_flag("--cold", cold_, "flush the caches before every call, timed alone (default: hot)");
    throttle_option_ = c.add_option("--throttle-threshold", throttle_threshold_,
                                    "a repeat below this fraction of the nominal clock is "
                                    "throttled (0.75)");
    c.add_flag("--discard-throttled", discard_throttled_, "drop throttled repeats");
    c.add_option("--cuda-graph", cuda_graph_,
                 "cuda kernels: time replays of a graph of N launches, per launch");
  }

  absl::Status Run(const Globals& globals, const std::string& format, int*) override {
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.ConnectFor(device_));
    kprof::v1::TimeEvaluateRequest request;
    const ModuleResolver resolve = UploadingTo(*client, call_.module_format);
    KPROF_ASSIGN_OR_RETURN(*request.mutable_call(),
                           CallFromCommandLine(call_, module_, function_, resolve));
    KPROF_ASSIGN_OR_RETURN(const std::optional<kprof::v1::AnswerCheck> check,
                           check_.ToCheck(resolve));
    if (check.has_value()) *request.mutable_check() = *check;
    SetOptions(request);
    const absl::Duration timeout = globals.TimeoutOr(DefaultTimeout());
    absl::StatusOr<kprof::v1::TimeEvaluateResponse> answer;
    {
      const WaitNotice notice(*client, device_);
      answer = client->TimeEvaluate(request, timeout);
    }
    if (!answer.ok() && format == "gbench" && VerdictOf(answer.status()).has_value()) {
      // A wrong answer is a run in error, as Google Benchmark marks one; the exit says so too.
      Print(GbenchDocument(nullptr, {GbenchError(GbenchName("", request.call()),
                                                 std::string(answer.status().message()))})
                .dump(2) +
            "\n");
    }
    KPROF_ASSIGN_OR_RETURN(kprof::v1::TimeEvaluateResponse r, std::move(answer));
    KPROF_ASSIGN_OR_RETURN(const report::MetricMap manifest,
                           wire::FromProto(r.environment(), "environment"));
    if (format == "gbench") {
      Print(
          GbenchDocument(&r.environment(), GbenchRuns(GbenchName("", request.call()), r)).dump(2) +
          "\n");
    } else if (format == "json") {
      KPROF_ASSIGN_OR_RETURN(const Json json, TimeJson(r));
      // What was called first, so that `kprof compare` can tell measurements apart.
      Json out = {{"module", module_}, {"function", function_}, {"args", call_.args}};
      out.update(json);
      Print(out.dump(2) + "\n");
    } else if (format == "csv") {
      const bool checked = r.has_check();
      Print(checked ? "repeat,seconds_per_call,number,check\n"
                    : "repeat,seconds_per_call,number\n");
      for (int i = 0; i < r.seconds_per_call_size(); ++i) {
        Print(absl::StrCat(i + 1, ",", report::ShortestDecimal(r.seconds_per_call(i)), ",",
                           r.numbers(i), checked ? ",passed" : "", "\n"));
      }
    } else {
      const std::string call =
          absl::StrCat(function_, call_.args.empty() ? "" : " ", absl::StrJoin(call_.args, ", "));
      PrintTable(call, r, manifest, !outliers_.empty() && outliers_ != "none", environment_);
    }
    if (!plot_.empty()) {
      std::vector<std::string> title = {function_};
      title.insert(title.end(), call_.args.begin(), call_.args.end());
      KPROF_RETURN_IF_ERROR(WritePlot(
          plot_,
          RepeatsSvg(absl::StrJoin(title, " "), std::vector<double>(r.seconds_per_call().begin(),
                                                                    r.seconds_per_call().end()))));
    }
    return absl::OkStatus();
  }

 private:
  // Neither --number nor --repeat: until the repeats agree.
  bool Stable() const { return number_option_->count() == 0 && repeat_option_->count() == 0; }

  // The measuring options onto the request.
  void SetOptions(kprof::v1::TimeEvaluateRequest& request) const {
    request.set_flush_l2(flush_l2_);
    request.set_device(device_);
    request.set_seed(request_seed_);
    // Neither given: until the repeats agree, as the daemon's until_stable chooses (the options
    // given beside it keep their values). Either given: exactly that, 1 for the other, as TVM.
    const bool stable = Stable();
    request.set_until_stable(stable);
    if (!stable) {
      request.set_number(number_);
      // Converging, the daemon's default bounds the repeats; otherwise the CLI's default of 1.
      if (max_rel_stddev_ == 0 || repeat_option_->count() > 0) request.set_repeat(repeat_);
    }
    request.set_max_relative_stddev(max_rel_stddev_);
    if (min_repeats_option_->count() > 0) request.set_min_repeats(min_repeats_);
    request.set_max_time_ms(max_time_ms_);
    request.set_outlier_filter(outliers_);
    request.set_min_repeat_ms(min_repeat_ms_);
    request.set_warmup_ms(warmup_ms_);
    request.set_limit_zero_time_iterations(limit_zero_time_iterations_);
    request.set_cooldown_interval_ms(cooldown_ms_);
    request.set_repeats_to_cooldown(repeats_to_cooldown_);
    request.set_cache_flush_bytes(cache_flush_bytes_);
    request.set_preprocess(preproc_);
    request.set_checksums(checksums_);
    placement_.To(request);
    priority_.To(request);
    request.set_randomize_layout(randomize_layout_);
    if (layout_option_->count() > 0) request.set_repeats_per_layout(repeats_per_layout_);
    request.set_cold(cold_);
    if (throttle_option_->count() > 0) request.set_throttle_threshold(throttle_threshold_);
    request.set_discard_throttled(discard_throttled_);
    request.set_cuda_graph(cuda_graph_);
  }

  // Enough for the repeats the options ask for (converging: the budget, the daemon's second by
  // default), twice over, plus ten minutes: the daemon's --job-timeout (60 s unless set) stops a
  // job that runs too long and says so, and a job may wait its turn behind others.
  absl::Duration DefaultTimeout() const {
    const double budget_ms =
        warmup_ms_ + (Stable() || max_rel_stddev_ > 0
                          ? (max_time_ms_ > 0 ? max_time_ms_ : 1000)
                          : static_cast<double>(std::max<int64_t>(repeat_, 1)) *
                                (min_repeat_ms_ + cooldown_ms_));
    return absl::Minutes(10) + absl::Milliseconds(2 * budget_ms);
  }

  std::string module_, function_;
  CallOptions call_;
  CheckFlags check_;
  uint64_t request_seed_ = 0;
  std::string device_ = "cpu:0";
  int64_t number_ = 1, repeat_ = 1, limit_zero_time_iterations_ = 100, repeats_to_cooldown_ = 1;
  int64_t cache_flush_bytes_ = 0, min_repeats_ = 0;
  double min_repeat_ms_ = 0, warmup_ms_ = 0, cooldown_ms_ = 0, max_rel_stddev_ = 0,
         max_time_ms_ = 0;
  std::string preproc_, outliers_, plot_;
  bool flush_l2_ = false, checksums_ = false, environment_ = false;
  PlacementFlags placement_;
  PriorityFlag priority_;
  int64_t repeats_per_layout_ = 1;
  bool randomize_layout_ = false, cold_ = false;
  double throttle_threshold_ = 0.75;
  bool discard_throttled_ = false;
  int64_t cuda_graph_ = 0;
  CLI::Option* throttle_option_ = nullptr;
  CLI::Option* layout_option_ = nullptr;
  CLI::Option* number_option_ = nullptr;
  CLI::Option* repeat_option_ = nullptr;
  CLI::Option* min_repeats_option_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddTimeCommand(CLI::App& app) {
  return std::make_unique<TimeCommand>(app);
}

}  // namespace kprof::client
