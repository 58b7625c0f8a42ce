// kprof_demo: profiles and times real compute loops in-process with kprof's measurement core,
// and prints the report. `make demo` runs it.
//
//   kprof_demo [--format table|csv|json]
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/collectors/rusage_collector.h"
#include "core/profiler.h"
#include "core/report.h"
#include "core/shape_string.h"
#include "core/statistics.h"
#include "core/status_macros.h"
#include "core/time_evaluator.h"

namespace kprof::core {
namespace {

// Keeps results alive so the compiler cannot drop the loops that made them.
volatile float g_sink;

void Matmul(int n) {
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < n; ++k) {
      const float aik = a[i * n + k];
      for (int j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
    }
  }
  g_sink = c[n * n - 1];
}

void Sum(int n) {
  std::vector<float> x(n, 0.25f);
  float sum = 0;
  for (float v : x) sum += v;
  g_sink = sum;
}

struct Job {
  std::string name;
  std::vector<TensorShape> shapes;
  std::function<void()> run;
  int calls;
};

absl::StatusOr<Report> ProfileJobs(const std::vector<Job>& jobs) {
  const Device cpu{DeviceType::kCpu, 0};
  RusageCollector rusage;
  KPROF_ASSIGN_OR_RETURN(
      std::unique_ptr<Profiler> profiler,
      Profiler::Create({cpu}, {&rusage}, {{"Collectors", std::string("rusage")}}));
  KPROF_RETURN_IF_ERROR(profiler->Start());
  for (const Job& job : jobs) {
    for (int i = 0; i < job.calls; ++i) {
      KPROF_RETURN_IF_ERROR(
          profiler->StartCall(job.name, cpu, {{"Argument Shapes", ShapeString(job.shapes)}}));
      job.run();
      KPROF_RETURN_IF_ERROR(profiler->StopCall());
    }
  }
  KPROF_RETURN_IF_ERROR(profiler->Stop());
  return profiler->GetReport();
}

absl::Status Run(const std::string& format) {
  const std::vector<Job> jobs = {
      {"matmul", {{"float32", {256, 256}}, {"float32", {256, 256}}}, [] { Matmul(256); }, 3},
      {"matmul", {{"float32", {128, 128}}, {"float32", {128, 128}}}, [] { Matmul(128); }, 3},
      {"sum", {{"float32", {1 << 20}}}, [] { Sum(1 << 20); }, 5},
  };
  KPROF_ASSIGN_OR_RETURN(Report report, ProfileJobs(jobs));
  if (format == "json") {
    std::printf("%s\n", AsJson(report).c_str());
    return absl::OkStatus();
  }
  if (format == "csv") {
    std::printf("%s", AsCsv(report).c_str());
    return absl::OkStatus();
  }
  std::printf("Profile of %zu calls on cpu0\n\n%s\n", report.calls.size(), AsTable(report).c_str());

  KPROF_ASSIGN_OR_RETURN(TimeEvaluator evaluator, TimeEvaluator::Create({DeviceType::kCpu, 0}));
  TimeEvaluatorOptions options;
  options.repeat = 5;
  options.min_repeat = absl::Milliseconds(50);
  KPROF_ASSIGN_OR_RETURN(TimeEvaluation timing, evaluator.Evaluate(
                                                    [] {
                                                      Matmul(128);
                                                      return absl::OkStatus();
                                                    },
                                                    options));
  const Summary s = Summarize(timing.seconds_per_call);
  std::printf("Time evaluation of matmul float32[128, 128] (repeat=%lld, min_repeat_ms=50)\n",
              static_cast<long long>(options.repeat));
  for (size_t i = 0; i < timing.seconds_per_call.size(); ++i) {
    std::printf("  repeat %zu: %10.2f us per call over %lld calls\n", i + 1,
                timing.seconds_per_call[i] * 1e6, static_cast<long long>(timing.numbers[i]));
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
                 "kprof_demo: INVALID_ARGUMENT: unknown format '%s' (accepted: table, "
                 "csv, json)\n",
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
