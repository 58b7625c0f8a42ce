// Fuzz target: ReportFromJson answers every document with a Report or INVALID_ARGUMENT, and a
// report it accepts writes back to JSON that reads back to the same report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "report/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto report = kprof::report::ReportFromJson(text);
  if (!report.ok()) {
    if (report.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const std::string json = kprof::report::AsJson(*report);
  const auto again = kprof::report::ReportFromJson(json);
  if (!again.ok() || kprof::report::AsJson(*again) != json) std::abort();
  (void)kprof::report::AsTable(*report);
  (void)kprof::report::AsCsv(*report);
  return 0;
}
