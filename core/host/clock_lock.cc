#include "core/host/clock_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"
#include "base/status_macros.h"
#include "core/collectors/nvml_collector.h"
#include "core/host/tegra_clocks.h"
#include "nlohmann/json.hpp"

namespace kprof::core {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// One change made, to be put back: a file's text, or a GPU's locked clocks.
struct Change {
  std::string kind;  // "file" or "nvml"
  std::string name;
  std::string path;    // file
  std::string before;  // file
  int ordinal = 0;     // nvml
  std::string pci;     // nvml
};

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(text);
    case EINVAL:
    case EBUSY:
      return absl::InvalidArgumentError(text);
    default:
      return absl::FailedPreconditionError(text);
  }
}

// Replaces `path` with `text`: written to a temporary name, synced, renamed, the directory synced.
absl::Status WriteDurably(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".new";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return ErrnoStatus(errno, absl::StrCat("cannot write the clock state file ", temporary));
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  const int error = errno;
  close(fd);
  if (!written || rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = written ? errno : error;
    unlink(temporary.c_str());
    return ErrnoStatus(why, absl::StrCat("cannot write the clock state file ", path));
  }
  const std::string dir = fs::path(path).parent_path().string();
  if (const int dfd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

// The state file: every change made and not yet put back, saved before each change is made.
class Journal {
 public:
  explicit Journal(std::string path) : path_(std::move(path)) {}

  absl::Status Load() {
    std::error_code error;
    if (!fs::exists(path_, error)) return absl::OkStatus();
    KPROF_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path_, "clock state file"));
    const json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("changes") ||
        !doc["changes"].is_array()) {
      return absl::DataLossError(absl::StrCat("the clock state file ", path_,
                                              " is not what kprofd writes; move it aside"));
    }
    for (const json& c : doc["changes"]) {
      if (!c.is_object()) continue;
      Change change;
      change.kind = c.value("kind", "");
      change.name = c.value("name", "");
      change.path = c.value("path", "");
      change.before = c.value("before", "");
      change.ordinal = c.value("ordinal", 0);
      change.pci = c.value("pci", "");
      changes_.push_back(std::move(change));
    }
    return absl::OkStatus();
  }

  absl::Status Add(Change change) {
    changes_.push_back(std::move(change));
    absl::Status saved = Save();
    if (!saved.ok()) changes_.pop_back();
    return saved;
  }

  // Forgets the last change (it was not made after all).
  absl::Status DropLast() {
    changes_.pop_back();
    return Save();
  }

  absl::Status Save() {
    if (changes_.empty()) {
      if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
        return ErrnoStatus(errno, absl::StrCat("cannot remove the clock state file ", path_));
      }
      return absl::OkStatus();
    }
    json doc = {{"changes", json::array()}};
    for (const Change& c : changes_) {
      json entry = {{"kind", c.kind}, {"name", c.name}};
      if (c.kind == "file") {
        entry["path"] = c.path;
        entry["before"] = c.before;
      } else {
        entry["ordinal"] = c.ordinal;
        entry["pci"] = c.pci;
      }
      doc["changes"].push_back(std::move(entry));
    }
    return WriteDurably(path_, doc.dump(1) + "\n");
  }

  std::vector<Change>& changes() { return changes_; }

 private:
  std::string path_;
  std::vector<Change> changes_;
};

