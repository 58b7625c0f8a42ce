#include "core/host/tegra_clocks.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"

namespace kprof::core {
namespace {

namespace fs = std::filesystem;

// A clock in Hz, when the file holds one above 0.
std::optional<int64_t> ReadInt(const fs::path& path) {
  const std::optional<uint64_t> value = base::ReadCountFile(path);
  if (!value || *value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(*value);
}

}  // namespace

namespace {

fs::path FindGpuDevfreq(const std::string& root) {
  for (const fs::path& node : base::DirectoryEntries(fs::path(root) / "sys/class/devfreq")) {
    const std::string name = node.filename().string();
    for (const char* gpu : {"gv11b", "ga10b", "gp10b", "gm20b", "gpu"}) {
      if (name.find(gpu) != std::string::npos) return node;
    }
  }
  return {};
}

// The devfreq node of a Tegra GPU under `root`, or an empty path. The host's is looked for
// once: devfreq nodes are there from boot, and every job samples the GPU clock twice. Fake
// trees (tests) are looked at every time.
fs::path GpuDevfreq(const std::string& root) {
  if (root != "/") return FindGpuDevfreq(root);
  static const fs::path* const host = new fs::path(FindGpuDevfreq(root));
  return *host;
}

}  // namespace

std::string TegraGpuDevfreq(const std::string& root) { return GpuDevfreq(root).string(); }

int64_t TegraGpuKhz(const std::string& root) {
  const fs::path node = GpuDevfreq(root);
  if (node.empty()) return -1;
  const std::optional<int64_t> hz = ReadInt(node / "cur_freq");
  return hz && *hz > 0 ? *hz / 1000 : -1;
}

TegraClocks ReadTegraClocks(const std::string& root) {
  TegraClocks clocks;
  const fs::path base(root);
  if (const fs::path node = GpuDevfreq(root); !node.empty()) {
    clocks.is_tegra = true;
    const auto khz = [&node](const char* file) -> int64_t {
      const std::optional<int64_t> hz = ReadInt(node / file);
      return hz && *hz > 0 ? *hz / 1000 : -1;
    };
    clocks.gpu_khz = khz("cur_freq");
    clocks.gpu_min_khz = khz("min_freq");
    clocks.gpu_max_khz = khz("max_freq");
  }
  if (!clocks.is_tegra) return clocks;
  for (const char* emc :
       {"sys/kernel/debug/bpmp/debug/clk/emc/rate", "sys/kernel/debug/clk/emc/clk_rate"}) {
    if (const std::optional<int64_t> hz = ReadInt(base / emc); hz && *hz > 0) {
      clocks.emc_khz = *hz / 1000;
      break;
    }
  }
  std::vector<std::string> loose;
  if (clocks.gpu_min_khz < 0 || clocks.gpu_max_khz < 0) {
    loose.push_back("the GPU's DVFS limits are unreadable");
  } else if (clocks.gpu_min_khz != clocks.gpu_max_khz) {
    loose.push_back(absl::StrCat("GPU between ", clocks.gpu_min_khz / 1000, " and ",
                                 clocks.gpu_max_khz / 1000, " MHz"));
  }
  for (const fs::path& cpu : base::DirectoryEntries(base / "sys/devices/system/cpu", "cpu")) {
    const std::optional<int64_t> low = ReadInt(cpu / "cpufreq/scaling_min_freq");
    const std::optional<int64_t> high = ReadInt(cpu / "cpufreq/scaling_max_freq");
    if (low && high && *low != *high) {
      loose.push_back(absl::StrCat(cpu.filename().string(), " between ", *low / 1000, " and ",
                                   *high / 1000, " MHz"));
      break;  // one CPU says enough
    }
  }
  clocks.locked = loose.empty();
  for (const std::string& why : loose) {
    absl::StrAppend(&clocks.unlocked_why, clocks.unlocked_why.empty() ? "" : "; ", why);
  }
  return clocks;
}

report::MetricMap TegraManifest(const std::string& root) {
  report::MetricMap m;
  const TegraClocks clocks = ReadTegraClocks(root);
  if (!clocks.is_tegra) return m;
  const auto mhz = [](int64_t khz) -> report::MetricValue {
    if (khz < 0) return std::string("unavailable");
    return report::Count{khz / 1000};
  };
  m["GPU frequency (MHz)"] = mhz(clocks.gpu_khz);
  m["GPU frequency min (MHz)"] = mhz(clocks.gpu_min_khz);
  m["GPU frequency max (MHz)"] = mhz(clocks.gpu_max_khz);
  m["EMC frequency (MHz)"] =
      clocks.emc_khz < 0 ? report::MetricValue(std::string("unavailable (debugfs, root only)"))
                         : mhz(clocks.emc_khz);
  m["Clocks locked"] =
      clocks.locked ? std::string("yes (as jetson_clocks sets them)")
                    : absl::StrCat("no: ", clocks.unlocked_why, " (sudo jetson_clocks locks them)");
  return m;
}

}  // namespace kprof::core
