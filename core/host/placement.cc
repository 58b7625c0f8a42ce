#include "core/host/placement.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kprof::core {
namespace {

constexpr int kMaxCpu = 1023;  // CPU_SETSIZE - 1

absl::Status BadCpuList(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("CPU list '", std::string(text), "': ", std::string(why),
                   " (accepted: CPU numbers and ranges 0 to ", kMaxCpu, ", e.g. 0-3,6)"));
}

std::string PermissionHint(int error, std::string_view what) {
  if (error != EPERM && error != EACCES) return "";
  return absl::StrCat(" — ", std::string(what));
}

pid_t ThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  if (text.empty()) return BadCpuList(text, "empty");
  // Debian's Abseil has its own string_view.
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) || ends[0].empty() || ends[0][0] == '+' ||
        (ends.size() == 2 &&
         (!absl::SimpleAtoi(ends[1], &last) || ends[1].empty() || ends[1][0] == '+'))) {
      return BadCpuList(text, absl::StrCat("'", std::string(part), "' is not a CPU or a range"));
    }
    if (ends.size() == 1) last = first;
    if (first < 0 || last > kMaxCpu || first > last) {
      return BadCpuList(text, absl::StrCat("'", std::string(part), "' is out of range"));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  if (std::adjacent_find(cpus.begin(), cpus.end()) != cpus.end()) {
    return BadCpuList(text, "a CPU is named twice");
  }
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size(); ++i) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j;
  }
  return out;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<Priority> ParsePriority(std::string_view text) {
  Priority priority;
  if (text.empty()) return priority;
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("worker priority '", std::string(text),
                     "' (accepted: nice:N with N from -20 to 19, or fifo:N with N from 1 to 99)"));
  };
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad();
  const std::string_view kind = text.substr(0, colon);
  const std::string_view number = text.substr(colon + 1);
  if (!absl::SimpleAtoi(absl::string_view(number.data(), number.size()), &priority.value)) {
    return bad();
  }
  if (kind == "nice" && priority.value >= -20 && priority.value <= 19) {
    priority.policy = Priority::Policy::kNice;
  } else if (kind == "fifo" && priority.value >= 1 && priority.value <= 99) {
    priority.policy = Priority::Policy::kFifo;
  } else {
    return bad();
  }
  return priority;
}

std::string FormatPriority(const Priority& priority) {
  switch (priority.policy) {
    case Priority::Policy::kNice:
      return absl::StrCat("nice:", priority.value);
    case Priority::Policy::kFifo:
      return absl::StrCat("fifo:", priority.value);
    case Priority::Policy::kInherit:
      break;
  }
  return "";
}

absl::Status ApplyPlacement(const Placement& placement) {
  if (!placement.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : placement.cpus) CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      const int error = errno;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot pin to CPUs ", FormatCpuList(placement.cpus), ": sched_setaffinity: ",
          std::strerror(error), " (this process may use CPUs ", FormatCpuList(AllowedCpus()), ")"));
    }
  }
  const Priority& p = placement.priority;
  if (p.policy == Priority::Policy::kNice) {
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(ThreadId()), p.value) != 0) {
      const int error = errno;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot set the worker priority to nice ", p.value,
          ": setpriority: ", std::strerror(error),
          PermissionHint(error,
                         "raising priority needs CAP_SYS_NICE or an RLIMIT_NICE allowing it "
                         "(LimitNICE= in a systemd unit)")));
    }
  } else if (p.policy == Priority::Policy::kFifo) {
    sched_param param{};
    param.sched_priority = p.value;
    if (sched_setscheduler(ThreadId(), SCHED_FIFO, &param) != 0) {
      const int error = errno;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot run the worker under SCHED_FIFO priority ", p.value,
          ": sched_setscheduler: ", std::strerror(error),
          PermissionHint(error,
                         "real-time scheduling needs CAP_SYS_NICE or an RLIMIT_RTPRIO allowing "
                         "it (LimitRTPRIO= and RestrictRealtime=no in a systemd unit)")));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlacement(const Placement& placement) {
  absl::Status status;
  std::thread probe([&] { status = ApplyPlacement(placement); });
  probe.join();
  return status;
}

void StandAside(const std::vector<int>& measuring, bool lowest) {
  if (lowest) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  cpu_set_t others;
  CPU_ZERO(&others);
  for (const int cpu : AllowedCpus()) {
    if (std::find(measuring.begin(), measuring.end(), cpu) == measuring.end()) {
      CPU_SET(cpu, &others);
    }
  }
  if (CPU_COUNT(&others) > 0) pthread_setaffinity_np(pthread_self(), sizeof others, &others);
}

}  // namespace kprof::core
