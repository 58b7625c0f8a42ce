// Section 1 of kprof_bench: builtin kernels timed through kprofd against Google Benchmark
// in-process, on the same placement of the same arguments, on the same CPU after the same
// warm-up, their repetitions interleaved; then how far the tensors' placement alone moves a
// kernel, and where a randomized layout's median falls in that range.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "core/args/arguments.h"
#include "core/modules/builtin_module.h"
#include "core/modules/shared_library.h"
#include "report/statistics.h"

namespace kprof::bench {
namespace {

using kprof::report::Median;

// Collects each repetition's real time per iteration from Google Benchmark.
class Collector final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred) {
        seconds_.push_back(run.GetAdjustedRealTime() * 1e-9);  // kNanosecond
      }
    }
  }
  std::vector<double> Take() { return std::move(seconds_); }

 private:
  std::vector<double> seconds_;
};

struct Kernel {
  std::string label, function;
  std::vector<std::string> args;
};

const std::vector<Kernel>& Kernels() {
  static const std::vector<Kernel> kernels = {
      {"spin_us(100)", "spin_us", {"float64:100"}},
      {"copy 64 MiB", "copy", {"float32[16777216]", "float32[16777216]:random"}},
      {"matmul 256x256",
       "matmul",
       {"float32[256, 256]", "float32[256, 256]:random", "float32[256, 256]:random"}}};
  return kernels;
}

// "+0 +256 +512": the offsets past a page boundary.
std::string Offsets(const std::vector<uint64_t>& offsets) {
  return absl::StrCat("+", absl::StrJoin(offsets, " +"));
}

std::vector<uint64_t> OffsetsOf(const std::vector<kprof::core::TensorPlace>& places) {
  std::vector<uint64_t> offsets;
  for (const auto& p : places) offsets.push_back(p.offset);
  return offsets;
}

std::vector<uint64_t> OffsetsOf(const kprof::v1::TimeEvaluateResponse& r) {
  std::vector<uint64_t> offsets;
  for (const auto& p : r.placement()) offsets.push_back(p.offset());
  return offsets;
}

// Runs `fn` on this CPU for `ms`: this VM's CPUs run at about half speed for the first ~200 ms
// of work after being idle (found here: the first matmuls take 3.5 ms, then 1.8 ms).
void Warm(const kprof::core::ModuleFunction& fn, kprof::core::Arguments& args, int ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) fn.function(args.tensors(), args.size());
}

// One accuracy row: `fn` in this process under Google Benchmark against `module_id`'s function of
// the same name timed by kprofd, on the same placement of the same arguments.
void CompareWithGoogleBenchmark(kprof::client::Client& client, const Kernel& k,
                                const kprof::core::ModuleFunction& fn, const std::string& module_id,
                                const std::string& label, double tolerance) {
  // Each round is one Google Benchmark repetition, then one kprofd repeat (ABAB), each of at
  // least 10 ms after 10 ms of the kernel on this CPU, which the daemon's worker shares (see
  // main): a slow spell of the machine falls on both. This VM's speed moves some 5% from one
  // 100 ms to the next; 11 rounds of 100 ms left the medians' ratio 1-3% from 1 from run to run,
  // 101 rounds of 10 ms within 0.5%.
  constexpr int kRounds = 101, kWarmMs = 10, kFreshWarmMs = 20;
  constexpr double kMinSeconds = 0.01;
  // The arguments made and placed as the worker makes them (the default placement: argument k
  // at k × 256 past a page boundary), and made afresh every round as the worker makes them for
  // every job: which physical pages a buffer gets moves a memory-bound kernel by a few percent
  // (DRAM channels and banks follow physical addresses), so both sides sample many.
  std::vector<kprof::core::ArgSpec> specs;
  for (const std::string& a : k.args) specs.push_back(Must(kprof::core::ParseArgSpec(a), "spec"));
  const auto allocate = [&] {
    return Must(kprof::core::Arguments::Allocate(specs, 0, {kprof::base::DeviceType::kCpu, 0},
                                                 kprof::core::ArgumentLimits{},
                                                 kprof::core::PlacementOptions{}),
                "arguments");
  };
  std::unique_ptr<kprof::core::Arguments> args;
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark(label.c_str(),
                               [&](benchmark::State& state) {
                                 for (auto _ : state) fn.function(args->tensors(), args->size());
                               })
      ->Unit(benchmark::kNanosecond)
      ->UseRealTime()
      ->MinTime(kMinSeconds)
      ->Repetitions(1);
  auto request = TimeRequest(module_id, k.function, k.args);
  request.set_repeat(1);
  request.set_min_repeat_ms(kMinSeconds * 1e3);
  request.set_warmup_ms(kFreshWarmMs);
  std::vector<double> local, remote;
  std::vector<uint64_t> remote_offsets;
  // The CPU is warmed on arguments of its own; each side measures arguments fresh to it, made
  // right before (kprofd's worker makes a job's arguments as it starts the job), after 20 ms of
  // calls on them (warmup_ms): this VM runs a memory-bound kernel on freshly allocated memory
  // slower for its first passes (a copy of 64 MiB 10% slower on its second call than after
  // five).
  const std::unique_ptr<kprof::core::Arguments> warm = allocate();
  Warm(fn, *warm, 300);
  for (int round = 0; round < kRounds; ++round) {
    Warm(fn, *warm, kWarmMs);
    args.reset();  // its pages go back before the next are taken, as in the worker
    args = allocate();
    Warm(fn, *args, kFreshWarmMs);
    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);
    for (double t : collector.Take()) local.push_back(t);
    Warm(fn, *warm, kWarmMs);
    const auto r = Must(client.TimeEvaluate(request, absl::Minutes(5)), label.c_str());
    remote.insert(remote.end(), r.seconds_per_call().begin(), r.seconds_per_call().end());
    remote_offsets = OffsetsOf(r);
  }
  const std::vector<uint64_t> local_offsets = OffsetsOf(args->Placement());
  const double ratio = Median(remote) / Median(local);
  const std::string placement =
      remote_offsets == local_offsets
          ? Offsets(local_offsets)
          : absl::StrCat("kprofd ", Offsets(remote_offsets), ", NOT ", Offsets(local_offsets));
  Add("accuracy", absl::StrCat(label, " median, kprofd (", placement, ")"), Us(Median(remote)),
      "Google Benchmark " + Us(Median(local)), ratio,
      tolerance > 0
          ? absl::StrFormat("1.00 +- %.2f: %s", tolerance, Met(std::abs(ratio - 1) <= tolerance))
          : "");
}

}  // namespace

