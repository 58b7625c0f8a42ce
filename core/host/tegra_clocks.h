// The clocks of a Jetson-class board (NVIDIA Tegra) that decide how steady a measurement is: the
// GPU's devfreq node and the memory controller's (EMC) clock, and whether clocks are locked the
// way jetson_clocks locks them (each minimum at its maximum). Unlocked DVFS is the first source
// of noise on these boards; the environment manifest reports them.
#pragma once

#include <cstdint>
#include <string>

#include "report/metric.h"

namespace kprof::core {

// The board's clocks as a Tegra exposes them under `root` ("/"): the GPU's devfreq node
// (sys/class/devfreq/*, the one whose device is a GPU: gv11b, ga10b, gp10b, gpu), the EMC
// clock (debugfs, root only), and the CPUs' cpufreq limits.
struct TegraClocks {
  bool is_tegra = false;     // a Tegra GPU devfreq node exists
  int64_t gpu_khz = -1;      // current; < 0 when unreadable
  int64_t gpu_min_khz = -1;  // the DVFS floor and ceiling
  int64_t gpu_max_khz = -1;
  int64_t emc_khz = -1;  // memory controller; debugfs, so root only
  // jetson_clocks pins each minimum to its maximum: GPU, and every CPU's cpufreq.
  bool locked = false;
  std::string unlocked_why;  // what is not pinned, when !locked
};
TegraClocks ReadTegraClocks(const std::string& root = "/");

// The Tegra GPU's devfreq node under `root` (its cur_freq, min_freq, max_freq in Hz); "" off
// Tegra.
std::string TegraGpuDevfreq(const std::string& root = "/");

// The Tegra GPU's current clock alone (one file), for the interference check; < 0 off Tegra.
int64_t TegraGpuKhz(const std::string& root = "/");

// The clocks for the environment manifest: "GPU frequency (MHz)", "GPU frequency min (MHz)",
// "GPU frequency max (MHz)", "EMC frequency (MHz)", "Clocks locked"; nothing off Tegra.
report::MetricMap TegraManifest(const std::string& root = "/");

}  // namespace kprof::core
