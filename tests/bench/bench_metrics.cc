// Section 9 of kprof_bench: what a flood of /metrics scrapes does to a measurement. A 200 us
// spin's median on a daemon whose /metrics four threads scrape as fast as they are answered,
// against the same daemon unscraped, in rounds of three in a turned order (quiet, flooded, quiet
// again: the floor this host's noise sets on the comparison).
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "http_get.h"
#include "report/statistics.h"
#include "temp_dir.h"

namespace kprof::bench {

void ScrapeFlood() {
  kprof::testing::TempDir dir;
  kprof::testing::Daemon daemon;
  if (!daemon.Start(dir.path() + "/cache", {"--metrics-listen", "127.0.0.1:0"})) {
    Fail("kprofd with --metrics-listen did not start");
  }
  auto client = Must(kprof::client::Client::Connect(daemon.target()), "connect");
  const std::string metrics = Must(client->Info(), "info").metrics();
  kprof::v1::TimeEvaluateRequest spin = TimeRequest("builtin", "spin_us", {"float64:200"});
  spin.set_repeat(1000);  // 0.2 s a run: the flood is paced, 100 ms a scrape
  (void)Must(client->TimeEvaluate(spin), "warm-up");
  std::atomic<bool> flooding{false}, stop{false};
  std::atomic<int64_t> scrapes{0};
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      while (!stop) {
        if (!flooding) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        // Counted when it began and ended within a flooded run.
        if (!kprof::testing::HttpGet(metrics, "/metrics").empty() && flooding) ++scrapes;
      }
    });
  }
  std::vector<double> ratios, floors, flooded;
  double flood_seconds = 0;
  for (int round = 0; round < 9; ++round) {
    double median[3] = {0, 0, 0};  // quiet, flooded, quiet again
    for (int k = 0; k < 3; ++k) {
      const int which = (round + k) % 3;
      flooding = which == 1;
      const auto start = Clock::now();
      median[which] = Must(client->TimeEvaluate(spin), "spin").statistics().median();
      if (which == 1) flood_seconds += Seconds(Clock::now() - start);
      flooding = false;
    }
    ratios.push_back(median[1] / median[0]);
    floors.push_back(median[2] / median[0]);
    flooded.push_back(median[1]);
  }
  stop = true;
  for (std::thread& t : scrapers) t.join();
  const double ratio = report::Median(ratios), floor = report::Median(floors);
  const double allowed = std::max(0.02, std::fabs(floor - 1));
  Add("metrics", "spin_us(200) median under a /metrics scrape flood", Us(report::Median(flooded)),
      absl::StrFormat("unscraped (A/A %.3f; %.0f scrapes/s)", floor,
                      static_cast<double>(scrapes) / flood_seconds),
      ratio,
      absl::StrFormat("within %.1f%%: ", allowed * 100) + Met(std::fabs(ratio - 1) <= allowed));
}

}  // namespace kprof::bench
