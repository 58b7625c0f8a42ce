#include "core/collectors/collector_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "core/collectors/nvml_collector.h"
#include "core/collectors/papi_collector.h"
#include "core/collectors/perf_collector.h"
#include "core/collectors/rapl_collector.h"
#include "core/collectors/rusage_collector.h"
#include "core/collectors/tegra_rails.h"

namespace kprof::core {

std::vector<std::string> CollectorNames() {
  return {"rusage", "perf", "papi", "rapl", "nvml", "rails"};
}

absl::StatusOr<std::unique_ptr<MetricCollector>> CreateCollector(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string name(spec.substr(0, colon));
  const std::string options(colon == std::string_view::npos ? "" : spec.substr(colon + 1));
  // The collectors that take no options.
  const auto plain = [&](auto make) -> absl::StatusOr<std::unique_ptr<MetricCollector>> {
    if (colon != std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("collector '", name, "' takes no options, got '", options, "'"));
    }
    return std::unique_ptr<MetricCollector>(make());
  };
  if (name == "rusage") return plain([] { return std::make_unique<RusageCollector>(); });
  if (name == "nvml") return plain([] { return std::make_unique<NvmlCollector>(); });
  if (name == "rapl") return plain([] { return std::make_unique<RaplCollector>(); });
  if (name == "rails") return plain([] { return std::make_unique<TegraRailsCollector>(); });
  if (name == "papi") {
    std::vector<std::string> events = absl::StrSplit(options, ',', absl::SkipEmpty());
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<PapiCollector> papi,
                           PapiCollector::Create(std::move(events)));
    return std::unique_ptr<MetricCollector>(std::move(papi));
  }
  if (name == "perf") {
    const std::vector<std::string> events = absl::StrSplit(options, ',', absl::SkipEmpty());
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<PerfCollector> perf, PerfCollector::Create(events));
    return std::unique_ptr<MetricCollector>(std::move(perf));
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown collector '", name, "' (available: ", absl::StrJoin(CollectorNames(), ", "), ")"));
}

}  // namespace kprof::core
