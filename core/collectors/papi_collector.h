// PapiCollector ("papi:EVENT,EVENT..."): hardware counters through PAPI, by preset
// (PAPI_TOT_CYC, PAPI_L2_DCM) or native event name. One event set per device, created on the
// thread that runs the function, counts as count metrics named by event. PAPI is initialised
// once per process, thread-safely.
//
// An event this host cannot count — no PMU in a VM, a component disabled, a name PAPI does not
// know — is FAILED_PRECONDITION at Init naming the event, PAPI's error and the component's
// reason ("component perf_event disabled: ..."), never a crash or a zero.
//
// Events count in user and kernel mode where the kernel allows it (root, CAP_PERFMON,
// perf_event_paranoid <= 1; PAPI's own default is user mode only), else in user mode, where
// perf's kernel-side software events (perf::CONTEXT-SWITCHES, perf::PAGE-FAULTS...) would read
// 0 and are refused at Init, naming the event and the perf collector that counts them. "papi
// domain" says which domain was counted.
//
// Built only with KPROF_WITH_PAPI (kprof/config.h: KPROF_HAS_PAPI); otherwise every use says
// the build has no PAPI.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/collectors/metric_collector.h"

namespace kprof::core {

struct PapiComponent {
  std::string name;  // "perf_event", "perf_event_uncore", ...
  bool enabled = false;
  std::string reason;  // why disabled
};

// PAPI's library state: OK once initialised, else why not (including "built without PAPI").
absl::Status PapiStatus();

// PAPI's components, in its order; empty when PAPI is unavailable.
std::vector<PapiComponent> PapiComponents();

// The preset events this host can count (PAPI_query_event succeeds, and there is a CPU PMU to
// count them), by name.
std::vector<std::string> PapiAvailablePresets();

// The metric saying which domain the events counted: "user and kernel", or "user (...)".
inline constexpr std::string_view kPapiDomainMetric = "papi domain";

class PapiCollector final : public MetricCollector {
 public:
  // INVALID_ARGUMENT without events or with more than 32; FAILED_PRECONDITION when the build
  // or the host has no PAPI.
  static absl::StatusOr<std::unique_ptr<PapiCollector>> Create(std::vector<std::string> events);
  ~PapiCollector() override;

  std::string_view name() const override { return "papi"; }

  // Creates the event sets on the calling thread; FAILED_PRECONDITION naming the first event
  // that cannot be counted and why.
  absl::Status Init(const std::vector<base::Device>& devices) override;

  // Counts on the calling thread, which must be the one that called Init; nullptr for devices
  // other than the CPU. Regions may nest; each counts its own span.
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;

 private:
  explicit PapiCollector(std::vector<std::string> events) : events_(std::move(events)) {}

  std::vector<std::string> events_;
  int event_set_ = -1;   // PAPI_NULL until Init
  int active_ = 0;       // regions measuring; the event set runs while there are any
  bool kernel_ = false;  // counting in kernel mode too (PerfCountsTheKernel)
};

}  // namespace kprof::core
