#include "core/collectors/collector_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collectors/rusage_collector.h"

namespace kprof::core {

std::vector<std::string> CollectorNames() { return {"rusage"}; }

absl::StatusOr<std::unique_ptr<MetricCollector>> CreateCollector(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string name(spec.substr(0, colon));
  if (name == "rusage") {
    if (colon != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("collector 'rusage' takes no options, got '",
                                                     std::string(spec.substr(colon + 1)), "'"));
    }
    return std::make_unique<RusageCollector>();
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown collector '", name, "' (available: ", absl::StrJoin(CollectorNames(), ", "), ")"));
}

}  // namespace kprof::core
