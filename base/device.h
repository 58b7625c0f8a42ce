// Devices: what a measurement runs on. One `cpu:0` per host (its CPU as a whole), one `cuda:N`
// per GPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kprof::base {

// The values are DLPack's DLDeviceType codes, so converting to and from a DLDevice is a cast.
enum class DeviceType : int32_t { kCpu = 1, kCuda = 2 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int32_t id = 0;

  friend bool operator==(Device a, Device b) { return a.type == b.type && a.id == b.id; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
  friend bool operator<(Device a, Device b) {
    return a.type != b.type ? a.type < b.type : a.id < b.id;
  }
};

// "cpu", "cuda".
std::string_view DeviceTypeName(DeviceType type);

// The report's name of a device, as the reference writes it: "cpu0", "cuda1".
std::string DeviceString(Device device);

// The command line's and the wire's name of a device: "cpu:0", "cuda:1".
std::string DeviceSpec(Device device);

// Parses "cpu", "cpu:0", "cuda", "cuda:3". Whether the device exists on this host is a separate
// question; malformed text is INVALID_ARGUMENT quoting it and saying what is accepted.
absl::StatusOr<Device> ParseDevice(std::string_view spec);

}  // namespace kprof::base
