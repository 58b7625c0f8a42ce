#include "server/worker/clock_helper.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "base/device.h"
#include "core/host/clock_lock.h"
#include "core/host/placement.h"
#include "nlohmann/json.hpp"

namespace kprof::server {
namespace {

using json = nlohmann::json;

int Print(const json& doc) {
  const std::string text = doc.dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

int Fail(const absl::Status& status) {
  return Print(
      {{"error", {{"code", static_cast<int>(status.code())}, {"message", status.message()}}}});
}

}  // namespace

int RunClockHelper(int argc, char** argv) {
  if (argc < 3) return Fail(absl::InvalidArgumentError("--clocks wants lock, record or restore"));
  const std::string action = argv[2];
  core::ClockLockOptions options;
  std::string device = "cpu:0";
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--device") {
      device = value;
    } else if (flag == "--state") {
      options.state_file = value;
    } else if (flag == "--sysfs-root") {
      options.sysfs_root = value;
    } else if (flag == "--mhz" || flag == "--floor-mhz") {
      if (!absl::SimpleAtoi(value, flag == "--mhz" ? &options.mhz : &options.floor_mhz)) {
        return Fail(absl::InvalidArgumentError(flag + " wants a whole number"));
      }
    } else if (flag == "--cpus") {
      absl::StatusOr<std::vector<int>> cpus = core::ParseCpuList(value);
      if (!cpus.ok()) return Fail(cpus.status());
      options.cpus = *std::move(cpus);
    } else {
      return Fail(absl::InvalidArgumentError("unknown option " + flag));
    }
  }
  if (action == "restore") {
    const absl::StatusOr<std::string> restored = core::RestoreClocks(options.state_file);
    if (!restored.ok()) return Fail(restored.status());
    return Print({{"restored", *restored}});
  }
  if (action != "lock" && action != "record") {
    return Fail(absl::InvalidArgumentError("--clocks wants lock, record or restore"));
  }
  const absl::StatusOr<base::Device> parsed = base::ParseDevice(device);
  if (!parsed.ok()) return Fail(parsed.status());
  options.device = *parsed;
  options.lock = action == "lock";
  const absl::StatusOr<core::ClockLockOutcome> outcome = core::LockClocks(options);
  if (!outcome.ok()) return Fail(outcome.status());
  json settings = json::array();
  for (const core::ClockSettingRecord& s : outcome->settings) {
    settings.push_back({{"name", s.name}, {"before", s.before}, {"during", s.during}});
  }
  return Print({{"locked", outcome->locked}, {"note", outcome->note}, {"settings", settings}});
}

}  // namespace kprof::server