void Accuracy(kprof::client::Client& client) {
  // Both sides run one shared object: the kernels' code at the same offsets within their cache
  // lines (a module is mapped at a page boundary), as the data is placed the same way.
  const std::string path = std::string(KPROF_TEST_MODULE_DIR) + "/bench_kernels.so";
  const auto module = Must(kprof::core::SharedLibraryModule::OpenFile(path), "bench_kernels.so");
  const std::string id = Must(client.LoadModuleFile(path), "upload bench_kernels.so").id();
  for (const Kernel& k : Kernels()) {
    const double tolerance = k.function == "copy" ? 0.03 : 0.01;
    CompareWithGoogleBenchmark(client, k, Must(module->GetFunction(k.function), "kernel"), id,
                               k.label, tolerance);
  }
  // The builtin: the same source compiled into two programs, kprofd-worker and this one, its
  // loops at different offsets within their cache lines. No goal: this row shows what code
  // placement alone does (docs/BENCHMARKS.md).
  const Kernel& matmul = Kernels()[2];
  CompareWithGoogleBenchmark(
      client, matmul, Must(kprof::core::BuiltinModule().GetFunction(matmul.function), "builtin"),
      "builtin", "  builtin " + matmul.label + ", each program's copy", 0);
}

void PlacementSweep(kprof::client::Client& client) {
  const Kernel& matmul = Kernels()[2];
  // C = A × B: the output's offset against each input's decides whether loads of a row of B
  // come right behind stores to a row of C at the same low 12 address bits.
  const std::vector<std::vector<uint32_t>> placements = {
      {0, 0, 0},     {0, 256, 512},   {0, 0, 64},      {64, 0, 0},
      {0, 0, 1024},  {1024, 0, 0},    {0, 2048, 0},    {2048, 0, 0},
      {512, 0, 448}, {128, 1024, 64}, {3968, 64, 128}, {256, 512, 192}};
  const std::string id =
      Must(client.LoadModuleFile(std::string(KPROF_TEST_MODULE_DIR) + "/bench_kernels.so"),
           "upload bench_kernels.so")
          .id();
  auto fixed = TimeRequest(id, matmul.function, matmul.args);
  fixed.set_repeat(1);
  fixed.set_min_repeat_ms(10);
  auto randomized = fixed;
  randomized.set_repeat(3);
  randomized.set_randomize_layout(true);
  // Rounds through every placement and then three random layouts, so that a slow spell of the
  // machine falls on all of them rather than on one.
  constexpr int kRounds = 9;
  std::vector<std::vector<double>> by_placement(placements.size());
  std::vector<double> random_layouts;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t p = 0; p < placements.size(); ++p) {
      fixed.clear_tensor_offset();
      for (uint32_t o : placements[p]) fixed.add_tensor_offset(o);
      const auto r = Must(client.TimeEvaluate(fixed, absl::Minutes(5)), "sweep");
      by_placement[p].push_back(r.seconds_per_call(0));
    }
    randomized.set_seed(static_cast<uint64_t>(round));  // other layouts each round
    const auto r = Must(client.TimeEvaluate(randomized, absl::Minutes(5)), "randomized");
    random_layouts.insert(random_layouts.end(), r.seconds_per_call().begin(),
                          r.seconds_per_call().end());
  }
  std::vector<double> medians;
  for (const auto& times : by_placement) medians.push_back(Median(times));
  const auto low = std::min_element(medians.begin(), medians.end()) - medians.begin();
  const auto high = std::max_element(medians.begin(), medians.end()) - medians.begin();
  const auto at = [&](size_t p) {
    return Offsets(std::vector<uint64_t>(placements[p].begin(), placements[p].end()));
  };
  Add("placement",
      absl::StrCat(matmul.label, ": slowest of ", placements.size(), " placements (",
                   at(static_cast<size_t>(high)), ")"),
      Us(medians[high]),
      absl::StrCat("fastest (", at(static_cast<size_t>(low)), ") ", Us(medians[low])),
      medians[high] / medians[low]);
  const double median = Median(random_layouts);
  Add("placement", absl::StrCat("  median over ", random_layouts.size(), " random layouts"),
      Us(median), absl::StrCat("sweep ", Us(medians[low]), " .. ", Us(medians[high])),
      median / Median(medians),
      absl::StrCat("within the sweep: ", Met(median >= medians[low] && median <= medians[high])));
}

}  // namespace kprof::bench
