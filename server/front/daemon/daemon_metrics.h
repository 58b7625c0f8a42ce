// kprofd's Prometheus metrics (--metrics-listen), served on /metrics in Prometheus's text
// format by prometheus-cpp's embedded HTTP server, every name prefixed kprofd_:
//
//   kprofd_jobs_total{device,kind,result}          jobs ended, by status code name
//   kprofd_client_jobs_total{client}               jobs ended, by client (never a token)
//   kprofd_queue_wait_seconds{device}              histogram: how long jobs waited
//   kprofd_execution_seconds{device}               histogram: how long jobs ran
//   kprofd_worker_starts_total{device,cause}       new, crash, timeout, recycle
//   kprofd_queue_length{device}                    jobs waiting now
//   kprofd_device_busy{device}                     1 while a job runs
//   kprofd_workers{device}                         worker processes now
//   kprofd_module_cache_bytes, kprofd_module_cache_modules, kprofd_module_cache_evictions_total
//   kprofd_uploads_total, kprofd_upload_bytes_total
//   kprofd_batch_streams_open
//
// Events come through MetricsSink as they happen; the levels (queues, cache, streams) are read
// from the daemon's parts at each scrape, by `read_levels`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/front/scheduling/metrics_sink.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace kprof::server {

// What a scrape reads of the daemon's state at that moment.
struct DaemonLevels {
  struct Device {
    std::string device;  // "cpu:0"
    int queue_length = 0;
    bool busy = false;
    int workers = 0;
  };
  std::vector<Device> devices;
  uint64_t cache_bytes = 0;
  uint64_t cache_modules = 0;
  int64_t evictions = 0;
  int64_t uploads = 0;
  uint64_t upload_bytes = 0;
  int batch_streams = 0;
};

class DaemonMetrics final : public MetricsSink {
 public:
  // Serves /metrics on `address`: "HOST:PORT", or "PORT" for 127.0.0.1:PORT (port 0: any free
  // one). INVALID_ARGUMENT for an address it cannot read, UNAVAILABLE when it cannot listen.
  // The server's threads run at nice 19 and off `measuring_cpus` (--pin-cpus) where the daemon
  // has other CPUs; a connection that sends nothing holds one of four for 2 s at most; scrapes
  // are served one at a time, 100 ms apart at least.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Serve(
      const std::string& address, std::function<DaemonLevels()> read_levels,
      const std::vector<int>& measuring_cpus = {});
  ~DaemonMetrics() override;

  // "127.0.0.1:9178": where it listens, with the port it got.
  const std::string& address() const { return address_; }

  // Stops serving: no scrape reads the daemon's parts from here on (call before they go).
  void Stop();

  void JobDone(const base::Device& device, std::string_view kind, absl::StatusCode code,
               const std::string& client, absl::Duration queue_wait,
               absl::Duration execution) override;
  void WorkerStarted(const base::Device& device, std::string_view cause) override;

  // The address --metrics-listen names: "PORT" becomes "127.0.0.1:PORT". INVALID_ARGUMENT
  // naming it when it is neither.
  static absl::StatusOr<std::string> Normalize(const std::string& address);

 private:
  class Families;
  class Scrape;
  DaemonMetrics() = default;

  std::string address_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  std::shared_ptr<Scrape> scrape_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace kprof::server
