// kprof: the command-line client of kprofd.
//
//   kprof [--target HOST:PORT] [--timeout DUR] [--format table|json|csv] COMMAND ...
//   info | load FILE | modules | unload ID | time MODULE FUNCTION ... |
//   profile MODULE FUNCTION ... | profile --sequence FILE.json ... | batch JOBS.jsonl |
//   report FILE.json
//
// Machine-readable output goes to stdout; a failure is one line on stderr, "kprof: CODE:
// message", and a non-zero exit.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "client/compare_command.h"
#include "client/farm.h"
#include "client/gbench_format.h"
#include "client/kprof_client.h"
#include "client/plot_svg.h"
#include "client/rank_command.h"
#include "google/protobuf/util/json_util.h"
#include "kprof/config.h"
#include "nlohmann/json.hpp"
#include "proto/wire.h"
#include "report/report.h"
#include "report/statistics.h"

namespace kprof::client {
namespace {

using core::ReadFile;

// A usage error: INVALID_ARGUMENT, marked so that kprof exits 2 for it (1 for failed work).
constexpr char kUsagePayload[] = "kprof.dev/usage-error";

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("2"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

using Json = nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: kprof [--target HOST:PORT] [--timeout DUR] [--format table|json|csv] COMMAND\n"
    "\n"
    "commands:\n"
    "  info                               devices, collectors, limits, queues, modules\n"
    "  load FILE [--module-format auto|shared-library|cubin|fatbin|ptx]   upload; prints the id\n"
    "  modules                            the modules the daemon holds\n"
    "  unload ID                          forget a module\n"
    "  time MODULE FUNCTION [--arg SPEC]... [--seed N] [--device cpu:0] [--number N]\n"
    "       [--repeat N] [--min-repeat-ms MS] [--limit-zero-time-iterations N]\n"
    "       [--cooldown-ms MS] [--repeats-to-cooldown N] [--cache-flush-bytes N]\n"
    "       [--preproc NAME] [--checksums] [--outliers none|iqr]\n"
    "       [--max-rel-stddev R [--min-repeats N] [--max-time-ms MS]] [--flush-l2]\n"
    "  profile MODULE FUNCTION [--arg SPEC]... [--device cpu:0] [--warmup N] [--number N]\n"
    "       [--collector NAME[:EVENT,EVENT...]]...\n"
    "  profile --sequence FILE.json [--repeat N] [--warmup N] [--collector ...]\n"
    "  batch JOBS.jsonl                   many TimeEvaluate jobs over every daemon the target\n"
    "                                     names; a result line per job (JSONL), progress on a\n"
    "                                     terminal's stderr; exit 3 when some jobs failed\n"
    "  report FILE.json [--no-aggregate] [--no-sort] [--no-sums]\n"
    "  compare BASE NEW [--confidence 0.95] [--threshold 1] [--min-repeats 5]\n"
    "       [--resamples 2000] [--fail-on-regression PERCENT]\n"
    "                                     which measurements of NEW are faster or slower\n"
    "                                     than BASE's (kprof time JSON, kprof batch JSONL or\n"
    "                                     Google Benchmark JSON), with an interval and a\n"
    "                                     U-test p; exit 4 past --fail-on-regression\n"
    "  batch JOBS.jsonl --rank [--confidence 0.95] [--threshold 1] [--rank-initial 10]\n"
    "       [--rank-max-repeats 300] [--rank-budget SECONDS]\n"
    "                                     a race: the fastest job and those within the\n"
    "                                     threshold of it, measuring more repeats only of\n"
    "                                     the candidates in doubt\n"
    "  rank FILE... [--confidence 0.95] [--threshold 1]\n"
    "                                     the same ranking of measured results\n"
    "\n"
    "credentials: --token-file FILE ($KPROF_TOKEN_FILE), --tls-ca FILE,\n"
    "  --tls-cert FILE --tls-key FILE (mutual TLS)\n"
    "\n"
    "MODULE is a file (uploaded when the daemon lacks it), a module id, or 'builtin'.\n"
    "CUDA kernels (cubin, fatbin, PTX) take --grid X[,Y[,Z]] --block X[,Y[,Z]] [--shared-bytes "
    "N].\n"
    "The target defaults to $KPROF_TARGET, else 127.0.0.1:9177.\n";

struct Options {
  std::string target;
  std::string token_file, tls_ca, tls_cert, tls_key;
  absl::Duration timeout = absl::ZeroDuration();
  std::string format = "table";
  bool format_given = false;  // --format on the command line, not the default
  bool help = false, version = false;
  // load
  std::string module_format = "auto";
  // time and profile
  std::vector<std::string> args;
  uint64_t seed = 0;
  std::string device = "cpu:0";
  int64_t number = 1, repeat = 1, limit_zero_time_iterations = 100, repeats_to_cooldown = 1;
  int64_t cache_flush_bytes = 0, warmup = 0;
  double min_repeat_ms = 0, cooldown_ms = 0;
  double max_rel_stddev = 0, max_time_ms = 0;
  int64_t min_repeats = 3;
  std::string preproc, sequence, outliers;
  bool checksums = false, flush_l2 = false;
  std::string grid, block;
  int64_t shared_bytes = 0;
  std::vector<std::string> collectors;
  // report
  bool no_aggregate = false, no_sort = false, no_sums = false;
  // compare
  double confidence = 0.95, fail_on_regression = -1, threshold = 1;
  // batch --rank
  bool rank = false;
  int64_t rank_initial = 10, rank_max_repeats = 300;
  double rank_budget = 0;
  // time and compare
  std::string plot;
  int64_t resamples = 2000;
};

void Declare(core::CommandLine& cl, Options& o) {
  cl.AddString("target", &o.target, "HOST:PORT", "the daemon ($KPROF_TARGET, 127.0.0.1:9177)");
  cl.AddDuration("timeout", &o.timeout, "DUR", "deadline of the call (default: from the options)");
  cl.AddString("token-file", &o.token_file, "FILE",
               "send the first token in FILE as a bearer token ($KPROF_TOKEN_FILE)");
  cl.AddString("tls-ca", &o.tls_ca, "FILE", "use TLS, trusting this CA (PEM)");
  cl.AddString("tls-cert", &o.tls_cert, "FILE", "client certificate for mutual TLS (PEM)");
  cl.AddString("tls-key", &o.tls_key, "FILE", "the key of --tls-cert (PEM)");
  cl.AddString(
      "format", &o.format, "table|json|csv|gbench|trace|html",
      "output format (default table; gbench: Google Benchmark's JSON, for time and "
      "batch; trace: the Chrome trace event format, html: a page, for profile and report)");
  cl.AddFlag("help", &o.help, "print usage");
  cl.AddFlag("version", &o.version, "print the version");
  cl.AddString("module-format", &o.module_format, "FORMAT",
               "auto, shared-library, cubin, fatbin or ptx");
  cl.AddRepeated("arg", &o.args, "SPEC", "an argument spec, once per argument");
  cl.AddUint("seed", &o.seed, "N", "seed of random argument data (default 0)");
  cl.AddString("device", &o.device, "DEVICE", "cpu:0 (default) or cuda:N");
  cl.AddInt("number", &o.number, "N", "calls per repeat (time) or measured calls (profile)");
  cl.AddInt("repeat", &o.repeat, "N", "repeats");
  cl.AddDouble("min-repeat-ms", &o.min_repeat_ms, "MS", "grow number until a repeat lasts this");
  cl.AddInt("limit-zero-time-iterations", &o.limit_zero_time_iterations, "N",
            "zero readings allowed per repeat (default 100)");
  cl.AddDouble("cooldown-ms", &o.cooldown_ms, "MS", "sleep between groups of repeats");
  cl.AddInt("repeats-to-cooldown", &o.repeats_to_cooldown, "N", "repeats per cool-down");
  cl.AddInt("cache-flush-bytes", &o.cache_flush_bytes, "N", "evict caches before each repeat");
  cl.AddString("preproc", &o.preproc, "NAME", "cache_flush_cpu_non_first_arg");
  cl.AddFlag("checksums", &o.checksums, "SHA-256 of each argument after the run");
  cl.AddDouble("max-rel-stddev", &o.max_rel_stddev, "R",
               "repeat until the repeats' relative std is at most R (e.g. 0.01)");
  cl.AddInt("min-repeats", &o.min_repeats, "N",
            "with --max-rel-stddev: at least N (default 3); compare: fewer on a side is "
            "insufficient (default 5)");
  cl.AddDouble("max-time-ms", &o.max_time_ms, "MS",
               "with --max-rel-stddev: time budget (default 10000)");
  cl.AddString("outliers", &o.outliers, "none|iqr",
               "set aside repeats beyond 1.5 IQR in filtered statistics");
  cl.AddInt("warmup", &o.warmup, "N", "untimed calls first (profile)");
  cl.AddString("grid", &o.grid, "X[,Y[,Z]]", "a CUDA kernel's grid");
  cl.AddString("block", &o.block, "X[,Y[,Z]]", "a CUDA kernel's block");
  cl.AddInt("shared-bytes", &o.shared_bytes, "N", "a CUDA kernel's dynamic shared memory");
  cl.AddFlag("flush-l2", &o.flush_l2, "cuda: write an L2-sized buffer before each repeat");
  cl.AddRepeated("collector", &o.collectors, "NAME[:EVENT,...]", "a metric collector");
  cl.AddString("sequence", &o.sequence, "FILE.json", "profile a sequence of calls");
  cl.AddFlag("no-aggregate", &o.no_aggregate, "report: one row per call");
  cl.AddFlag("no-sort", &o.no_sort, "report: keep the calls' order");
  cl.AddFlag("no-sums", &o.no_sums, "report: no Sum row");
  cl.AddDouble("confidence", &o.confidence, "C",
               "compare: how sure a verdict must be (default 0.95)");
  cl.AddInt("resamples", &o.resamples, "N", "compare: bootstrap resamples (default 2000)");
  cl.AddString("plot", &o.plot, "FILE.svg",
               "time, compare: also draw the repeats (or the comparison) as SVG in FILE");
  cl.AddDouble("threshold", &o.threshold, "PERCENT",
               "compare: smaller changes are the same (default 1)");
  cl.AddFlag("rank", &o.rank,
             "batch: race the jobs (candidates) for the fastest and those tied with it");
  cl.AddInt("rank-initial", &o.rank_initial, "N", "batch --rank: first round's repeats (10)");
  cl.AddInt("rank-max-repeats", &o.rank_max_repeats, "N",
            "batch --rank: most repeats of a candidate (300)");
  cl.AddDouble("rank-budget", &o.rank_budget, "SECONDS",
               "batch --rank: start no round that would end past this (default: none)");
  cl.AddDouble("fail-on-regression", &o.fail_on_regression, "PERCENT",
               "compare: exit 4 when a measurement is slower by more than this");
}

// --grid and --block as a LaunchConfig, when either is given.
absl::Status SetLaunch(const core::CommandLine& cl, const Options& o,
                       kprof::v1::FunctionCall* call) {
  if (!cl.Given("grid") && !cl.Given("block") && !cl.Given("shared-bytes")) return absl::OkStatus();
  if (!cl.Given("grid") || !cl.Given("block")) {
    return UsageError("a kernel launch needs both --grid and --block");
  }
  kprof::v1::LaunchConfig* launch = call->mutable_launch();
  for (const auto& [name, text, dims] : {std::tuple{"grid", &o.grid, launch->mutable_grid()},
                                         std::tuple{"block", &o.block, launch->mutable_block()}}) {
    for (const absl::string_view part : absl::StrSplit(absl::string_view(*text), ',')) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(part, &value)) {
        return UsageError(absl::StrCat("--", name, " '", *text,
                                       "': dimensions are integers, e.g. 256 or "
                                       "64,64"));
      }
      dims->Add(value);
    }
  }
  launch->set_shared_bytes(o.shared_bytes);
  return absl::OkStatus();
}

bool IsModuleId(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// MODULE on the command line: "builtin", an id, or a file to upload when the daemon lacks it.
absl::StatusOr<std::string> ResolveModule(Client& client, const std::string& module,
                                          const std::string& format) {
  if (module == "builtin" || IsModuleId(module)) return module;
  KPROF_ASSIGN_OR_RETURN(kprof::v1::ModuleInfo info, client.LoadModuleFile(module, format));
  return info.id();
}

kprof::v1::CollectorSpec ParseCollector(const std::string& text) {
  kprof::v1::CollectorSpec spec;
  const size_t colon = text.find(':');
  spec.set_name(text.substr(0, colon));
  if (colon != std::string::npos) {
    for (absl::string_view e : absl::StrSplit(text.substr(colon + 1), ',', absl::SkipEmpty())) {
      spec.add_options(std::string(e));
    }
  }
  return spec;
}

// Writes `text` to stdout whole: a report's strings may hold NUL bytes, which "%s" would stop at.
void Print(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

std::string ProtoJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

void PrintReport(const core::Report& report, const Options& o) {
  if (o.format == "html") {
    Print(core::AsHtml(report));
  } else if (o.format == "trace") {
    Print(core::AsChromeTrace(report) + "\n");
  } else if (o.format == "json") {
    Print(core::AsJson(report) + "\n");
  } else if (o.format == "csv") {
    Print(core::AsCsv(report));
  } else {
    core::TableOptions table;
    table.aggregate = !o.no_aggregate;
    table.sort = !o.no_sort;
    table.compute_col_sums = !o.no_sums;
    Print(core::AsTable(report, table));
  }
}

absl::Status Info(Client& client, const Options& o) {
  KPROF_ASSIGN_OR_RETURN(kprof::v1::GetInfoResponse info, client.Info());
  if (o.format == "json") {
    std::printf("%s", ProtoJson(info).c_str());
    return absl::OkStatus();
  }
  if (o.format == "csv") {
    std::printf("device,type,name,cpus,queue_length,busy,jobs_completed,jobs_failed\n");
    for (const auto& d : info.devices()) {
      std::printf("%s,%s,\"%s\",%d,%d,%d,%lld,%lld\n", d.device().c_str(), d.type().c_str(),
                  d.cpu_model().c_str(), d.cpus(), d.queue_length(), d.busy() ? 1 : 0,
                  static_cast<long long>(d.jobs_completed()),
                  static_cast<long long>(d.jobs_failed()));
    }
    return absl::OkStatus();
  }
  std::printf("kprofd %s on %s\nbuild: %s\n\n", info.version().c_str(), info.host().c_str(),
              info.build().c_str());
  for (const auto& d : info.devices()) {
    std::printf(
        "%s  %s%s\n  cpus: %d   queue: %d%s   jobs: %lld done, %lld failed\n", d.device().c_str(),
        d.name().c_str(), d.cpu_model().empty() ? "" : (" (" + d.cpu_model() + ")").c_str(),
        d.cpus(), d.queue_length(), d.busy() ? " (busy)" : "",
        static_cast<long long>(d.jobs_completed()), static_cast<long long>(d.jobs_failed()));
    if (!d.compute_capability().empty()) {
      std::printf(
          "  sm_%s, %d SMs, %llu MiB, L2 %d KiB, %d MHz; memory %d MHz x %d bits (peak %.0f "
          "GB/s); PCI %s; driver CUDA %s\n",
          absl::StrReplaceAll(d.compute_capability(), {{".", ""}}).c_str(), d.multiprocessors(),
          static_cast<unsigned long long>(d.memory_bytes() >> 20), d.l2_bytes() >> 10,
          d.clock_mhz(), d.memory_clock_mhz(), d.memory_bus_bits(), d.peak_bandwidth_gbps(),
          d.pci_bus_id().c_str(), d.driver_version().c_str());
    }
    for (const auto& c : d.collectors()) {
      const std::string metrics = c.metrics().empty() ? "no preset events; native events by name"
                                                      : absl::StrJoin(c.metrics(), ", ");
      std::printf("  collector %s: %s\n", c.name().c_str(),
                  c.available() ? metrics.c_str() : ("unavailable: " + c.reason()).c_str());
      for (const auto& component : c.components()) {
        std::printf("    component %s: %s\n", component.name().c_str(),
                    component.enabled() ? "enabled" : ("disabled: " + component.reason()).c_str());
      }
    }
  }
  std::printf("\ncuda: %s\n", info.cuda().c_str());
  if (!info.isolation().empty()) std::printf("isolation: %s\n", info.isolation().c_str());
  const auto& l = info.limits();
  std::printf(
      "\nlimits: module %llu bytes, cache %llu bytes, arguments %llu bytes, queue %d, "
      "job timeout %gs\n\nmodules:\n",
      static_cast<unsigned long long>(l.max_module_bytes()),
      static_cast<unsigned long long>(l.max_cache_bytes()),
      static_cast<unsigned long long>(l.max_argument_bytes()), l.max_queue(),
      l.job_timeout_seconds());
  for (const auto& m : info.modules()) {
    std::printf("  %-64s  %s (%s)\n", m.id().c_str(), m.name().c_str(),
                absl::StrJoin(m.functions(), ", ").c_str());
  }
  if (info.more_modules()) std::printf("  ... and more: `kprof modules` lists them all\n");
  return absl::OkStatus();
}

absl::Status Modules(Client& client, const Options& o) {
  KPROF_ASSIGN_OR_RETURN(auto modules, client.ListModules());
  if (o.format == "json") {
    kprof::v1::ListModulesResponse response;
    for (auto& m : modules) *response.add_modules() = m;
    std::printf("%s", ProtoJson(response).c_str());
  } else {
    if (o.format == "csv") std::printf("id,name,format,size_bytes,functions\n");
    for (const auto& m : modules) {
      const std::string functions = absl::StrJoin(m.functions(), o.format == "csv" ? " " : ", ");
      if (o.format == "csv") {
        std::printf("%s,\"%s\",%s,%llu,\"%s\"\n", m.id().c_str(), m.name().c_str(),
                    m.format().c_str(), static_cast<unsigned long long>(m.size_bytes()),
                    functions.c_str());
      } else {
        std::printf("%-64s  %-16s %10llu bytes  %s\n", m.id().c_str(), m.name().c_str(),
                    static_cast<unsigned long long>(m.size_bytes()), functions.c_str());
      }
    }
  }
  return absl::OkStatus();
}

// `kprof time --format json`'s object for a result: TVM's BenchmarkResult keys (seconds) and
// kprofd's own.
absl::StatusOr<Json> TimeJson(const kprof::v1::TimeEvaluateResponse& r) {
  const auto& s = r.statistics();
  KPROF_ASSIGN_OR_RETURN(const core::MetricMap manifest,
                         wire::FromProto(r.environment(), "environment"));
  Json json = {
      {"results", std::vector<double>(r.seconds_per_call().begin(), r.seconds_per_call().end())},
      {"mean", s.mean()},
      {"median", s.median()},
      {"min", s.min()},
      {"max", s.max()},
      {"std", s.std()},
      {"cv", s.cv()},
      {"number", r.final_number()},
      {"repeat", r.seconds_per_call_size()},
      {"numbers", std::vector<int64_t>(r.numbers().begin(), r.numbers().end())},
      {"device", r.device()},
      {"argument_shapes", r.argument_shapes()},
      {"queue_wait_seconds", r.timing().queue_wait_seconds()},
      {"execution_seconds", r.timing().execution_seconds()},
      {"rel_stddev", r.rel_stddev()},
      {"stop_reason", r.stop_reason()},
      {"warnings", std::vector<std::string>(r.warnings().begin(), r.warnings().end())}};
  if (r.has_converged()) json["converged"] = r.converged();
  if (r.has_filtered_statistics()) {
    const auto& f = r.filtered_statistics();
    json["outliers"] = std::vector<int32_t>(r.outliers().begin(), r.outliers().end());
    json["filtered"] = {{"mean", f.mean()}, {"median", f.median()}, {"min", f.min()},
                        {"max", f.max()},   {"std", f.std()},       {"cv", f.cv()}};
  }
  if (r.checksums_size() > 0) {
    json["checksums"] = std::vector<std::string>(r.checksums().begin(), r.checksums().end());
  }
  Json environment = Json::object();
  for (const auto& [name, value] : manifest) {
    std::visit(
        [&, key = name](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            environment[key] = v;
          } else if constexpr (std::is_same_v<T, core::Count>) {
            environment[key] = v.value;
          } else if constexpr (std::is_same_v<T, core::Duration>) {
            environment[key] = v.microseconds;
          } else if constexpr (std::is_same_v<T, core::Percent>) {
            environment[key] = v.percent;
          } else {
            environment[key] = v.ratio;
          }
        },
        value);
  }
  json["environment"] = std::move(environment);
  return json;
}

// The repeats' distribution in one line: "repeats  ▁▃█▅▂  50.12 us .. 50.31 us (12 in 5 bins)",
// a bar per bin, as high as its count against the fullest's.
std::string RepeatsHistogram(const std::vector<double>& seconds) {
  static constexpr const char* kBars[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const size_t bins = std::clamp<size_t>(seconds.size(), 1, 20);
  const std::vector<size_t> counts = core::Histogram(seconds, bins);
  if (counts.empty()) return "repeats  (none)";
  const size_t most = *std::max_element(counts.begin(), counts.end());
  std::string bars;
  for (const size_t n : counts) {
    // An empty bin is a space; any other is at least the lowest bar.
    bars += kBars[n == 0 ? 0 : std::max<size_t>(1, (n * 8 + most - 1) / most)];
  }
  const auto [low, high] = std::minmax_element(seconds.begin(), seconds.end());
  return absl::StrFormat("repeats  %s  %.3f us .. %.3f us (%d in %d bins)", bars, *low * 1e6,
                         *high * 1e6, seconds.size(), bins);
}

absl::Status Time(Client& client, const core::CommandLine& cl, const Options& o,
                  const std::vector<std::string>& words) {
  if (words.size() != 3) return UsageError("usage: kprof time MODULE FUNCTION ...");
  kprof::v1::TimeEvaluateRequest request;
  KPROF_ASSIGN_OR_RETURN(std::string id, ResolveModule(client, words[1], o.module_format));
  request.mutable_call()->set_module_id(id);
  request.mutable_call()->set_function(words[2]);
  for (const std::string& a : o.args) request.mutable_call()->add_args(a);
  KPROF_RETURN_IF_ERROR(SetLaunch(cl, o, request.mutable_call()));
  request.set_flush_l2(o.flush_l2);
  request.set_device(o.device);
  request.set_seed(o.seed);
  request.set_number(o.number);
  // Converging, the daemon's default bounds the repeats; otherwise the CLI's default of 1.
  if (o.max_rel_stddev == 0 || cl.Given("repeat")) request.set_repeat(o.repeat);
  request.set_max_relative_stddev(o.max_rel_stddev);
  if (cl.Given("min-repeats")) request.set_min_repeats(o.min_repeats);
  request.set_max_time_ms(o.max_time_ms);
  request.set_outlier_filter(o.outliers);
  request.set_min_repeat_ms(o.min_repeat_ms);
  request.set_limit_zero_time_iterations(o.limit_zero_time_iterations);
  request.set_cooldown_interval_ms(o.cooldown_ms);
  request.set_repeats_to_cooldown(o.repeats_to_cooldown);
  request.set_cache_flush_bytes(o.cache_flush_bytes);
  request.set_preprocess(o.preproc);
  request.set_checksums(o.checksums);
  // Enough for the repeats the options ask for (or the convergence budget), twice over, plus a
  // minute of slack.
  const double budget_ms =
      o.max_rel_stddev > 0
          ? (o.max_time_ms > 0 ? o.max_time_ms : 10'000)
          : static_cast<double>(std::max<int64_t>(o.repeat, 1)) * (o.min_repeat_ms + o.cooldown_ms);
  const absl::Duration timeout = o.timeout > absl::ZeroDuration()
                                     ? o.timeout
                                     : absl::Seconds(60) + absl::Milliseconds(2 * budget_ms);
  KPROF_ASSIGN_OR_RETURN(kprof::v1::TimeEvaluateResponse r, client.TimeEvaluate(request, timeout));
  const auto& s = r.statistics();
  KPROF_ASSIGN_OR_RETURN(const core::MetricMap manifest,
                         wire::FromProto(r.environment(), "environment"));
  if (o.format == "gbench") {
    std::printf("%s\n",
                GbenchDocument(&r.environment(), GbenchRuns(GbenchName("", request.call()), r))
                    .dump(2)
                    .c_str());
  } else if (o.format == "json") {
    KPROF_ASSIGN_OR_RETURN(const Json json, TimeJson(r));
    // What was called first, so that `kprof compare` can tell measurements apart.
    Json out = {{"module", words[1]}, {"function", words[2]}, {"args", o.args}};
    out.update(json);
    std::printf("%s\n", out.dump(2).c_str());
  } else if (o.format == "csv") {
    std::printf("repeat,seconds_per_call,number\n");
    for (int i = 0; i < r.seconds_per_call_size(); ++i) {
      std::printf("%d,%s,%lld\n", i + 1, core::ShortestDecimal(r.seconds_per_call(i)).c_str(),
                  static_cast<long long>(r.numbers(i)));
    }
  } else {
    Print(absl::StrCat(words[2], " ", r.argument_shapes(), " on ", r.device(), "\n"));
    for (int i = 0; i < r.seconds_per_call_size(); ++i) {
      std::printf("  repeat %d: %12.3f us per call (%lld calls)\n", i + 1,
                  r.seconds_per_call(i) * 1e6, static_cast<long long>(r.numbers(i)));
    }
    std::printf(
        "  mean %.3f us  median %.3f us  min %.3f us  max %.3f us  std %.3f us  "
        "cv %.2f%%\n  queue wait %.3f ms, execution %.3f ms\n",
        s.mean() * 1e6, s.median() * 1e6, s.min() * 1e6, s.max() * 1e6, s.std() * 1e6, s.cv() * 100,
        r.timing().queue_wait_seconds() * 1e3, r.timing().execution_seconds() * 1e3);
    if (r.has_converged()) {
      std::printf("  %s: relative std %.2f%% after %d repeats (%s)\n",
                  r.converged() ? "converged" : "NOT converged", r.rel_stddev() * 100,
                  r.seconds_per_call_size(), r.stop_reason().c_str());
    }
    if (!o.outliers.empty() && o.outliers != "none") {
      const auto& f = r.filtered_statistics();
      std::printf(
          "  without %d outlier(s): mean %.3f us  median %.3f us  min %.3f us  max %.3f us  "
          "std %.3f us  cv %.2f%%\n",
          r.outliers_size(), f.mean() * 1e6, f.median() * 1e6, f.min() * 1e6, f.max() * 1e6,
          f.std() * 1e6, f.cv() * 100);
    }
    for (int i = 0; i < r.checksums_size(); ++i) {
      std::printf("  sha256 of argument %d: %s\n", i, r.checksums(i).c_str());
    }
    for (const std::string& warning : r.warnings()) {
      std::printf("  warning: %s\n", warning.c_str());
    }
    if (!manifest.empty()) {
      std::printf("\nEnvironment\n-----------\n");
      for (const auto& [name, value] : manifest) {
        Print(absl::StrCat(name, ": ", core::FormatForTable(value), "\n"));
      }
    }
    std::printf("\n%s\n", RepeatsHistogram(std::vector<double>(r.seconds_per_call().begin(),
                                                               r.seconds_per_call().end()))
                              .c_str());
  }
  if (!o.plot.empty()) {
    std::vector<std::string> title = {words[2]};
    title.insert(title.end(), o.args.begin(), o.args.end());
    KPROF_RETURN_IF_ERROR(WritePlot(
        o.plot,
        RepeatsSvg(absl::StrJoin(title, " "),
                   std::vector<double>(r.seconds_per_call().begin(), r.seconds_per_call().end()))));
  }
  return absl::OkStatus();
}

// A sequence file: {"calls": [{"module": M, "function": F, "args": [SPEC...]}...],
// "repeat": N, "warmup": N}; M as on the command line.
absl::Status ReadSequence(Client& client, const Options& o, kprof::v1::ProfileRequest* request) {
  KPROF_ASSIGN_OR_RETURN(std::string text, ReadFile(o.sequence));
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(o.sequence, ": ", why));
  };
  if (!json.is_object() || !json.contains("calls") || !json["calls"].is_array()) {
    return bad("expected {\"calls\": [{\"module\": ..., \"function\": ..., \"args\": [...]}]}");
  }
  for (size_t i = 0; i < json["calls"].size(); ++i) {
    const Json& call = json["calls"][i];
    if (!call.is_object() || !call.value("module", Json()).is_string() ||
        !call.value("function", Json()).is_string()) {
      return bad(absl::StrCat("calls[", i, "] needs \"module\" and \"function\" strings"));
    }
    kprof::v1::FunctionCall* out = request->add_calls();
    KPROF_ASSIGN_OR_RETURN(
        std::string id, ResolveModule(client, call["module"].get<std::string>(), o.module_format));
    out->set_module_id(id);
    out->set_function(call["function"].get<std::string>());
    for (const Json& a : call.value("args", Json::array())) {
      if (!a.is_string()) return bad(absl::StrCat("calls[", i, "].args holds a non-string"));
      out->add_args(a.get<std::string>());
    }
    // "launch": {"grid": [4096], "block": [256], "shared_bytes": 0}
    if (const Json launch = call.value("launch", Json()); !launch.is_null()) {
      if (!launch.is_object() || !launch.value("grid", Json()).is_array() ||
          !launch.value("block", Json()).is_array()) {
        return bad(absl::StrCat("calls[", i, "].launch needs \"grid\" and \"block\" arrays"));
      }
      for (const auto& [key, dims] : {std::pair{"grid", out->mutable_launch()->mutable_grid()},
                                      std::pair{"block", out->mutable_launch()->mutable_block()}}) {
        for (const Json& d : launch[key]) {
          if (!d.is_number_integer()) {
            return bad(absl::StrCat("calls[", i, "].launch.", key, " holds a non-integer"));
          }
          dims->Add(d.get<int64_t>());
        }
      }
      if (launch.value("shared_bytes", Json()).is_number_integer()) {
        out->mutable_launch()->set_shared_bytes(launch["shared_bytes"].get<int64_t>());
      }
    }
  }
  if (json.value("repeat", Json()).is_number_integer()) request->set_repeat(json["repeat"]);
  if (json.value("warmup", Json()).is_number_integer()) request->set_warmup(json["warmup"]);
  return absl::OkStatus();
}

absl::Status Profile(Client& client, const core::CommandLine& cl, const Options& o,
                     const std::vector<std::string>& words) {
  const absl::Duration timeout = o.timeout > absl::ZeroDuration() ? o.timeout : absl::Seconds(120);
  kprof::v1::Report report;
  if (!o.sequence.empty()) {
    if (words.size() != 1) {
      return UsageError("kprof profile --sequence FILE takes no MODULE FUNCTION");
    }
    kprof::v1::ProfileRequest request;
    KPROF_RETURN_IF_ERROR(ReadSequence(client, o, &request));
    request.set_device(o.device);
    request.set_seed(o.seed);
    if (cl.Given("repeat")) request.set_repeat(o.repeat);
    if (cl.Given("warmup")) request.set_warmup(o.warmup);
    for (const std::string& c : o.collectors) *request.add_collectors() = ParseCollector(c);
    KPROF_ASSIGN_OR_RETURN(kprof::v1::ProfileResponse r, client.Profile(request, timeout));
    report = r.report();
  } else {
    if (words.size() != 3) {
      return UsageError(
          "usage: kprof profile MODULE FUNCTION ... or kprof profile --sequence FILE.json");
    }
    kprof::v1::ProfileFunctionRequest request;
    KPROF_ASSIGN_OR_RETURN(std::string id, ResolveModule(client, words[1], o.module_format));
    request.mutable_call()->set_module_id(id);
    request.mutable_call()->set_function(words[2]);
    for (const std::string& a : o.args) request.mutable_call()->add_args(a);
    KPROF_RETURN_IF_ERROR(SetLaunch(cl, o, request.mutable_call()));
    request.set_device(o.device);
    request.set_seed(o.seed);
    request.set_warmup(o.warmup);
    request.set_number(o.number);
    for (const std::string& c : o.collectors) *request.add_collectors() = ParseCollector(c);
    KPROF_ASSIGN_OR_RETURN(kprof::v1::ProfileFunctionResponse r,
                           client.ProfileFunction(request, timeout));
    report = r.report();
  }
  KPROF_ASSIGN_OR_RETURN(core::Report converted, wire::FromProto(report));
  PrintReport(converted, o);
  return absl::OkStatus();
}

absl::Status Compare(const core::CommandLine& cl, const Options& o,
                     const std::vector<std::string>& words, int* exit_code) {
  if (words.size() != 3) return UsageError("usage: kprof compare BASE NEW");
  CompareCommandOptions options;
  options.format = o.format;
  if (!(o.confidence > 0 && o.confidence < 1)) {
    return UsageError(
        absl::StrCat("--confidence ", o.confidence, ": a probability between 0 and 1, e.g. 0.95"));
  }
  options.compare.confidence = o.confidence;
  if (cl.Given("min-repeats")) {
    if (o.min_repeats < 1) return UsageError("--min-repeats: at least 1");
    options.compare.min_repeats = static_cast<size_t>(o.min_repeats);
  }
  if (o.resamples < 100 || o.resamples > 1000000) {
    return UsageError(absl::StrCat("--resamples ", o.resamples, ": between 100 and 1000000"));
  }
  options.compare.resamples = static_cast<int>(o.resamples);
  if (cl.Given("fail-on-regression") && !(o.fail_on_regression >= 0)) {
    return UsageError(absl::StrCat("--fail-on-regression ", o.fail_on_regression,
                                   ": a percentage, 0 or more (5 fails on a slowdown over 5%)"));
  }
  if (!(o.threshold >= 0 && o.threshold < 100)) {
    return UsageError(absl::StrCat("--threshold ", o.threshold,
                                   ": a percentage from 0 to under 100 (default 1)"));
  }
  options.compare.threshold = o.threshold / 100;
  options.fail_on_regression = cl.Given("fail-on-regression") ? o.fail_on_regression : -1;
  options.plot = o.plot;
  return CompareFiles(words[1], words[2], options, exit_code);
}

// --confidence, --threshold and the race's options as RankOptions, checked.
absl::StatusOr<core::RankOptions> RankOptionsFrom(const Options& o) {
  core::RankOptions options;
  if (!(o.confidence > 0 && o.confidence < 1)) {
    return UsageError(
        absl::StrCat("--confidence ", o.confidence, ": a probability between 0 and 1, e.g. 0.95"));
  }
  options.confidence = o.confidence;
  if (!(o.threshold >= 0 && o.threshold < 100)) {
    return UsageError(absl::StrCat("--threshold ", o.threshold,
                                   ": a percentage from 0 to under 100 (default 1)"));
  }
  options.threshold = o.threshold / 100;
  // A comparison holds every pairwise difference of two candidates' repeats: 2000 a side is
  // 4 million of them (32 MB).
  if (o.rank_initial < 2 || o.rank_initial > 2000) {
    return UsageError(absl::StrCat("--rank-initial ", o.rank_initial,
                                   ": repeats of the first round, from 2 to 2000 (default 10)"));
  }
  if (o.rank_max_repeats < o.rank_initial || o.rank_max_repeats > 2000) {
    return UsageError(absl::StrCat("--rank-max-repeats ", o.rank_max_repeats,
                                   ": from --rank-initial (", o.rank_initial,
                                   ") to 2000 (default 300)"));
  }
  if (!(o.rank_budget >= 0) || std::isinf(o.rank_budget)) {
    return UsageError(absl::StrCat("--rank-budget ", o.rank_budget,
                                   ": seconds, more than 0 (0, the default: no budget)"));
  }
  options.initial = static_cast<size_t>(o.rank_initial);
  options.max_repeats = static_cast<size_t>(o.rank_max_repeats);
  return options;
}

absl::Status Rank(const Options& o, const std::vector<std::string>& words) {
  if (words.size() < 2)
    return UsageError(
        "usage: kprof rank FILE... (kprof time JSON, kprof "
        "batch JSONL or Google Benchmark JSON)");
  if (o.format != "table" && o.format != "json" && o.format != "csv") {
    return UsageError(absl::StrCat("--format ", o.format, " is not for rank (table, json, csv)"));
  }
  KPROF_ASSIGN_OR_RETURN(const core::RankOptions options, RankOptionsFrom(o));
  return RankFiles(std::vector<std::string>(words.begin() + 1, words.end()), options, o.format);
}

absl::Status Report(const Options& o, const std::vector<std::string>& words) {
  if (words.size() != 2) return UsageError("usage: kprof report FILE.json");
  KPROF_ASSIGN_OR_RETURN(std::string text, ReadFile(words[1], "report file"));
  KPROF_ASSIGN_OR_RETURN(core::Report report, core::ReportFromJson(text));
  PrintReport(report, o);
  return absl::OkStatus();
}

// One job line of `kprof batch` as a BatchJob: "id", "module" (builtin, an id, or a file,
// uploaded once per path), "function", "args", "launch", and any TimeEvaluateRequest field by
// its proto name ("device", "number", "repeat", "min_repeat_ms", ...).
absl::StatusOr<kprof::v1::BatchJob> BatchJobFromLine(
    Farm& farm, const std::string& line, const Options& o,
    std::map<std::string, absl::StatusOr<std::string>>& uploaded, std::string* module_spec) {
  Json json = Json::parse(line, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  kprof::v1::BatchJob job;
  if (!json.value("id", Json()).is_string() || json["id"].get<std::string>().empty()) {
    return absl::InvalidArgumentError("needs an \"id\" string");
  }
  job.set_id(json["id"].get<std::string>());
  if (!json.value("module", Json()).is_string() || !json.value("function", Json()).is_string()) {
    return absl::InvalidArgumentError("needs \"module\" and \"function\" strings");
  }
  Json call = Json::object();
  for (const char* key : {"function", "args", "launch"}) {
    if (json.contains(key)) call[key] = json[key];
  }
  json.erase("id");
  const std::string module = json["module"].get<std::string>();
  *module_spec = module;
  json.erase("module");
  for (const char* key : {"function", "args", "launch"}) json.erase(key);
  // The rest are TimeEvaluateRequest's own fields, read as protobuf reads JSON.
  kprof::v1::TimeEvaluateRequest* request = job.mutable_time_evaluate();
  if (const auto s = google::protobuf::util::JsonStringToMessage(json.dump(), request); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("options: ", s.message().ToString()));
  }
  if (const auto s =
          google::protobuf::util::JsonStringToMessage(call.dump(), request->mutable_call());
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("function, args or launch: ", s.message().ToString()));
  }
  auto found = uploaded.find(module);
  if (found == uploaded.end()) {
    absl::StatusOr<std::string> id = module;
    if (module != "builtin" && !IsModuleId(module))
      id = farm.AddModuleFile(module, o.module_format);
    found = uploaded.emplace(module, std::move(id)).first;
  }
  if (!found->second.ok()) return found->second.status();
  request->mutable_call()->set_module_id(*found->second);
  return job;
}

// One candidate's rounds as one answer: the first's, with every repeat after it and statistics
// of them all.
void MergeInto(kprof::v1::TimeEvaluateResponse* merged, const kprof::v1::TimeEvaluateResponse& r,
               bool first) {
  if (first) {
    *merged = r;
  } else {
    merged->mutable_seconds_per_call()->MergeFrom(r.seconds_per_call());
    merged->mutable_numbers()->MergeFrom(r.numbers());
    merged->mutable_warnings()->MergeFrom(r.warnings());
    auto* timing = merged->mutable_timing();
    timing->set_queue_wait_seconds(timing->queue_wait_seconds() + r.timing().queue_wait_seconds());
    timing->set_execution_seconds(timing->execution_seconds() + r.timing().execution_seconds());
  }
  const std::vector<double> all(merged->seconds_per_call().begin(),
                                merged->seconds_per_call().end());
  const core::Summary summary = core::Summarize(all);
  auto* s = merged->mutable_statistics();
  s->set_mean(summary.mean);
  s->set_median(summary.median);
  s->set_min(summary.min);
  s->set_max(summary.max);
  s->set_std(summary.stddev);
  s->set_cv(summary.cv);
  merged->set_rel_stddev(summary.cv);
  merged->clear_filtered_statistics();  // per round, not of the whole
  merged->clear_outliers();
}

// Repeats per job of a race's round: the candidates' jobs go out in turns of this many repeats
// each, so that whatever drifts on the host while a round runs falls on all of them alike.
constexpr size_t kRaceTurn = 5;

// kprof batch --rank: the jobs are candidates in a race (report/ranking.h). Each round is one
// batch over the farm. In JSONL (the default, as for any batch) each candidate's line carries
// every repeat it got, and a last line {"ranking": ...} the verdicts; --format table and csv
// print the ranking alone.
absl::Status RaceBatch(Farm& farm, const Options& o, const std::vector<kprof::v1::BatchJob>& jobs,
                       std::map<std::string, Json>& calls,
                       const std::vector<std::pair<std::string, std::string>>& refused,
                       int* exit_code) {
  KPROF_ASSIGN_OR_RETURN(const core::RankOptions options, RankOptionsFrom(o));
  std::vector<std::string> names;
  for (const kprof::v1::BatchJob& job : jobs) names.push_back(job.id());
  for (const auto& [name, error] : refused) names.push_back(name);
  core::Race race(names, options);
  for (size_t i = jobs.size(); i < names.size(); ++i) race.Fail(i, refused[i - jobs.size()].second);
  std::vector<kprof::v1::TimeEvaluateResponse> merged(jobs.size());
  std::vector<bool> measured(jobs.size(), false);
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
    if (o.rank_budget > 0 && race.round() > 1 &&
        elapsed() + seconds_per_repeat * static_cast<double>(planned) > o.rank_budget) {
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
        job.mutable_time_evaluate()->set_repeat(
            static_cast<int64_t>(std::min(kRaceTurn, add - turn * kRaceTurn)));
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
        MergeInto(&merged[i], r, !measured[i]);
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
  core::Ranking ranking = race.Current();
  ranking.seconds = elapsed();
  size_t failures = 0;
  for (const core::RankedCandidate& c : ranking.candidates) {
    failures += c.state == core::RankState::kFailed ? 1 : 0;
  }
  if (o.format_given && (o.format == "table" || o.format == "csv")) {
    std::fputs(RenderRanking(ranking, o.format).c_str(), stdout);
  } else if (o.format == "gbench") {
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
    std::printf("%s\n", GbenchDocument(first < jobs.size() ? &merged[first].environment() : nullptr,
                                       std::move(runs))
                            .dump(2)
                            .c_str());
  } else {
    for (const core::RankedCandidate& c : ranking.candidates) {
      const size_t i =
          static_cast<size_t>(std::find(names.begin(), names.end(), c.name) - names.begin());
      Json line = {{"id", c.name}};
      absl::StatusOr<Json> result = i < jobs.size() && c.state != core::RankState::kFailed
                                        ? TimeJson(merged[i])
                                        : absl::StatusOr<Json>(Json());
      if (c.state == core::RankState::kFailed || !result.ok()) {
        const std::string error = result.ok() ? c.error : std::string(result.status().message());
        const size_t colon = error.find(": ");
        line["status"] = colon == std::string::npos ? "UNKNOWN" : error.substr(0, colon);
        line["error"] = colon == std::string::npos ? error : error.substr(colon + 2);
      } else {
        line["status"] = "OK";
        line.update(calls[c.name]);
        line.update(*result);
      }
      std::printf("%s\n", line.dump().c_str());
    }
    std::printf("%s\n", Json({{"ranking", RankingJson(ranking)}}).dump().c_str());
  }
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

// kprof batch JOBS.jsonl: every line's result as a line of JSONL on stdout, as it finishes;
// progress on stderr when it is a terminal. Lines that are not jobs are failed results naming
// the line.
absl::Status Batch(Farm& farm, const Options& o, const std::vector<std::string>& words,
                   int* exit_code) {
  if (words.size() != 2) {
    return UsageError("usage: kprof batch JOBS.jsonl (- reads standard input)");
  }
  std::ifstream file;
  if (words[1] != "-") {
    file.open(words[1]);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot read '", words[1], "'"));
  }
  std::istream& in = words[1] == "-" ? std::cin : file;
  int64_t failed = 0, done = 0, total = 0;
  // --format gbench: one document at the end, its runs gathered here (and the manifest of the
  // first result, for its context).
  const bool gbench = o.format == "gbench";
  Json gbench_runs = Json::array();
  std::optional<kprof::v1::MetricMap> gbench_environment;
  const auto emit = [](const Json& result) { std::printf("%s\n", result.dump().c_str()); };
  // --rank: the lines that are no candidates, named in the ranking as failed.
  std::vector<std::pair<std::string, std::string>> refused;
  const auto failure = [&](Json id, int64_t line, const absl::Status& status) {
    ++failed;
    if (o.rank) {
      // Named by its line too: its id may be another line's (a duplicate), and names are unique.
      refused.emplace_back(
          id.is_string() ? absl::StrCat(id.get<std::string>(), " (line ", line, ")")
                         : absl::StrCat("line ", line),
          absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
      return;
    }
    if (gbench) {
      const std::string name = id.is_string() ? id.get<std::string>() : absl::StrCat("line ", line);
      gbench_runs.push_back(GbenchError(
          name, absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message())));
      return;
    }
    Json result = {{"id", std::move(id)},
                   {"status", absl::StatusCodeToString(status.code())},
                   {"error", std::string(status.message())}};
    if (line > 0) result["line"] = line;
    emit(result);
  };
  std::vector<kprof::v1::BatchJob> jobs;
  std::map<std::string, int64_t> lines;    // job id -> its line
  std::map<std::string, size_t> index_of;  // job id -> its place in `jobs`
  // job id -> its "module" (as the line gives it), "function" and "args", for its result line
  std::map<std::string, Json> calls;
  std::map<std::string, absl::StatusOr<std::string>> uploaded;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++total;
    std::string module;
    absl::StatusOr<kprof::v1::BatchJob> job = BatchJobFromLine(farm, line, o, uploaded, &module);
    if (job.ok() && lines.count(job->id()) > 0) {
      job = absl::InvalidArgumentError(
          absl::StrCat("id '", job->id(), "' is also on line ", lines[job->id()]));
    }
    if (job.ok() && o.rank &&
        (job->time_evaluate().has_repeat() || job->time_evaluate().max_relative_stddev() != 0)) {
      job = absl::InvalidArgumentError(
          "with --rank the race sets each candidate's repeats: leave out \"repeat\" and "
          "\"max_relative_stddev\"");
    }
    if (!job.ok()) {
      const Json parsed = Json::parse(line, nullptr, false);
      Json id =
          parsed.is_object() && parsed.value("id", Json()).is_string() ? parsed["id"] : Json();
      failure(std::move(id), number,
              absl::Status(job.status().code(),
                           absl::StrCat("line ", number, ": ", job.status().message())));
      continue;
    }
    lines[job->id()] = number;
    index_of[job->id()] = jobs.size();
    const kprof::v1::FunctionCall& call = job->time_evaluate().call();
    calls[job->id()] = {{"module", module},
                        {"function", call.function()},
                        {"args", std::vector<std::string>(call.args().begin(), call.args().end())}};
    jobs.push_back(*std::move(job));
  }
  if (o.rank) return RaceBatch(farm, o, jobs, calls, refused, exit_code);
  const bool bar = isatty(STDERR_FILENO) != 0;
  std::set<std::string> running;  // over every daemon of the farm
  const auto progress = [&] {
    if (!bar) return;
    const int64_t finished = done + failed;
    const int width = 30;
    const int filled =
        total > 0 ? static_cast<int>(width * std::min(finished, total) / total) : width;
    std::fprintf(stderr, "\r[%s%s] %lld/%lld  running %lld  failed %lld ",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(),
                 static_cast<long long>(finished), static_cast<long long>(total),
                 static_cast<long long>(running.size()), static_cast<long long>(failed));
  };
  std::set<std::string> answered;
  absl::Status stream = absl::OkStatus();
  if (!jobs.empty()) {
    stream = farm.MeasureBatch(
        jobs,
        [&](const kprof::v1::BatchUpdate& update) {
          if (update.state() == kprof::v1::BatchUpdate::DONE ||
              update.state() == kprof::v1::BatchUpdate::FAILED) {
            if (!answered.insert(update.id()).second) return;
          }
          if (update.state() == kprof::v1::BatchUpdate::DONE && gbench) {
            if (!gbench_environment) gbench_environment = update.time_evaluate().environment();
            const kprof::v1::BatchJob& job = jobs[index_of[update.id()]];
            for (auto& run : GbenchRuns(GbenchName(update.id(), job.time_evaluate().call()),
                                        update.time_evaluate())) {
              gbench_runs.push_back(std::move(run));
            }
            ++done;
          } else if (update.state() == kprof::v1::BatchUpdate::DONE) {
            absl::StatusOr<Json> result = TimeJson(update.time_evaluate());
            if (!result.ok()) {
              failure(update.id(), lines[update.id()], result.status());
            } else {
              Json line_result = {{"id", update.id()}, {"status", "OK"}};
              line_result.update(calls[update.id()]);
              line_result.update(*result);
              emit(line_result);
              ++done;
            }
          } else if (update.state() == kprof::v1::BatchUpdate::FAILED) {
            failure(update.id(), lines[update.id()], client::StatusOf(update));
          }
          if (update.state() == kprof::v1::BatchUpdate::RUNNING) {
            running.insert(update.id());
          } else {
            running.erase(update.id());
          }
        },
        /*window=*/32, /*on_pause=*/
        [&] {
          // The lines of the updates that came together go out together, before the farm waits.
          std::fflush(stdout);
          progress();
        });
  }
  if (bar) std::fprintf(stderr, "\n");
  // Every job line gets its result line, even when the batch itself broke off.
  for (const kprof::v1::BatchJob& job : jobs) {
    if (answered.count(job.id()) > 0) continue;
    failure(job.id(), lines[job.id()],
            stream.ok() ? absl::UnknownError("the daemons gave no answer for this job") : stream);
  }
  if (gbench) {
    std::printf("%s\n", GbenchDocument(gbench_environment ? &*gbench_environment : nullptr,
                                       std::move(gbench_runs))
                            .dump(2)
                            .c_str());
    std::fflush(stdout);
  }
  KPROF_RETURN_IF_ERROR(stream);
  if (failed > 0) {
    *exit_code = 3;  // the batch ran; some of its jobs failed
    return absl::AbortedError(
        absl::StrCat(failed, " of ", total, " jobs failed (see their lines)"));
  }
  return absl::OkStatus();
}

// Reads the token and TLS files the options name into `client`.
absl::Status Credentials(Options& o, ClientOptions* client) {
  if (o.token_file.empty()) {
    const char* env = std::getenv("KPROF_TOKEN_FILE");
    if (env != nullptr) o.token_file = env;
  }
  if (!o.token_file.empty()) {
    KPROF_ASSIGN_OR_RETURN(std::string text, ReadFile(o.token_file));
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      const std::string token(absl::StripAsciiWhitespace(line));
      if (!token.empty() && token[0] != '#') {
        client->bearer_token = token;
        break;
      }
    }
    if (client->bearer_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token file '", o.token_file, "' holds no token"));
    }
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return UsageError("--tls-cert and --tls-key go together");
  }
  client->tls = !o.tls_ca.empty() || !o.tls_cert.empty();
  if (!o.tls_ca.empty()) {
    KPROF_ASSIGN_OR_RETURN(client->tls_root_certs_pem, ReadFile(o.tls_ca));
  }
  if (!o.tls_cert.empty()) {
    KPROF_ASSIGN_OR_RETURN(client->tls_cert_chain_pem, ReadFile(o.tls_cert));
    KPROF_ASSIGN_OR_RETURN(client->tls_private_key_pem, ReadFile(o.tls_key));
  }
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv, int* exit_code) {
  Options o;
  core::CommandLine cl("kprof");
  Declare(cl, o);
  std::vector<std::string> words;
  if (absl::Status parsed = cl.Parse(std::vector<std::string>(argv + 1, argv + argc), &words);
      !parsed.ok()) {
    return UsageError(parsed.message());
  }
  o.format_given = cl.Given("format");
  if (o.help) {
    std::printf("%s\noptions:\n%s", kUsage, cl.Help().c_str());
    return absl::OkStatus();
  }
  if (o.version) {
    std::printf("kprof %s (%s)\n", KPROF_VERSION, KPROF_BUILD);
    return absl::OkStatus();
  }
  if (o.format != "table" && o.format != "json" && o.format != "csv" && o.format != "gbench" &&
      o.format != "trace" && o.format != "html") {
    return UsageError(absl::StrCat("--format '", o.format,
                                   "' is not one of table, json, csv, gbench, trace, html"));
  }
  if (words.empty()) return UsageError("no command (kprof --help lists them)");
  const std::string& command = words[0];
  if (o.format == "gbench" && command != "time" && command != "batch") {
    return UsageError(absl::StrCat("--format gbench is for time and batch, not ", command,
                                   " (it takes table, json or csv)"));
  }
  if ((o.format == "trace" || o.format == "html") && command != "profile" && command != "report") {
    return UsageError(absl::StrCat("--format ", o.format, " is for profile and report, not ",
                                   command, " (it takes table, json or csv)"));
  }
  if (command == "report") return Report(o, words);
  if (command == "compare") return Compare(cl, o, words, exit_code);
  if (command == "rank") return Rank(o, words);
  if (o.rank && command != "batch") {
    return UsageError(absl::StrCat("--rank is for batch, not ", command));
  }

  if (o.target.empty()) {
    const char* env = std::getenv("KPROF_TARGET");
    o.target = env != nullptr && *env ? env : "127.0.0.1:9177";
  }
  ClientOptions client_options;
  if (o.timeout > absl::ZeroDuration()) client_options.timeout = o.timeout;
  KPROF_RETURN_IF_ERROR(Credentials(o, &client_options));
  if (command == "batch") {
    // A batch spreads over every daemon the target names.
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Farm> farm, Farm::Connect(o.target, client_options));
    return Batch(*farm, o, words, exit_code);
  }
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(o.target, client_options));
  if (command == "info") return Info(*client, o);
  if (command == "modules") return Modules(*client, o);
  if (command == "time") return Time(*client, cl, o, words);
  if (command == "profile") return Profile(*client, cl, o, words);
  if (command == "load") {
    if (words.size() != 2) return UsageError("usage: kprof load FILE");
    KPROF_ASSIGN_OR_RETURN(kprof::v1::ModuleInfo m,
                           client->LoadModuleFile(words[1], o.module_format));
    std::printf("%s\n", m.id().c_str());
    return absl::OkStatus();
  }
  if (command == "unload") {
    if (words.size() != 2) return UsageError("usage: kprof unload ID");
    return client->UnloadModule(words[1]);
  }
  return UsageError(absl::StrCat("unknown command '", command,
                                 "' (accepted: info, load, modules, unload, time, profile, "
                                 "batch, report, compare, rank)"));
}

}  // namespace
}  // namespace kprof::client

int main(int argc, char** argv) {
  int exit_code = 1;
  const absl::Status status = kprof::client::Run(argc, argv, &exit_code);
  if (!status.ok()) {
    // The code and message alone: a usage error's mark is not for the person reading.
    std::fprintf(stderr, "kprof: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
                 std::string(status.message()).c_str());
    return kprof::client::IsUsageError(status) ? 2 : exit_code;
  }
  return 0;
}
