#include "core/collectors/perf_collector.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kprof::core {
namespace {

struct KnownEvent {
  const char* name;
  uint32_t type;
  uint64_t config;
};

constexpr KnownEvent kKnown[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
};

// Kernel-side counting needs perf_event_paranoid < 2 or privilege; exclude it otherwise.
bool ExcludeKernel() {
  if (geteuid() == 0) return false;
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int paranoid = 2;
  in >> paranoid;
  return paranoid >= 2;
}

}  // namespace

bool HostHasCpuPmu(const std::string& root) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name == "cpu" || name == "cpu_core" || name == "cpu_atom" || name.rfind("armv", 0) == 0) {
      return true;
    }
  }
  return false;
}

namespace {

std::string Reason(int error, uint32_t type) {
  switch (error) {
    case ENOENT:
    case EOPNOTSUPP:
      return type == PERF_TYPE_HARDWARE
                 ? "this host has no performance-monitoring unit for it (a VM without PMU "
                   "passthrough?)"
                 : "the kernel does not support it";
    case EACCES:
    case EPERM:
      return "not permitted (perf_event_paranoid, or a seccomp filter)";
    case ENOSYS:
      return "this kernel has no perf_event_open";
    default:
      return std::strerror(error);
  }
}

// One perf event per file descriptor, counting the calling thread on any CPU.
absl::StatusOr<int> Open(const std::string& name, uint32_t type, uint64_t config) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type;
  attr.config = config;
  attr.disabled = 1;
  attr.exclude_kernel = ExcludeKernel() ? 1 : 0;
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("perf event '", name, "' cannot be counted here: ", Reason(errno, type)));
  }
  return static_cast<int>(fd);
}

class PerfMeasurement final : public MetricCollector::Measurement {
 public:
  PerfMeasurement(std::vector<std::string> names, std::vector<int> fds)
      : names_(std::move(names)), fds_(std::move(fds)) {
    for (int fd : fds_) {
      ioctl(fd, PERF_EVENT_IOC_RESET, 0);
      ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    }
  }
  ~PerfMeasurement() override {
    for (int fd : fds_) close(fd);
  }

  absl::StatusOr<MetricMap> Stop() override {
    for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    MetricMap metrics;
    double min_ratio = 1;
    for (size_t i = 0; i < fds_.size(); ++i) {
      uint64_t values[3] = {0, 0, 0};  // value, time enabled, time running
      if (read(fds_[i], values, sizeof values) != static_cast<ssize_t>(sizeof values)) {
        return absl::InternalError(
            absl::StrCat("reading perf event '", names_[i], "': ", std::strerror(errno)));
      }
      double value = static_cast<double>(values[0]);
      if (values[2] > 0 && values[2] < values[1]) {  // multiplexed: scale up
        const double ratio = static_cast<double>(values[2]) / static_cast<double>(values[1]);
        value /= ratio;
        min_ratio = std::min(min_ratio, ratio);
      } else if (values[1] > 0 && values[2] == 0) {
        min_ratio = 0;  // enabled but never scheduled: no count at all
      }
      metrics[names_[i]] = Count{static_cast<int64_t>(value + 0.5)};
    }
    metrics[std::string(kPerfRunningRatioMetric)] = Ratio{min_ratio};
    return metrics;
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> fds_;
};

}  // namespace

std::vector<std::string> PerfCollector::KnownEvents() {
  std::vector<std::string> names;
  for (const KnownEvent& e : kKnown) names.emplace_back(e.name);
  return names;
}

absl::StatusOr<std::unique_ptr<PerfCollector>> PerfCollector::Create(
    const std::vector<std::string>& events) {
  if (events.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("collector 'perf' needs events, e.g. perf:task-clock,page-faults (known: ",
                     absl::StrJoin(KnownEvents(), ", "), ")"));
  }
  std::vector<Event> chosen;
  for (const std::string& name : events) {
    const auto* known = std::find_if(std::begin(kKnown), std::end(kKnown),
                                     [&](const KnownEvent& e) { return name == e.name; });
    if (known == std::end(kKnown)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown perf event '", name, "' (known: ", absl::StrJoin(KnownEvents(), ", "), ")"));
    }
    chosen.push_back({known->name, known->type, known->config});
  }
  return std::unique_ptr<PerfCollector>(new PerfCollector(std::move(chosen)));
}

absl::Status PerfCollector::Init(const std::vector<Device>&) {
  for (const Event& e : events_) {
    absl::StatusOr<int> fd = Open(e.name, e.type, e.config);
    if (!fd.ok()) return fd.status();
    close(*fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> PerfCollector::Start(Device) {
  std::vector<std::string> names;
  std::vector<int> fds;
  for (const Event& e : events_) {
    absl::StatusOr<int> fd = Open(e.name, e.type, e.config);
    if (!fd.ok()) {
      for (int open_fd : fds) close(open_fd);
      return fd.status();
    }
    names.push_back(e.name);
    fds.push_back(*fd);
  }
  return std::make_unique<PerfMeasurement>(std::move(names), std::move(fds));
}

}  // namespace kprof::core
