// What /proc/cpuinfo says of the processor: its name and, on hosts without cpufreq (most VMs),
// its clock. One parser for the environment manifest and for GetInfo, so that both name an
// arm64 board's CPU the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kprof::core {

// The value of the first `key : value` line whose key is exactly `key`, trimmed; nullopt when
// no line has that key.
std::optional<std::string> CpuInfoField(absl::string_view cpuinfo, absl::string_view key);

// The processor's name: "model name" (x86), else "Model" (arm64 boards, from the device tree:
// "NVIDIA Jetson AGX Orin Developer Kit"), else "Hardware" (older arm kernels); "" when the text
// gives none of them.
std::string CpuModelName(absl::string_view cpuinfo);

// The size of the CPU's largest cache (the last level: "32768K" in
// `root`sys/devices/system/cpu/cpu0/cache/index*/size); nullopt when sysfs says nothing.
std::optional<int64_t> LastLevelCacheBytes(const std::string& root = "/");

// This host's /proc/cpuinfo, read once (it costs ~70 us to generate, more on large hosts).
const std::string& HostCpuInfo();

}  // namespace kprof::core
