#include "core/host/cpu_info.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"

namespace kprof::core {

std::optional<int64_t> LastLevelCacheBytes(const std::string& root) {
  std::optional<int64_t> largest;
  for (int index = 0; index < 16; ++index) {
    const std::optional<std::string> size = base::ReadFirstLine(
        absl::StrCat(root, "sys/devices/system/cpu/cpu0/cache/index", index, "/size"));
    if (!size.has_value()) continue;
    int64_t value = 0;
    absl::string_view text = absl::StripAsciiWhitespace(*size);
    int64_t unit = 1;
    if (absl::ConsumeSuffix(&text, "K")) unit = 1024;
    if (absl::ConsumeSuffix(&text, "M")) unit = 1024 * 1024;
    if (!absl::SimpleAtoi(text, &value) || value <= 0) continue;
    if (!largest.has_value() || value * unit > *largest) largest = value * unit;
  }
  return largest;
}

std::optional<std::string> CpuInfoField(absl::string_view cpuinfo, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, colon)) != key) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return std::nullopt;
}

std::string CpuModelName(absl::string_view cpuinfo) {
  for (absl::string_view key : {"model name", "Model", "Hardware"}) {
    if (std::optional<std::string> name = CpuInfoField(cpuinfo, key); name && !name->empty()) {
      return *name;
    }
  }
  return "";
}

const std::string& HostCpuInfo() {
  static const std::string* const text =
      new std::string(base::ReadSmallFile("/proc/cpuinfo").value_or(""));
  return *text;
}

}  // namespace kprof::core
