#include "core/collectors/perf_collector.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"

namespace kprof::core {
namespace {

struct KnownEvent {
  const char* name;
  uint32_t type;
  uint64_t config;
};

// Software events the kernel takes in kernel mode (a switch, a fault copying into user pages,
// a migration): a count that excludes the kernel misses them all, or most.
constexpr uint64_t kKernelSide[] = {PERF_COUNT_SW_PAGE_FAULTS, PERF_COUNT_SW_PAGE_FAULTS_MIN,
                                    PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_CONTEXT_SWITCHES,
                                    PERF_COUNT_SW_CPU_MIGRATIONS};

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

bool IsKernelSide(uint32_t type, uint64_t config) {
  return type == PERF_TYPE_SOFTWARE &&
         std::find(std::begin(kKernelSide), std::end(kKernelSide), config) != std::end(kKernelSide);
}

long OpenEvent(uint32_t type, uint64_t config, bool exclude_kernel) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type;
  attr.config = config;
  attr.disabled = 1;
  attr.exclude_kernel = exclude_kernel ? 1 : 0;
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

}  // namespace

bool PerfCountsTheKernel() {
  // The kernel's own answer (perf_event_paranoid, CAP_PERFMON, root), asked once: this
  // process's privileges do not change under it.
  static const bool allowed = [] {
    const long fd = OpenEvent(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, false);
    if (fd >= 0) close(static_cast<int>(fd));
    return fd >= 0;
  }();
  return allowed;
}

absl::StatusOr<ThreadAccounting> ReadThreadAccounting(bool migrations) {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) {
    return absl::InternalError(absl::StrCat("getrusage: ", std::strerror(errno)));
  }
  ThreadAccounting now;
  now.minor_faults = usage.ru_minflt;
  now.major_faults = usage.ru_majflt;
  now.context_switches = usage.ru_nvcsw + usage.ru_nivcsw;
  if (!migrations) return now;
  const std::string sched = base::ReadSmallFile("/proc/thread-self/sched").value_or("");
  for (absl::string_view line : absl::StrSplit(sched, '\n')) {
    if (!absl::ConsumePrefix(&line, "se.nr_migrations")) continue;
    const size_t colon = line.find(':');
    if (int64_t count = 0;
        colon != absl::string_view::npos && absl::SimpleAtoi(line.substr(colon + 1), &count)) {
      now.migrations = count;
      return now;
    }
  }
  return absl::FailedPreconditionError(
      "perf event 'cpu-migrations' cannot be counted here: the kernel counts it only in kernel "
      "mode, which perf_event_paranoid keeps this process from counting (set "
      "kernel.perf_event_paranoid to 1 or less, or give kprofd CAP_PERFMON), and this kernel "
      "has no per-thread migration count (/proc/thread-self/sched, CONFIG_SCHED_DEBUG)");
}

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

// One perf event per file descriptor, counting the calling thread on any CPU: in every domain
// where the kernel allows it, else in user mode only.
absl::StatusOr<int> Open(const std::string& name, uint32_t type, uint64_t config) {
  const long fd = OpenEvent(type, config, !PerfCountsTheKernel());
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("perf event '", name, "' cannot be counted here: ", Reason(errno, type)));
  }
  return static_cast<int>(fd);
}

// A kernel-side software event's count from the thread's own accounting, which the kernel
// keeps in every domain for any user.
int64_t FromAccounting(uint64_t config, const ThreadAccounting& a) {
  switch (config) {
    case PERF_COUNT_SW_PAGE_FAULTS:
      return a.minor_faults + a.major_faults;
    case PERF_COUNT_SW_PAGE_FAULTS_MIN:
      return a.minor_faults;
    case PERF_COUNT_SW_PAGE_FAULTS_MAJ:
      return a.major_faults;
    case PERF_COUNT_SW_CONTEXT_SWITCHES:
      return a.context_switches;
    default:
      return a.migrations;
  }
}

