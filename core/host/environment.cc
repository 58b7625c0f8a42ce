#include "core/host/environment.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/read_file.h"
#include "core/host/cpu_info.h"
#include "core/host/interference.h"
#include "core/host/placement.h"
#include "core/host/platform.h"
#include "core/host/tegra_clocks.h"
#include "kprof/config.h"

namespace kprof::core {
namespace {

constexpr char kUnavailable[] = "unavailable";

// The first line of a small /proc or /sys file, trimmed; "" when unreadable.
std::string FirstLine(const std::string& path) { return base::ReadFirstLine(path).value_or(""); }

// What does not change while a process runs, read once: the build, the host, the processor,
// and the clock /proc/cpuinfo reports on hosts without cpufreq (VMs, where it is fixed).
// /proc/cpuinfo alone costs ~70 us to generate, more on large hosts, which a per-job manifest
// cannot pay.
struct StaticFields {
  std::string host, kernel, os, jetson, cpu_model;
  std::optional<int64_t> cpuinfo_mhz;
};

const StaticFields& Static() {
  static const StaticFields* const fields = [] {
    auto* f = new StaticFields;
    char host[256] = {0};
    f->host = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : kUnavailable;
    utsname uts{};
    f->kernel = uname(&uts) == 0 ? absl::StrCat(uts.sysname, " ", uts.release, " ", uts.machine)
                                 : kUnavailable;
    f->os = DescribeOs();
    f->jetson = DescribeJetson();
    f->cpu_model = CpuModelName(HostCpuInfo());
    if (f->cpu_model.empty()) f->cpu_model = kUnavailable;
    if (double mhz = 0;
        absl::SimpleAtod(CpuInfoField(HostCpuInfo(), "cpu MHz").value_or(""), &mhz)) {
      f->cpuinfo_mhz = static_cast<int64_t>(mhz + 0.5);
    }
    return f;
  }();
  return *fields;
}

void CurrentFrequency(report::MetricMap& m) {
  if (const int64_t khz = CpuKhz("/", 0); khz > 0) {
    m["CPU frequency (MHz)"] = report::Count{khz / 1000};
  } else if (Static().cpuinfo_mhz) {
    m["CPU frequency (MHz)"] = report::Count{*Static().cpuinfo_mhz};
  } else {
    m["CPU frequency (MHz)"] = std::string(kUnavailable);
  }
}

std::string Turbo() {
  const std::string no_turbo = FirstLine("/sys/devices/system/cpu/intel_pstate/no_turbo");
  if (!no_turbo.empty()) return no_turbo == "0" ? "on" : "off";
  const std::string boost = FirstLine("/sys/devices/system/cpu/cpufreq/boost");
  if (!boost.empty()) return boost == "1" ? "on" : "off";
  return kUnavailable;
}

std::string Or(std::string value) { return value.empty() ? kUnavailable : value; }

// The host's settings — CPUs online, governor, clock range, SMT, turbo.
report::MetricMap Settings() {
  report::MetricMap m;
  m["CPUs online"] = report::Count{sysconf(_SC_NPROCESSORS_ONLN)};
  m["CPU governor"] = Or(FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"));
  const std::string base = "/sys/devices/system/cpu/cpu0/cpufreq/";
  if (int64_t khz = 0; absl::SimpleAtoi(FirstLine(base + "scaling_min_freq"), &khz)) {
    m["CPU frequency min (MHz)"] = report::Count{khz / 1000};
  }
  if (int64_t khz = 0; absl::SimpleAtoi(FirstLine(base + "scaling_max_freq"), &khz)) {
    m["CPU frequency max (MHz)"] = report::Count{khz / 1000};
  }
  const std::string smt = FirstLine("/sys/devices/system/cpu/smt/active");
  m["SMT"] = smt.empty() ? std::string(kUnavailable) : std::string(smt == "1" ? "on" : "off");
  m["Turbo"] = Turbo();
  return m;
}

std::atomic<bool> placement_fixed{false};

// The process's CPU affinity and priority (the calling thread's: on Linux, nice and the
// scheduling policy are per thread).
void ReadPlacement(report::MetricMap& m) {
  const std::vector<int> cpus = AllowedCpus();
  m["Worker CPU affinity"] = cpus.empty() ? std::string(kUnavailable) : FormatCpuList(cpus);
  const int policy = sched_getscheduler(0);
  if (sched_param param{};
      (policy == SCHED_FIFO || policy == SCHED_RR) && sched_getparam(0, &param) == 0) {
    m["Worker priority"] = absl::StrCat(policy == SCHED_FIFO ? "SCHED_FIFO" : "SCHED_RR",
                                        ", priority ", param.sched_priority);
  } else {
    m["Worker priority"] = absl::StrCat("SCHED_OTHER, nice ", getpriority(PRIO_PROCESS, 0));
  }
}

// The host part, kept: a dozen sysfs files cost a job ~80 us, and a person changes the host's
// settings by hand, not between two jobs of the same second. A fixed placement is read once.
struct HostPart {
  absl::Mutex mutex;
  std::shared_ptr<const report::MetricMap> fields ABSL_GUARDED_BY(mutex);
  uint64_t generation ABSL_GUARDED_BY(mutex) = 0;
  absl::Time read_at ABSL_GUARDED_BY(mutex);
  bool with_placement ABSL_GUARDED_BY(mutex) = false;
  report::MetricMap placement ABSL_GUARDED_BY(mutex);  // read once it is fixed
};

HostPart& Host() {
  static HostPart* const part = new HostPart;
  return *part;
}

// The host part and whether it holds the placement.
std::pair<std::shared_ptr<const report::MetricMap>, uint64_t> HostFields(bool* with_placement) {
  HostPart& part = Host();
  absl::MutexLock lock(&part.mutex);
  const absl::Time now = absl::Now();
  const bool fixed = placement_fixed.load(std::memory_order_acquire);
  if (part.fields == nullptr || now - part.read_at >= absl::Seconds(1) ||
      fixed != part.with_placement) {
    auto m = std::make_shared<report::MetricMap>(Settings());
    (*m)["kprofd version"] = std::string(KPROF_VERSION);
    (*m)["Host"] = Static().host;
    (*m)["Kernel"] = Static().kernel;
    (*m)["OS"] = Static().os;
    if (!Static().jetson.empty()) (*m)["Jetson"] = Static().jetson;
    (*m)["CPU model"] = Static().cpu_model;
    if (fixed) {
      if (part.placement.empty()) ReadPlacement(part.placement);
      for (const auto& [name, value] : part.placement) (*m)[name] = value;
    }
    if (part.fields == nullptr || *part.fields != *m) {
      part.fields = std::move(m);
      ++part.generation;
    }
    part.read_at = now;
    part.with_placement = fixed;
  }
  *with_placement = part.with_placement;
  return {part.fields, part.generation};
}

}  // namespace

void PlacementIsFixed() { placement_fixed.store(true, std::memory_order_release); }

namespace {

// /proc/loadavg as read less than a millisecond ago: the load averages change every 5 s, and
// the runnable count of a moment ago describes a job of a batch as well as a fresh one; a batch
// of short jobs reads the file once a millisecond instead of once a job.
std::string RecentLoadavg() {
  static absl::Mutex mutex(absl::kConstInit);
  static std::string* const text = new std::string;
  static absl::Time read_at = absl::InfinitePast();
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mutex);
  if (now - read_at >= absl::Milliseconds(1) || now < read_at) {
    *text = base::ReadKeptOpen("/proc/loadavg");
    read_at = now;
  }
  return *text;
}

}  // namespace

Environment ReadEnvironment() {
  Environment environment;
  bool with_placement = false;
  std::tie(environment.host, environment.host_generation) = HostFields(&with_placement);
  report::MetricMap& m = environment.job;
  CurrentFrequency(m);
  // Jetson boards: GPU and memory clocks, and whether DVFS is locked.
  for (auto& [name, value] : TegraManifest()) m.emplace(name, std::move(value));
  // "0.52 0.58 0.59 3/107 4935": the three load averages as the file writes them (two
  // decimals), then runnable/total. Split by hand: an istringstream costs more than the read.
  const std::string loadavg = RecentLoadavg();
  const std::vector<absl::string_view> fields =
      absl::StrSplit(loadavg, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  double load = 0;
  if (fields.size() >= 4 && absl::SimpleAtod(fields[0], &load) &&
      absl::SimpleAtod(fields[1], &load) && absl::SimpleAtod(fields[2], &load)) {
    m["Load average"] = absl::StrCat(fields[0], ", ", fields[1], ", ", fields[2]);
  } else {
    m["Load average"] = std::string(kUnavailable);
  }
  int64_t running = 0;
  if (fields.size() >= 4 && absl::SimpleAtoi(fields[3].substr(0, fields[3].find('/')), &running)) {
    m["Runnable processes"] = report::Count{running};
  } else {
    m["Runnable processes"] = std::string(kUnavailable);
  }
  if (!with_placement) ReadPlacement(m);
  return environment;
}

report::MetricMap EnvironmentManifest() {
  Environment environment = ReadEnvironment();
  report::MetricMap m = *environment.host;
  m.merge(environment.job);
  return m;
}

}  // namespace kprof::core
