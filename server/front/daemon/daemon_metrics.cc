#include "server/front/daemon/daemon_metrics.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/device.h"
#include "base/status_macros.h"
#include "core/host/placement.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kprof::server {

namespace {

// The HTTP server's threads: a connection that sends nothing, or half a request, holds one for
// kRequestTimeout at most, and the others go on serving.
constexpr int kServerThreads = 4;
constexpr char kRequestTimeoutMs[] = "2000";
// Scrapes are served one at a time, this far apart at least: Prometheus scrapes every few
// seconds, and a flood of them takes no more of the host than ten a second do.
constexpr auto kScrapeGap = std::chrono::milliseconds(100);

// From 100 us (a quick job's wait) to a minute (the default --job-timeout).
const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
      0.1,  0.25,   0.5,  1,    2.5,    5,    10,   30,    60};
  return *buckets;
}

}  // namespace

class DaemonMetrics::Families {
 public:
  explicit Families(prometheus::Registry& r)
      : jobs(prometheus::BuildCounter()
                 .Name("kprofd_jobs_total")
                 .Help("Jobs that reached a worker and ended, by device, kind (time_evaluate, "
                       "profile_function, profile) and result (the status code's name)")
                 .Register(r)),
        client_jobs(prometheus::BuildCounter()
                        .Name("kprofd_client_jobs_total")
                        .Help("Jobs ended, by client (a token's label, a client certificate's "
                              "subject, or local)")
                        .Register(r)),
        queue_wait(prometheus::BuildHistogram()
                       .Name("kprofd_queue_wait_seconds")
                       .Help("How long jobs waited for their device, by device")
                       .Register(r)),
        execution(prometheus::BuildHistogram()
                      .Name("kprofd_execution_seconds")
                      .Help("How long jobs ran on their device, by device")
                      .Register(r)),
        worker_starts(prometheus::BuildCounter()
                          .Name("kprofd_worker_starts_total")
                          .Help("Worker processes started, by device and cause (new, crash, "
                                "timeout, recycle, cancel)")
                          .Register(r)),
        queue_length(prometheus::BuildGauge()
                         .Name("kprofd_queue_length")
                         .Help("Jobs waiting for their device now, by device")
                         .Register(r)),
        busy(prometheus::BuildGauge()
                 .Name("kprofd_device_busy")
                 .Help("1 while a job runs on the device")
                 .Register(r)),
        workers(prometheus::BuildGauge()
                    .Name("kprofd_workers")
                    .Help("Worker processes running now, by device")
                    .Register(r)),
        cache_bytes(prometheus::BuildGauge()
                        .Name("kprofd_module_cache_bytes")
                        .Help("Bytes of the modules in the cache")
                        .Register(r)
                        .Add({})),
        cache_modules(prometheus::BuildGauge()
                          .Name("kprofd_module_cache_modules")
                          .Help("Modules in the cache")
                          .Register(r)
                          .Add({})),
        evictions(prometheus::BuildCounter()
                      .Name("kprofd_module_cache_evictions_total")
                      .Help("Modules evicted from the cache to make room")
                      .Register(r)
                      .Add({})),
        uploads(prometheus::BuildCounter()
                    .Name("kprofd_uploads_total")
                    .Help("Modules received (uploaded, or carried on a batch stream)")
                    .Register(r)
                    .Add({})),
        upload_bytes(prometheus::BuildCounter()
                         .Name("kprofd_upload_bytes_total")
                         .Help("Bytes of the modules received")
                         .Register(r)
                         .Add({})),
        batch_streams(prometheus::BuildGauge()
                          .Name("kprofd_batch_streams_open")
                          .Help("MeasureBatch streams open now")
                          .Register(r)
                          .Add({})) {}

  prometheus::Family<prometheus::Counter>& jobs;
  prometheus::Family<prometheus::Counter>& client_jobs;
  prometheus::Family<prometheus::Histogram>& queue_wait;
  prometheus::Family<prometheus::Histogram>& execution;
  prometheus::Family<prometheus::Counter>& worker_starts;
  prometheus::Family<prometheus::Gauge>& queue_length;
  prometheus::Family<prometheus::Gauge>& busy;
  prometheus::Family<prometheus::Gauge>& workers;
  prometheus::Gauge& cache_bytes;
  prometheus::Gauge& cache_modules;
  prometheus::Counter& evictions;
  prometheus::Counter& uploads;
  prometheus::Counter& upload_bytes;
  prometheus::Gauge& batch_streams;
};

