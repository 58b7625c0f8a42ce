// Accuracy of the local runner against the clock it times with: builtin spin_us(100) busy-waits
// 100 µs on the steady clock, so the median seconds per call should land within 1% of 100 µs.
// A benchmark, not a test: it prints figures and ratios and fails nothing.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/host/environment.h"
#include "core/host/interference.h"
#include "core/measure/local_runner.h"
#include "core/modules/builtin_module.h"

int main() {
  using namespace kprof::core;
  Job job;
  job.module = &BuiltinModule();
  job.function = "spin_us";
  job.arg_specs = {"float64:100"};
  TimeJob time;
  time.options.repeat = 30;
  time.options.min_repeat = absl::Milliseconds(10);
  auto result = LocalRunner().Time(job, time);
  if (!result.ok()) {
    std::fprintf(stderr, "runner_bench: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const kprof::report::Summary& s = result->summary;
  std::printf("%-34s %12s %12s %12s %8s\n", "benchmark", "median (us)", "reference", "ratio", "cv");
  std::printf("%-34s %12.3f %12.3f %12.4f %7.2f%%\n", "spin_us(100) via LocalRunner",
              s.median * 1e6, 100.0, s.median * 1e6 / 100.0, s.cv * 100);
  std::printf("goal: ratio 1.00 +- 0.01 (%s); %lld calls per repeat, %zu repeats\n",
              std::abs(s.median * 1e6 / 100.0 - 1.0) <= 0.01 ? "met" : "NOT met",
              static_cast<long long>(result->evaluation.final_number), s.count);

  // What one job costs the worker besides the function: the whole runner on nop, and the
  // parts of it that read the host, against one clock read.
  const auto per_call = [](int n, auto&& f) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
  };
  Job nop;
  nop.module = &BuiltinModule();
  nop.function = "nop";
  const double runner = per_call(2000, [&] { (void)LocalRunner().Time(nop, TimeJob{}); });
  const double manifest = per_call(2000, [] { (void)EnvironmentManifest(); });
  const double sample = per_call(2000, [] { (void)SampleSystem(); });
  const double clock = per_call(100000, [] { (void)std::chrono::steady_clock::now(); });
  std::printf("%-34s %12.2f us (%.0f clock reads)\n", "LocalRunner::Time(nop), whole job",
              runner * 1e6, runner / clock);
  std::printf("%-34s %12.2f us (%.0f clock reads)\n", "  environment manifest", manifest * 1e6,
              manifest / clock);
  std::printf("%-34s %12.2f us (%.0f clock reads)\n", "  interference sample", sample * 1e6,
              sample / clock);
  return 0;
}