absl::Status WriteAttribute(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot write ", path));
  const bool ok = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  const int error = errno;
  const bool closed = close(fd) == 0;
  if (!ok || !closed) return ErrnoStatus(ok ? errno : error, absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Puts one change back.
absl::Status Undo(const Change& change, const std::string& nvml_library) {
  if (change.kind == "file") return WriteAttribute(change.path, change.before);
  if (change.kind == "nvml") return ResetGpuClocks(change.ordinal, change.pci, nvml_library);
  return absl::InvalidArgumentError(absl::StrCat("unknown change '", change.kind, "'"));
}

// Puts back every change in the journal, last first; those refused as invalid at first (a
// cpufreq minimum above the maximum still in force) are tried again once the rest are back.
// The journal keeps what could not be put back.
absl::StatusOr<std::string> UndoAll(Journal& journal, const std::string& nvml_library) {
  std::vector<Change>& changes = journal.changes();
  std::vector<std::string> lines, failures;
  std::vector<Change> left, retry;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    const absl::Status undone = Undo(*it, nvml_library);
    if (undone.ok()) {
      lines.push_back(
          absl::StrCat(it->name, " back to ", it->kind == "file" ? it->before : "default"));
    } else if (absl::IsInvalidArgument(undone)) {
      retry.push_back(*it);
    } else {
      failures.emplace_back(undone.message());
      left.insert(left.begin(), *it);
    }
  }
  for (const Change& change : retry) {
    if (const absl::Status undone = Undo(change, nvml_library); undone.ok()) {
      lines.push_back(absl::StrCat(change.name, " back to ", change.before));
    } else {
      failures.emplace_back(undone.message());
      left.insert(left.begin(), change);
    }
  }
  changes = std::move(left);
  KPROF_RETURN_IF_ERROR(journal.Save());
  if (!failures.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("could not put back: ", absl::StrJoin(failures, "; ")));
  }
  return absl::StrJoin(lines, "; ");
}

// A sysfs attribute to set for the lease.
struct Step {
  std::string name;
  std::string path;
  std::string value;
};

std::string Attribute(const fs::path& path) {
  return base::ReadFirstLine(path.string()).value_or("");
}

