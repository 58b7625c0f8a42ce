// Collectors by name, as requests select them ("rusage"; later "papi:EVENT,...", "perf:...").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collectors/metric_collector.h"

namespace kprof::core {

// The names CreateCollector accepts.
std::vector<std::string> CollectorNames();

// A new collector for `spec`: its name, optionally followed by ':' and options. NOT_FOUND
// listing the available collectors for an unknown name; INVALID_ARGUMENT for options a
// collector does not take.
absl::StatusOr<std::unique_ptr<MetricCollector>> CreateCollector(std::string_view spec);

}  // namespace kprof::core
