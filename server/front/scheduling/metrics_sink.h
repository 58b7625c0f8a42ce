// What the daemon's parts report as it happens, for its Prometheus metrics (DaemonMetrics):
// each call cheap and safe from any thread. The parts hold a pointer that may be null (no
// --metrics-listen, or a test's executor).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/device.h"

namespace kprof::server {

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;

  // A job of `kind` ("time_evaluate", "profile_function", "profile") ended with `code` after
  // waiting `queue_wait` and running `execution`; `client` as the daemon names clients (a
  // token's label, a certificate's subject, "local"), never a token.
  virtual void JobDone(const base::Device& device, std::string_view kind, absl::StatusCode code,
                       const std::string& client, absl::Duration queue_wait,
                       absl::Duration execution) = 0;

  // A worker process started on `device` because of `cause`: "new" (a client's first, or
  // after its last one ended idle), "crash", "timeout", "recycle" (it was disturbed) or
  // "cancel" (its running job was cancelled).
  virtual void WorkerStarted(const base::Device& device, std::string_view cause) = 0;
};

}  // namespace kprof::server