// What the HTTP server collects: the levels read now, then every family.
class DaemonMetrics::Scrape final : public prometheus::Collectable {
 public:
  Scrape(std::shared_ptr<prometheus::Registry> registry, Families* families,
         std::function<DaemonLevels()> read_levels)
      : registry_(std::move(registry)), f_(families), read_levels_(std::move(read_levels)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> one_at_a_time(pace_);
    std::this_thread::sleep_until(last_ + kScrapeGap);
    last_ = std::chrono::steady_clock::now();
    const DaemonLevels levels = read_levels_();
    for (const DaemonLevels::Device& d : levels.devices) {
      f_->queue_length.Add({{"device", d.device}}).Set(d.queue_length);
      f_->busy.Add({{"device", d.device}}).Set(d.busy ? 1 : 0);
      f_->workers.Add({{"device", d.device}}).Set(d.workers);
    }
    f_->cache_bytes.Set(static_cast<double>(levels.cache_bytes));
    f_->cache_modules.Set(static_cast<double>(levels.cache_modules));
    f_->batch_streams.Set(levels.batch_streams);
    // Counters the daemon keeps itself: moved up to its count (they only grow).
    const auto catch_up = [](prometheus::Counter& counter, double total) {
      if (total > counter.Value()) counter.Increment(total - counter.Value());
    };
    catch_up(f_->evictions, static_cast<double>(levels.evictions));
    catch_up(f_->uploads, static_cast<double>(levels.uploads));
    catch_up(f_->upload_bytes, static_cast<double>(levels.upload_bytes));
    return registry_->Collect();
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  Families* f_;
  std::function<DaemonLevels()> read_levels_;
  mutable std::mutex pace_;
  mutable std::chrono::steady_clock::time_point last_;
};

absl::StatusOr<std::string> DaemonMetrics::Normalize(const std::string& address) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? "127.0.0.1" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? address : address.substr(colon + 1);
  int number = -1;
  if (host.empty() || !absl::SimpleAtoi(port, &number) || number < 0 || number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen '", address,
                     "' is not an address to listen on (accepted: PORT, which is "
                     "127.0.0.1:PORT, or HOST:PORT, e.g. 127.0.0.1:9178)"));
  }
  return absl::StrCat(host, ":", number);
}

namespace {

// The HTTP server on `where`, its threads started from one that stands aside (nice 19, off
// `measuring_cpus`): they inherit both, and a scrape waits for the measurements, not the other
// way round.
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartServer(
    const std::string& where, const std::vector<int>& measuring_cpus) {
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> server;
  std::thread starter([&] {
    core::StandAside(measuring_cpus, /*lowest=*/true);
    try {
      server = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
          "listening_ports", where, "num_threads", std::to_string(kServerThreads),
          "request_timeout_ms", kRequestTimeoutMs, "enable_keep_alive", "no"});
    } catch (const std::exception& e) {
      server =
          absl::UnavailableError(absl::StrCat("cannot serve metrics on ", where, ": ", e.what()));
    }
  });
  starter.join();
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Serve(
    const std::string& address, std::function<DaemonLevels()> read_levels,
    const std::vector<int>& measuring_cpus) {
  std::unique_ptr<DaemonMetrics> metrics(new DaemonMetrics());
  KPROF_ASSIGN_OR_RETURN(std::string where, Normalize(address));
  metrics->registry_ = std::make_shared<prometheus::Registry>();
  metrics->families_ = std::make_unique<Families>(*metrics->registry_);
  metrics->scrape_ = std::make_shared<Scrape>(metrics->registry_, metrics->families_.get(),
                                              std::move(read_levels));
  KPROF_ASSIGN_OR_RETURN(metrics->exposer_, StartServer(where, measuring_cpus));
  metrics->exposer_->RegisterCollectable(metrics->scrape_);
  const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", where));
  metrics->address_ = absl::StrCat(where.substr(0, where.rfind(':')), ":", ports.front());
  return metrics;
}

DaemonMetrics::~DaemonMetrics() { Stop(); }

void DaemonMetrics::Stop() {
  exposer_.reset();  // joins the HTTP server's threads: no scrape runs from here on
}

void DaemonMetrics::JobDone(const base::Device& device, std::string_view kind,
                            absl::StatusCode code, const std::string& client,
                            absl::Duration queue_wait, absl::Duration execution) {
  const std::string spec = base::DeviceSpec(device);
  families_->jobs
      .Add({{"device", spec},
            {"kind", std::string(kind)},
            {"result", absl::StatusCodeToString(code)}})
      .Increment();
  families_->client_jobs.Add({{"client", client}}).Increment();
  families_->queue_wait.Add({{"device", spec}}, Buckets())
      .Observe(absl::ToDoubleSeconds(queue_wait));
  families_->execution.Add({{"device", spec}}, Buckets()).Observe(absl::ToDoubleSeconds(execution));
}

void DaemonMetrics::WorkerStarted(const base::Device& device, std::string_view cause) {
  families_->worker_starts
      .Add({{"device", base::DeviceSpec(device)}, {"cause", std::string(cause)}})
      .Increment();
}

}  // namespace kprof::server
