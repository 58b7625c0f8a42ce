// Clock locking for a device lease: a device's clocks set to one fixed frequency for the lease,
// and everything changed put back after it — at its end, when the daemon stops, or, after a
// crash, at the daemon's next start. A GPU's SM clock is locked through NVML; a Tegra GPU's DVFS
// floor is raised to its ceiling, as jetson_clocks does; CPUs (a cpu:0 lease's) get the
// performance governor, one frequency (their base frequency, else their maximum) and no turbo —
// only the CPUs the daemon measures on, and never below a floor.
//
// Every change is written to a state file (the journal, atomically replaced and synced) before
// it is made, with the value it replaces, so that a daemon killed mid-lease finds at its next
// start what to put back. Where the host does not let the daemon change a clock (not root, a
// read-only /sys, NVML without permission), nothing is left half changed: what was done is
// undone, and the outcome says why and records the clocks as they are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/device.h"

namespace kprof::core {

// One clock setting of the device: as found, and as the lease set it ("" when it did not).
struct ClockSettingRecord {
  std::string name;  // "cpu0-3 governor", "GPU SM clock (MHz)"
  std::string before;
  std::string during;
};

struct ClockLockOptions {
  base::Device device;
  bool lock = false;  // false: only record the clocks
  int64_t mhz = 0;    // the frequency to lock at; 0: base, else maximum
  // CPUs: the ones whose clocks may be set (the daemon's --pin-cpus); a cpufreq policy that
  // also runs others is left as it is, and so are the host-wide turbo switches. Empty: all.
  std::vector<int> cpus;
  // The lowest frequency `mhz` may ask for; 0: each policy's base frequency (its minimum where
  // it names none).
  int64_t floor_mhz = 0;
  std::string sysfs_root = "/";
  std::string state_file;  // the journal; required to lock
  std::string nvml_library = "libnvidia-ml.so.1";
};

struct ClockLockOutcome {
  bool locked = false;
  std::string note;  // why not (or what was left as it was), for the lease's holder
  std::vector<ClockSettingRecord> settings;
};

// Locks (or records) `options.device`'s clocks. INVALID_ARGUMENT for a frequency outside the
// clock's range, naming the range; FAILED_PRECONDITION when the state file cannot be written
// (nothing is changed then). A clock the host does not let this process change is not an error:
// the outcome is not locked and says why.
absl::StatusOr<ClockLockOutcome> LockClocks(const ClockLockOptions& options);

// Puts back every change the state file records, last first, and removes the file; a line per
// setting put back ("" when the file does not exist). Changes that cannot be put back stay in the
// file, and the error names them.
absl::StatusOr<std::string> RestoreClocks(const std::string& state_file,
                                          const std::string& nvml_library = "libnvidia-ml.so.1");

}  // namespace kprof::core
