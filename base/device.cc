#include "base/device.h"

#include <charconv>
#include <string>

#include "absl/strings/str_cat.h"

namespace kprof::base {

std::string_view DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return "cuda";
  }
  return "unknown";
}

std::string DeviceString(Device device) {
  return std::string(DeviceTypeName(device.type)) + std::to_string(device.id);
}

std::string DeviceSpec(Device device) {
  return std::string(DeviceTypeName(device.type)) + ":" + std::to_string(device.id);
}

absl::StatusOr<Device> ParseDevice(std::string_view spec) {
  const auto invalid = [spec](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", std::string(spec), "' ", std::string(why),
                     " (accepted: cpu, cpu:0, cuda, cuda:N with N a GPU's index)"));
  };
  const size_t colon = spec.find(':');
  const std::string_view type_name = spec.substr(0, colon);
  Device device;
  if (type_name == "cpu") {
    device.type = DeviceType::kCpu;
  } else if (type_name == "cuda") {
    device.type = DeviceType::kCuda;
  } else {
    return invalid("is of an unknown type");
  }
  if (colon == std::string_view::npos) return device;

  const std::string_view index = spec.substr(colon + 1);
  const char* end = index.data() + index.size();
  const auto [ptr, error] = std::from_chars(index.data(), end, device.id);
  if (index.empty() || error != std::errc() || ptr != end || device.id < 0) {
    return invalid("has no valid index after ':'");
  }
  return device;
}

}  // namespace kprof::base
