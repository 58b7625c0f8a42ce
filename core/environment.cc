#include "core/environment.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/placement.h"
#include "kprof/config.h"

namespace kprof::core {
namespace {

constexpr char kUnavailable[] = "unavailable";

// The first line of a small /proc or /sys file, trimmed; "" when unreadable.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string CpuInfoField(std::string_view key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "";
}

void FrequencyFields(MetricMap& m) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cpufreq/";
  int64_t khz = 0;
  if (absl::SimpleAtoi(FirstLine(base + "scaling_cur_freq"), &khz)) {
    m["CPU frequency (MHz)"] = Count{khz / 1000};
  } else if (double mhz = 0; absl::SimpleAtod(CpuInfoField("cpu MHz"), &mhz)) {
    m["CPU frequency (MHz)"] = Count{static_cast<int64_t>(mhz + 0.5)};
  } else {
    m["CPU frequency (MHz)"] = std::string(kUnavailable);
  }
  if (absl::SimpleAtoi(FirstLine(base + "scaling_min_freq"), &khz)) {
    m["CPU frequency min (MHz)"] = Count{khz / 1000};
  }
  if (absl::SimpleAtoi(FirstLine(base + "scaling_max_freq"), &khz)) {
    m["CPU frequency max (MHz)"] = Count{khz / 1000};
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

}  // namespace

MetricMap EnvironmentManifest() {
  MetricMap m;
  m["kprofd version"] = std::string(KPROF_VERSION);
  char host[256] = {0};
  m["Host"] = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : kUnavailable;
  utsname uts{};
  m["Kernel"] = uname(&uts) == 0 ? absl::StrCat(uts.sysname, " ", uts.release, " ", uts.machine)
                                 : kUnavailable;
  m["CPU model"] = Or(CpuInfoField("model name"));
  m["CPUs online"] = Count{sysconf(_SC_NPROCESSORS_ONLN)};
  m["CPU governor"] = Or(FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"));
  FrequencyFields(m);
  const std::string smt = FirstLine("/sys/devices/system/cpu/smt/active");
  m["SMT"] = smt.empty() ? std::string(kUnavailable) : std::string(smt == "1" ? "on" : "off");
  m["Turbo"] = Turbo();
  double load[3] = {0, 0, 0};
  m["Load average"] = getloadavg(load, 3) == 3
                          ? absl::StrFormat("%.2f, %.2f, %.2f", load[0], load[1], load[2])
                          : std::string(kUnavailable);
  // /proc/loadavg's fourth field is "runnable/total".
  std::ifstream loadavg("/proc/loadavg");
  std::string a, b, c, runnable;
  int64_t running = 0;
  if (loadavg >> a >> b >> c >> runnable &&
      absl::SimpleAtoi(runnable.substr(0, runnable.find('/')), &running)) {
    m["Runnable processes"] = Count{running};
  } else {
    m["Runnable processes"] = std::string(kUnavailable);
  }
  const std::vector<int> cpus = AllowedCpus();
  m["Worker CPU affinity"] = cpus.empty() ? std::string(kUnavailable) : FormatCpuList(cpus);
  // The calling thread's: on Linux, nice and scheduling policy are per thread.
  const int policy = sched_getscheduler(0);
  if (sched_param param{};
      (policy == SCHED_FIFO || policy == SCHED_RR) && sched_getparam(0, &param) == 0) {
    m["Worker priority"] = absl::StrCat(policy == SCHED_FIFO ? "SCHED_FIFO" : "SCHED_RR",
                                        ", priority ", param.sched_priority);
  } else {
    m["Worker priority"] = absl::StrCat("SCHED_OTHER, nice ", getpriority(PRIO_PROCESS, 0));
  }
  return m;
}

}  // namespace kprof::core
