// kprof_demo: measures the builtin matmul in-process with kprof's LocalRunner — the same code a
// worker runs for a job — and prints the profile report and the time evaluation.
//
//   kprof_demo [--format table|csv|json]
#include <cstdio>
#include <cstring>
#include <string>

#include "core/local_runner.h"
#include "core/modules/builtin_module.h"
#include "core/report.h"
#include "core/status_macros.h"

namespace kprof::core {
namespace {

absl::Status Run(const std::string& format) {
  Job job;
  job.module = &BuiltinModule();
  job.function = "matmul";
  job.device = {DeviceType::kCpu, 0};
  job.arg_specs = {"float32[256, 256]:zeros", "float32[256, 256]:random",
                   "float32[256, 256]:random"};

  ProfileJob profile;
  profile.warmup = 1;
  profile.number = 10;
  profile.collectors = {"rusage"};
  LocalRunner runner;
  KPROF_ASSIGN_OR_RETURN(Report report, runner.Profile(job, profile));
  if (format == "json") {
    std::printf("%s\n", AsJson(report).c_str());
    return absl::OkStatus();
  }
  if (format == "csv") {
    std::printf("%s", AsCsv(report).c_str());
    return absl::OkStatus();
  }
  std::printf("Profile of builtin matmul, 10 calls after 1 warm-up call\n\n%s\n",
              AsTable(report).c_str());

  TimeJob time;
  time.options.repeat = 5;
  time.options.min_repeat = absl::Milliseconds(100);
  time.preprocess = std::string(kCacheFlushCpuNonFirstArg);
  KPROF_ASSIGN_OR_RETURN(TimeResult timing, runner.Time(job, time));
  const Summary& s = timing.summary;
  std::printf("Time evaluation of builtin matmul %s\n(repeat=5, min_repeat_ms=100, %s)\n",
              timing.argument_shapes.c_str(), time.preprocess.c_str());
  for (size_t i = 0; i < timing.evaluation.seconds_per_call.size(); ++i) {
    std::printf("  repeat %zu: %10.2f us per call over %lld calls\n", i + 1,
                timing.evaluation.seconds_per_call[i] * 1e6,
                static_cast<long long>(timing.evaluation.numbers[i]));
  }
  std::printf("  mean %.2f us, median %.2f us, min %.2f us, max %.2f us, std %.2f us (cv %.2f%%)\n",
              s.mean * 1e6, s.median * 1e6, s.min * 1e6, s.max * 1e6, s.stddev * 1e6, s.cv * 100);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kprof::core

int main(int argc, char** argv) {
  std::string format = "table";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
      format = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: kprof_demo [--format table|csv|json]\n");
      return 0;
    } else {
      std::fprintf(stderr,
                   "kprof_demo: INVALID_ARGUMENT: unknown argument '%s' (usage: "
                   "kprof_demo [--format table|csv|json])\n",
                   argv[i]);
      return 2;
    }
  }
  if (format != "table" && format != "csv" && format != "json") {
    std::fprintf(stderr,
                 "kprof_demo: INVALID_ARGUMENT: unknown format '%s' (accepted: table, csv, json)\n",
                 format.c_str());
    return 2;
  }
  const absl::Status status = kprof::core::Run(format);
  if (!status.ok()) {
    std::fprintf(stderr, "kprof_demo: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