class PerfMeasurement final : public MetricCollector::Measurement {
 public:
  // `counted`: the events opened as `fds`; `accounted`: kernel-side events read from the
  // thread's accounting, which `before` holds as the measurement starts.
  PerfMeasurement(std::vector<std::string> names, std::vector<int> fds,
                  std::vector<std::pair<std::string, uint64_t>> accounted, bool migrations,
                  ThreadAccounting before, std::string domain)
      : names_(std::move(names)),
        fds_(std::move(fds)),
        accounted_(std::move(accounted)),
        migrations_(migrations),
        before_(before),
        domain_(std::move(domain)) {
    for (int fd : fds_) {
      ioctl(fd, PERF_EVENT_IOC_RESET, 0);
      ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    }
  }
  ~PerfMeasurement() override {
    for (int fd : fds_) close(fd);
  }

  absl::StatusOr<report::MetricMap> Stop() override {
    for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    report::MetricMap metrics;
    if (!accounted_.empty()) {
      absl::StatusOr<ThreadAccounting> after = ReadThreadAccounting(migrations_);
      if (!after.ok()) return after.status();
      for (const auto& [name, config] : accounted_) {
        metrics[name] =
            report::Count{FromAccounting(config, *after) - FromAccounting(config, before_)};
      }
    }
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
      metrics[names_[i]] = report::Count{static_cast<int64_t>(value + 0.5)};
    }
    metrics[std::string(kPerfRunningRatioMetric)] = report::Ratio{min_ratio};
    metrics[std::string(kPerfDomainMetric)] = domain_;
    return metrics;
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> fds_;
  std::vector<std::pair<std::string, uint64_t>> accounted_;
  bool migrations_;
  ThreadAccounting before_;
  std::string domain_;
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

std::string PerfCollector::Domain() const {
  if (PerfCountsTheKernel()) return "user and kernel";
  std::vector<std::string> accounted;
  for (const Event& e : events_) {
    if (IsKernelSide(e.type, e.config)) accounted.push_back(e.name);
  }
  if (accounted.empty()) return "user (perf_event_paranoid excludes the kernel)";
  return absl::StrCat("user (perf_event_paranoid excludes the kernel); ",
                      absl::StrJoin(accounted, ", "),
                      " from the thread's accounting, user and kernel");
}

bool PerfCollector::Accounted(const Event& e) {
  return !PerfCountsTheKernel() && IsKernelSide(e.type, e.config);
}

absl::Status PerfCollector::Init(const std::vector<base::Device>&) {
  bool migrations = false;
  for (const Event& e : events_)
    migrations |= Accounted(e) && e.config == PERF_COUNT_SW_CPU_MIGRATIONS;
  if (absl::StatusOr<ThreadAccounting> a = ReadThreadAccounting(migrations); !a.ok()) {
    return a.status();
  }
  for (const Event& e : events_) {
    if (Accounted(e)) continue;
    absl::StatusOr<int> fd = Open(e.name, e.type, e.config);
    if (!fd.ok()) return fd.status();
    close(*fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> PerfCollector::Start(base::Device) {
  std::vector<std::string> names;
  std::vector<int> fds;
  std::vector<std::pair<std::string, uint64_t>> accounted;
  bool migrations = false;
  for (const Event& e : events_) {
    if (Accounted(e)) {
      accounted.emplace_back(e.name, e.config);
      migrations |= e.config == PERF_COUNT_SW_CPU_MIGRATIONS;
      continue;
    }
    absl::StatusOr<int> fd = Open(e.name, e.type, e.config);
    if (!fd.ok()) {
      for (int open_fd : fds) close(open_fd);
      return fd.status();
    }
    names.push_back(e.name);
    fds.push_back(*fd);
  }
  ThreadAccounting before;
  if (!accounted.empty()) {
    absl::StatusOr<ThreadAccounting> now = ReadThreadAccounting(migrations);
    if (!now.ok()) {
      for (int open_fd : fds) close(open_fd);
      return now.status();
    }
    before = *now;
  }
  return std::make_unique<PerfMeasurement>(std::move(names), std::move(fds), std::move(accounted),
                                           migrations, before, domain_);
}

}  // namespace kprof::core