std::optional<int64_t> Number(const fs::path& path) {
  const std::optional<uint64_t> value = base::ReadCountFile(path.string());
  if (!value || *value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(*value);
}

// The CPUs a cpufreq policy runs.
std::vector<int> AffectedCpus(const fs::path& policy) {
  std::vector<int> cpus;
  for (absl::string_view word :
       absl::StrSplit(Attribute(policy / "affected_cpus"), ' ', absl::SkipEmpty())) {
    int cpu = 0;
    if (absl::SimpleAtoi(word, &cpu)) cpus.push_back(cpu);
  }
  return cpus;
}

// "cpu0-3" for a policy over CPUs 0 1 2 3, "cpu0,2" otherwise, the policy's name without the list.
std::string PolicyName(const fs::path& policy) {
  const std::vector<int> cpus = AffectedCpus(policy);
  if (cpus.empty()) return policy.filename().string();
  bool contiguous = true;
  for (size_t i = 1; i < cpus.size(); ++i) contiguous &= cpus[i] == cpus[i - 1] + 1;
  if (cpus.size() == 1) return absl::StrCat("cpu", cpus[0]);
  if (contiguous) return absl::StrCat("cpu", cpus.front(), "-", cpus.back());
  return absl::StrCat("cpu", absl::StrJoin(cpus, ","));
}

// Whether the policy's clock is this lease's to set (`cpus`, sorted; empty: every CPU's), and
// when it also runs other CPUs a note saying it is left as it is.
bool Ours(const fs::path& policy, const std::vector<int>& cpus, ClockLockOutcome* outcome) {
  if (cpus.empty()) return true;
  const std::vector<int> affected = AffectedCpus(policy);
  const auto mine = [&cpus](int cpu) { return std::binary_search(cpus.begin(), cpus.end(), cpu); };
  if (std::none_of(affected.begin(), affected.end(), mine)) return false;
  if (std::all_of(affected.begin(), affected.end(), mine)) return true;
  absl::StrAppend(&outcome->note, outcome->note.empty() ? "" : "; ", PolicyName(policy),
                  "'s clock left as it is: it also runs CPUs kprofd does not measure on "
                  "(--pin-cpus)");
  return false;
}

// The CPUs' cpufreq policies: the steps that fix each at one frequency (`mhz`; 0: the base
// frequency, or the maximum where there is no base), and their settings now.
absl::Status PlanCpus(const ClockLockOptions& options, std::vector<Step>* steps,
                      ClockLockOutcome* outcome) {
  const fs::path cpu = fs::path(options.sysfs_root) / "sys/devices/system/cpu";
  const int64_t mhz = options.mhz;
  std::vector<int> cpus = options.cpus;
  std::sort(cpus.begin(), cpus.end());
  const std::vector<fs::path> policies = base::DirectoryEntries(cpu / "cpufreq", "policy");
  if (policies.empty()) {
    outcome->note =
        absl::StrCat("this host shows no cpufreq policies (", (cpu / "cpufreq").string(),
                     "): its CPU clocks are not the kernel's to set (a VM's are the "
                     "hypervisor's)");
    return absl::OkStatus();
  }
  for (const fs::path& policy : policies) {
    if (!Ours(policy, cpus, outcome)) continue;
    const std::string name = PolicyName(policy);
    const std::string governor = Attribute(policy / "scaling_governor");
    const std::optional<int64_t> low = Number(policy / "scaling_min_freq");
    const std::optional<int64_t> high = Number(policy / "scaling_max_freq");
    const std::optional<int64_t> floor = Number(policy / "cpuinfo_min_freq");
    const std::optional<int64_t> ceiling = Number(policy / "cpuinfo_max_freq");
    const std::optional<int64_t> base = Number(policy / "base_frequency");
    const std::string range =
        low && high ? absl::StrCat(*low, "-", *high) : std::string("unreadable");
    int64_t khz = mhz * 1000;
    if (mhz == 0) khz = base ? *base : ceiling ? *ceiling : high.value_or(0);
    if (mhz > 0 && ((floor && khz < *floor) || (ceiling && khz > *ceiling))) {
      return absl::InvalidArgumentError(absl::StrCat("clock_mhz ", mhz, " is outside ", name,
                                                     "'s range, ", floor.value_or(0) / 1000, " to ",
                                                     ceiling.value_or(0) / 1000, " MHz"));
    }
    // No lease holds a clock below the floor: the operator's, else the base clock.
    const int64_t lowest = options.floor_mhz > 0 ? options.floor_mhz * 1000 : base.value_or(0);
    if (mhz > 0 && khz < lowest) {
      return absl::InvalidArgumentError(
          absl::StrCat("clock_mhz ", mhz, " is below ", name, "'s floor, ", lowest / 1000, " MHz (",
                       options.floor_mhz > 0 ? "kprofd --lock-floor-mhz" : "its base clock", ")"));
    }
    const std::string available = Attribute(policy / "scaling_available_governors");
    const bool performance =
        available.empty() || absl::StrContains(absl::StrCat(" ", available, " "), " performance ");
    outcome->settings.push_back({absl::StrCat(name, " governor"), governor, ""});
    outcome->settings.push_back({absl::StrCat(name, " frequency (kHz)"), range, ""});
    if (performance && governor != "performance") {
      steps->push_back(
          {absl::StrCat(name, " governor"), (policy / "scaling_governor").string(), "performance"});
    }
    if (khz > 0) {
      // Both bounds at one frequency; UndoAll's second pass sorts out their order.
      steps->push_back({absl::StrCat(name, " maximum (kHz)"),
                        (policy / "scaling_max_freq").string(), absl::StrCat(khz)});
      steps->push_back({absl::StrCat(name, " minimum (kHz)"),
                        (policy / "scaling_min_freq").string(), absl::StrCat(khz)});
      outcome->settings.back().during = absl::StrCat(khz, "-", khz);
    }
    if (performance && governor != "performance") {
      outcome->settings[outcome->settings.size() - 2].during = "performance";
    }
  }
  // Turbo above the fixed frequency would undo it: off for the lease — but it is the whole
  // host's switch, left as it is when the lease has some CPUs only (their maximum holds them).
  if (!cpus.empty()) return absl::OkStatus();
  for (const auto& [file, value, name] :
       {std::tuple{"intel_pstate/no_turbo", "1", "turbo disabled (intel_pstate no_turbo)"},
        std::tuple{"cpufreq/boost", "0", "boost (cpufreq)"}}) {
    const fs::path path = cpu / file;
    const std::optional<std::string> now = base::ReadFirstLine(path.string());
    if (!now.has_value()) continue;
    outcome->settings.push_back({name, *now, *now == value ? "" : value});
    if (*now != value) steps->push_back({name, path.string(), value});
  }
  return absl::OkStatus();
}

// A Tegra GPU's DVFS floor raised to its ceiling (or both at `mhz`), as jetson_clocks does.
absl::Status PlanTegraGpu(const std::string& node, int64_t mhz, std::vector<Step>* steps,
                          ClockLockOutcome* outcome) {
  const std::optional<int64_t> low = Number(fs::path(node) / "min_freq");
  const std::optional<int64_t> high = Number(fs::path(node) / "max_freq");
  const std::optional<int64_t> now = Number(fs::path(node) / "cur_freq");
  const std::vector<int64_t> available = [&node] {
    std::vector<int64_t> hz;
    for (absl::string_view word : absl::StrSplit(
             Attribute(fs::path(node) / "available_frequencies"), ' ', absl::SkipEmpty())) {
      int64_t value = 0;
      if (absl::SimpleAtoi(word, &value)) hz.push_back(value);
    }
    return hz;
  }();
  outcome->settings.push_back(
      {"GPU clock (Hz)", now ? absl::StrCat(*now) : std::string("unreadable"), ""});
  outcome->settings.push_back(
      {"GPU DVFS range (Hz)", low && high ? absl::StrCat(*low, "-", *high) : "unreadable", ""});
  if (!high) return absl::OkStatus();
  int64_t hz = *high;
  if (mhz > 0) {
    const int64_t asked = mhz * 1'000'000;
    if (asked > *high) {
      return absl::InvalidArgumentError(absl::StrCat(
          "clock_mhz ", mhz, " is above the GPU's maximum, ", *high / 1'000'000, " MHz"));
    }
    // devfreq takes one of its frequencies: the highest at or below the one asked.
    hz = asked;
    int64_t best = -1;
    for (const int64_t f : available) {
      if (f <= asked && f > best) best = f;
    }
    if (best > 0) hz = best;
    steps->push_back(
        {"GPU DVFS ceiling (Hz)", (fs::path(node) / "max_freq").string(), absl::StrCat(hz)});
  }
  steps->push_back(
      {"GPU DVFS floor (Hz)", (fs::path(node) / "min_freq").string(), absl::StrCat(hz)});
  outcome->settings.back().during = absl::StrCat(hz, "-", hz);
  return absl::OkStatus();
}

// Makes the steps, each recorded first; on a refusal undoes what was done and says why.
absl::Status Apply(const std::vector<Step>& steps, Journal& journal,
                   const std::string& nvml_library, ClockLockOutcome* outcome) {
  std::vector<const Step*> retry;
  absl::Status refused;
  const auto make = [&](const Step& step) -> absl::Status {
    return WriteAttribute(step.path, step.value);
  };
  for (const Step& step : steps) {
    if (absl::Status recorded =
            journal.Add({"file", step.name, step.path, Attribute(step.path), 0, ""});
        !recorded.ok()) {
      refused = std::move(recorded);  // not made, since it could not be recorded first
      break;
    }
    absl::Status made = make(step);
    if (absl::IsInvalidArgument(made)) {
      retry.push_back(&step);
    } else if (!made.ok()) {
      refused = std::move(made);
      KPROF_RETURN_IF_ERROR(journal.DropLast());  // not made: nothing of it to put back
      break;
    }
  }
  for (const Step* step : retry) {
    if (!refused.ok()) break;
    refused = make(*step);
  }
  if (refused.ok()) return absl::OkStatus();
  const absl::StatusOr<std::string> undone = UndoAll(journal, nvml_library);
  outcome->locked = false;
  outcome->note =
      absl::StrCat("not locked: ", refused.message(), " (kprofd runs as uid ", geteuid(), ")",
                   undone.ok() ? "" : absl::StrCat("; and ", undone.status().message()));
  for (ClockSettingRecord& setting : outcome->settings) setting.during.clear();
  return absl::OkStatus();
}

absl::Status LockNvmlGpu(const ClockLockOptions& options, Journal& journal,
                         ClockLockOutcome* outcome) {
  const absl::StatusOr<GpuClocks> clocks = ReadGpuClocks(options.device.id, options.nvml_library);
  if (!clocks.ok()) {
    outcome->note = absl::StrCat(options.lock ? "not locked: " : "",
                                 "the GPU's clocks cannot be read: ", clocks.status().message());
    return absl::OkStatus();
  }
  const auto mhz = [](int64_t v) { return v < 0 ? std::string("unknown") : absl::StrCat(v); };
  outcome->settings.push_back({"GPU SM clock (MHz)", mhz(clocks->sm_mhz), ""});
  outcome->settings.push_back({"GPU SM clock base (MHz)", mhz(clocks->base_sm_mhz), ""});
  outcome->settings.push_back({"GPU SM clock max (MHz)", mhz(clocks->max_sm_mhz), ""});
  outcome->settings.push_back({"GPU memory clock (MHz)", mhz(clocks->memory_mhz), ""});
  if (!options.lock) return absl::OkStatus();
  int64_t at = options.mhz > 0           ? options.mhz
               : clocks->base_sm_mhz > 0 ? clocks->base_sm_mhz
                                         : clocks->max_sm_mhz;
  if (at <= 0) {
    outcome->note = "not locked: NVML gives neither the GPU's base nor its maximum SM clock";
    return absl::OkStatus();
  }
  if (clocks->max_sm_mhz > 0 && at > clocks->max_sm_mhz) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clock_mhz ", at, " is above the GPU's maximum, ", clocks->max_sm_mhz, " MHz"));
  }
  KPROF_RETURN_IF_ERROR(
      journal.Add({"nvml", "GPU SM clock", "", "", options.device.id, clocks->pci_bus_id}));
  if (const absl::Status locked = LockGpuClocks(options.device.id, at, options.nvml_library);
      !locked.ok()) {
    KPROF_RETURN_IF_ERROR(journal.DropLast());
    outcome->note =
        absl::StrCat("not locked: ", locked.message(),
                     absl::IsPermissionDenied(locked) ? " (NVML lets root lock clocks)" : "");
    return absl::OkStatus();
  }
  outcome->settings.front().during = absl::StrCat(at);
  outcome->locked = true;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClockLockOutcome> LockClocks(const ClockLockOptions& options) {
  if (options.lock && options.state_file.empty()) {
    return absl::InvalidArgumentError("locking clocks needs a state file to undo them from");
  }
  if (options.mhz < 0) return absl::InvalidArgumentError("clock_mhz must not be negative");
  ClockLockOutcome outcome;
  Journal journal(options.state_file);
  if (options.lock) KPROF_RETURN_IF_ERROR(journal.Load());
  std::vector<Step> steps;
  if (options.device.type == base::DeviceType::kCpu) {
    KPROF_RETURN_IF_ERROR(PlanCpus(options, &steps, &outcome));
  } else if (const std::string node = TegraGpuDevfreq(options.sysfs_root); !node.empty()) {
    // The GPU's DVFS alone: the CPUs' clocks are a cpu:0 lease's, which may be held beside it.
    KPROF_RETURN_IF_ERROR(PlanTegraGpu(node, options.mhz, &steps, &outcome));
  } else {
    KPROF_RETURN_IF_ERROR(LockNvmlGpu(options, journal, &outcome));
    return outcome;
  }
  if (!options.lock) {
    for (ClockSettingRecord& setting : outcome.settings) setting.during.clear();
    return outcome;
  }
  if (steps.empty() && outcome.note.empty()) {
    outcome.locked = true;  // already as a lock would set them
    return outcome;
  }
  if (steps.empty()) {
    outcome.note = absl::StrCat("not locked: ", outcome.note);
    return outcome;
  }
  outcome.locked = true;
  KPROF_RETURN_IF_ERROR(Apply(steps, journal, options.nvml_library, &outcome));
  return outcome;
}

absl::StatusOr<std::string> RestoreClocks(const std::string& state_file,
                                          const std::string& nvml_library) {
  Journal journal(state_file);
  KPROF_RETURN_IF_ERROR(journal.Load());
  if (journal.changes().empty()) return std::string();
  return UndoAll(journal, nvml_library);
}

}  // namespace kprof::core
