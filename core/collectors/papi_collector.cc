#include "core/collectors/papi_collector.h"

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collectors/perf_collector.h"
#include "kprof/config.h"

#if KPROF_HAS_PAPI
#include <papi.h>
#endif

namespace kprof::core {
namespace {

constexpr size_t kMaxEvents = 32;
constexpr size_t kMaxEventName = 1024;  // PAPI_HUGE_STR_LEN

#if KPROF_HAS_PAPI

unsigned long ThreadId() { return static_cast<unsigned long>(pthread_self()); }  // NOLINT

// Whether PAPI's event sets count kernel mode too (set once, by Initialised).
bool papi_counts_kernel = false;

// PAPI_library_init and PAPI_thread_init, once per process; the result is kept.
const absl::Status& Initialised() {
  static std::once_flag once;
  static absl::Status status;
  std::call_once(once, [] {
    const int version = PAPI_library_init(PAPI_VER_CURRENT);
    if (version != PAPI_VER_CURRENT) {
      status = absl::FailedPreconditionError(
          version < 0 ? absl::StrCat("PAPI could not initialise: ", PAPI_strerror(version))
                      : absl::StrCat("PAPI library version ", version,
                                     " differs from the headers kprofd was built with"));
      return;
    }
    if (const int error = PAPI_thread_init(&ThreadId); error != PAPI_OK) {
      status = absl::FailedPreconditionError(
          absl::StrCat("PAPI thread support failed: ", PAPI_strerror(error)));
      return;
    }
    // Every domain the kernel lets this process count, for every event set made from now on:
    // PAPI's default is user mode only, where what the kernel does for the thread reads 0.
    // (PAPI_set_opt(PAPI_DOMAIN) on a set refuses perf_event's software events.) PAPI may
    // offer less than the kernel allows (it judges by perf_event_paranoid and the uid, not
    // CAP_PERFMON): then user mode, said as such.
    const PAPI_component_info_t* cpu = PAPI_get_component_info(0);
    const int available = cpu != nullptr ? cpu->available_domains : PAPI_DOM_USER;
    if (PerfCountsTheKernel() && (available & PAPI_DOM_KERNEL) != 0 &&
        PAPI_set_domain(PAPI_DOM_USER | PAPI_DOM_KERNEL) == PAPI_OK) {
      papi_counts_kernel = true;
    }
  });
  return status;
}

std::string ComponentReason(int component) {
  const PAPI_component_info_t* info = PAPI_get_component_info(component);
  if (info == nullptr) return "";
  if (info->disabled) {
    return absl::StrCat("component ", info->name, " disabled: ", info->disabled_reason);
  }
  // PAPI keeps its presets on hosts whose kernel has no CPU PMU; adding one fails there.
  if (std::string_view(info->name).rfind("perf_event", 0) == 0 && !HostHasCpuPmu()) {
    return absl::StrCat("component ", info->name,
                        " is enabled, but this host has no CPU performance-monitoring unit (a VM "
                        "without PMU passthrough?): only software events such as "
                        "perf::TASK-CLOCK count");
  }
  return absl::StrCat("component ", info->name, " is enabled");
}

// The disabled CPU components' reasons, for an event PAPI does not even know: without a PMU,
// the presets vanish with the perf_event component.
std::string DisabledCpuComponents() {
  std::vector<std::string> reasons;
  for (const PapiComponent& c : PapiComponents()) {
    if (!c.enabled && c.name.rfind("perf_event", 0) == 0) {
      reasons.push_back(absl::StrCat("component ", c.name, " disabled: ", c.reason));
    }
  }
  return absl::StrJoin(reasons, "; ");
}

absl::Status EventError(const std::string& event, std::string_view call, int error,
                        const std::string& reason) {
  std::string message =
      absl::StrCat("PAPI event '", event, "' cannot be counted on this host: ", std::string(call),
                   ": ", PAPI_strerror(error));
  if (!reason.empty()) absl::StrAppend(&message, " (", reason, ")");
  return absl::FailedPreconditionError(message);
}

using Counts = std::vector<long long>;  // NOLINT(google-runtime-int): PAPI's type

// perf's software events that the kernel takes in kernel mode, by libpfm4's names and aliases
// for them (the part after "perf::", before any ":modifier", upper-cased).
bool IsKernelSidePerfEvent(const std::string& event) {
  // libpfm4 also finds perf's events without their "perf::" prefix.
  const size_t start = event.rfind("perf::", 0) == 0 ? 6 : 0;
  std::string name = event.substr(start, event.find(':', start) - start);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::string_view kNames[] = {"CONTEXT-SWITCHES",
                                                "CS",
                                                "PERF_COUNT_SW_CONTEXT_SWITCHES",
                                                "PAGE-FAULTS",
                                                "FAULTS",
                                                "PERF_COUNT_SW_PAGE_FAULTS",
                                                "MINOR-FAULTS",
                                                "MAJOR-FAULTS",
                                                "PERF_COUNT_SW_PAGE_FAULTS_MIN",
                                                "PERF_COUNT_SW_PAGE_FAULTS_MAJ",
                                                "CPU-MIGRATIONS",
                                                "MIGRATIONS",
                                                "PERF_COUNT_SW_CPU_MIGRATIONS"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// One region: the event set's readings at its start; the set runs while any region does, so
// regions may nest (the profiler's device totals around each call's row).
class PapiMeasurement final : public MetricCollector::Measurement {
 public:
  PapiMeasurement(int event_set, const std::vector<std::string>* events, int* active, Counts start,
                  std::string domain)
      : event_set_(event_set),
        events_(events),
        active_(active),
        start_(std::move(start)),
        domain_(std::move(domain)) {}
  ~PapiMeasurement() override {
    if (!stopped_) Release();
  }

  absl::StatusOr<report::MetricMap> Stop() override {
    Counts now(events_->size());
    const int error = PAPI_read(event_set_, now.data());
    stopped_ = true;
    Release();
    if (error != PAPI_OK) {
      return absl::InternalError(absl::StrCat("PAPI_read: ", PAPI_strerror(error)));
    }
    report::MetricMap metrics;
    for (size_t i = 0; i < events_->size(); ++i) {
      metrics[(*events_)[i]] = report::Count{static_cast<int64_t>(now[i] - start_[i])};
    }
    metrics[std::string(kPapiDomainMetric)] = domain_;
    return metrics;
  }

 private:
  void Release() {
    if (--*active_ == 0) {
      Counts ignored(events_->size());
      PAPI_stop(event_set_, ignored.data());
    }
  }

  int event_set_;
  const std::vector<std::string>* events_;
  int* active_;
  Counts start_;
  std::string domain_;
  bool stopped_ = false;
};

#endif  // KPROF_HAS_PAPI

}  // namespace

absl::Status PapiStatus() {
#if KPROF_HAS_PAPI
  return Initialised();
#else
  return absl::FailedPreconditionError(
      "this kprofd was built without PAPI (install libpapi-dev and build with KPROF_WITH_PAPI)");
#endif
}

std::vector<PapiComponent> PapiComponents() {
  std::vector<PapiComponent> components;
#if KPROF_HAS_PAPI
  if (!Initialised().ok()) return components;
  for (int i = 0; i < PAPI_num_components(); ++i) {
    const PAPI_component_info_t* info = PAPI_get_component_info(i);
    if (info == nullptr) continue;
    components.push_back({info->name, info->disabled == 0,
                          info->disabled == 0 ? "" : std::string(info->disabled_reason)});
  }
#endif
  return components;
}

std::vector<std::string> PapiAvailablePresets() {
  std::vector<std::string> presets;
#if KPROF_HAS_PAPI
  // PAPI lists presets from the processor model alone; without a PMU none of them counts.
  if (!Initialised().ok() || !HostHasCpuPmu()) return presets;
  int code = PAPI_PRESET_MASK;
  if (PAPI_enum_event(&code, PAPI_ENUM_FIRST) != PAPI_OK) return presets;
  do {
    char name[PAPI_MAX_STR_LEN] = {0};
    if (PAPI_query_event(code) == PAPI_OK && PAPI_event_code_to_name(code, name) == PAPI_OK) {
      presets.emplace_back(name);
    }
  } while (PAPI_enum_event(&code, PAPI_PRESET_ENUM_AVAIL) == PAPI_OK);
#endif
  return presets;
}

absl::StatusOr<std::unique_ptr<PapiCollector>> PapiCollector::Create(
    std::vector<std::string> events) {
  if (events.empty() || events.size() > kMaxEvents) {
    return absl::InvalidArgumentError(absl::StrCat("collector 'papi' takes 1 to ", kMaxEvents,
                                                   " events (papi:PAPI_TOT_CYC,PAPI_TOT_INS), got ",
                                                   events.size()));
  }
  for (const std::string& event : events) {
    if (event.size() >= kMaxEventName) {
      return absl::InvalidArgumentError(absl::StrCat("PAPI event name of ", event.size(),
                                                     " bytes (limit ", kMaxEventName - 1, ")"));
    }
  }
  if (absl::Status status = PapiStatus(); !status.ok()) return status;
  return std::unique_ptr<PapiCollector>(new PapiCollector(std::move(events)));
}

PapiCollector::~PapiCollector() {
#if KPROF_HAS_PAPI
  if (event_set_ != PAPI_NULL) {
    PAPI_cleanup_eventset(event_set_);
    PAPI_destroy_eventset(&event_set_);
  }
#endif
}

absl::Status PapiCollector::Init(const std::vector<base::Device>& devices) {
#if KPROF_HAS_PAPI
  bool cpu = false;
  for (const base::Device& d : devices) cpu = cpu || d.type == base::DeviceType::kCpu;
  if (!cpu || event_set_ != PAPI_NULL) return absl::OkStatus();
  kernel_ = papi_counts_kernel;
  if (const int error = PAPI_create_eventset(&event_set_); error != PAPI_OK) {
    event_set_ = PAPI_NULL;
    return absl::FailedPreconditionError(
        absl::StrCat("PAPI_create_eventset: ", PAPI_strerror(error)));
  }
  absl::Status status;
  std::vector<int> codes;
  for (const std::string& event : events_) {
    int code = PAPI_NULL;
    if (const int error = PAPI_event_name_to_code(event.c_str(), &code); error != PAPI_OK) {
      status = EventError(event, "PAPI_event_name_to_code", error, DisabledCpuComponents());
      break;
    }
    // PAPI counts in user mode unless told otherwise, where these read 0.
    if (!kernel_ && IsKernelSidePerfEvent(event)) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "PAPI event '", event,
          "' cannot be counted as asked: the kernel takes it in kernel mode, which "
          "perf_event_paranoid keeps this process from counting (set "
          "kernel.perf_event_paranoid to 1 or less, or give kprofd CAP_PERFMON); "
          "collector perf counts it from the thread's accounting (perf:context-switches, "
          "page-faults, minor-faults, major-faults, cpu-migrations)"));
      break;
    }
    codes.push_back(code);
  }
  for (size_t i = 0; status.ok() && i < codes.size(); ++i) {
    if (const int error = PAPI_add_event(event_set_, codes[i]); error != PAPI_OK) {
      status = EventError(events_[i], "PAPI_add_event", error,
                          ComponentReason(PAPI_get_event_component(codes[i])));
    }
  }
  if (!status.ok()) {  // no half-built set for a later Init to take as ready
    PAPI_cleanup_eventset(event_set_);
    PAPI_destroy_eventset(&event_set_);
    event_set_ = PAPI_NULL;
  }
  return status;
#else
  (void)devices;
  return PapiStatus();
#endif
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> PapiCollector::Start(
    base::Device device) {
#if KPROF_HAS_PAPI
  if (device.type != base::DeviceType::kCpu) return nullptr;
  if (event_set_ == PAPI_NULL) {
    return absl::FailedPreconditionError("collector 'papi' was not initialised for the CPU");
  }
  if (active_ == 0) {
    if (const int error = PAPI_start(event_set_); error != PAPI_OK) {
      return absl::FailedPreconditionError(absl::StrCat("PAPI_start: ", PAPI_strerror(error)));
    }
  }
  ++active_;
  Counts start(events_.size());
  if (const int error = PAPI_read(event_set_, start.data()); error != PAPI_OK) {
    if (--active_ == 0) PAPI_stop(event_set_, start.data());
    return absl::InternalError(absl::StrCat("PAPI_read: ", PAPI_strerror(error)));
  }
  return std::make_unique<PapiMeasurement>(
      event_set_, &events_, &active_, std::move(start),
      kernel_ ? "user and kernel" : "user (perf_event_paranoid excludes the kernel)");
#else
  (void)device;
  return PapiStatus();
#endif
}

}  // namespace kprof::core
