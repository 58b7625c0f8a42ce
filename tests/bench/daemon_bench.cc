// Daemon benchmarks: what a crash costs and how many small jobs one daemon serves, each as a
// ratio against a reference measured in the same run. Prints figures; fails nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "client/kprof_client.h"
#include "daemon.h"
#include "report/statistics.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main() {
  using namespace kprof;
  testing::TempDir dir;
  testing::Daemon daemon;
  if (!daemon.Start(dir.path() + "/cache")) {
    std::fprintf(stderr, "daemon_bench: kprofd did not start\n");
    return 1;
  }
  auto client = *client::Client::Connect(daemon.target());
  auto faults = client->LoadModuleFile(std::string(KPROF_TEST_MODULE_DIR) + "/faults.so");
  if (!faults.ok()) {
    std::fprintf(stderr, "daemon_bench: %s\n", faults.status().ToString().c_str());
    return 1;
  }
  const auto call = [&](const char* function) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(faults->id());
    request.mutable_call()->set_function(function);
    const auto start = Clock::now();
    (void)client->TimeEvaluate(request);
    return Ms(Clock::now() - start);
  };
  for (int i = 0; i < 20; ++i) call("succeeds");

  // A job after a crash pays for a new worker (spawn, load the module); a job after a job
  // does not. Their difference is the restart.
  std::vector<double> normal, after_crash, crash;
  for (int i = 0; i < 50; ++i) {
    normal.push_back(call("succeeds"));
    crash.push_back(call("segfault"));
    after_crash.push_back(call("succeeds"));
  }
  const double normal_ms = report::Median(normal);
  const double after_ms = report::Median(after_crash);
  const double crash_ms = report::Median(crash);

  // Throughput: 400 small jobs back to back, then the same with one crash in ten.
  const auto run = [&](int crash_every) {
    const auto start = Clock::now();
    for (int i = 0; i < 400; ++i)
      call(crash_every > 0 && i % crash_every == 0 ? "segfault" : "succeeds");
    return 400 / std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double clean = run(0);
  const double mixed = run(10);

  std::printf("%-44s %12s %12s %8s\n", "benchmark", "value", "reference", "ratio");
  std::printf("%-44s %9.3f ms %9.3f ms %8.2f\n", "job after a crash vs after a job (median)",
              after_ms, normal_ms, after_ms / normal_ms);
  std::printf("%-44s %9.3f ms %12s %8s\n", "worker restart (the difference); goal < 50 ms",
              after_ms - normal_ms, "", after_ms - normal_ms < 50 ? "met" : "NOT met");
  std::printf("%-44s %9.3f ms %9.3f ms %8.2f\n", "crashing job vs good job (median)", crash_ms,
              normal_ms, crash_ms / normal_ms);
  std::printf("%-44s %8.0f /s %8.0f /s %8.2f\n", "jobs/s with 1 crash in 10 vs none", mixed, clean,
              mixed / clean);
  return 0;
}
