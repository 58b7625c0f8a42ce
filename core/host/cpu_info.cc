#include "core/host/cpu_info.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"

namespace kprof::core {

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
