#include "core/measure/kept_layouts.h"

#include <algorithm>

#include "report/statistics.h"

namespace kprof::core {

// The layouts of a randomized placement with the repeats each kept (those not dropped as
// throttled), renumbered as the result's repeats, and their medians; a layout whose every repeat
// was dropped leaves. `all_seconds`: the repeats before any was dropped.
std::vector<Layout> KeptLayouts(std::vector<Layout> given, const std::vector<double>& all_seconds,
                                const ClockWatch& throttle, const TimeJob& time,
                                const TimeResult& result) {
  std::vector<bool> dropped(all_seconds.size(), false);
  if (result.discarded_throttled > 0) {
    const std::vector<bool> throttled = throttle.Throttled();
    for (size_t i = 0; i < throttled.size() && i < dropped.size(); ++i) dropped[i] = throttled[i];
  }
  int64_t kept_before = 0;  // the index in the result of the layout's first kept repeat
  std::vector<Layout> layouts;
  for (size_t l = 0; l < given.size(); ++l) {
    Layout& layout = given[l];
    // Up to the next layout's first repeat: a job continuing a measurement's layouts may begin
    // in the middle of one.
    const auto first = static_cast<size_t>(layout.first_repeat);
    const size_t end =
        l + 1 < given.size()
            ? static_cast<size_t>(given[l + 1].first_repeat)
            : std::min(all_seconds.size(),
                       first + static_cast<size_t>(time.placement.repeats_per_layout));
    std::vector<double> kept;
    for (size_t i = first; i < end; ++i) {
      if (!dropped[i]) kept.push_back(all_seconds[i]);
    }
    layout.first_repeat = kept_before;
    layout.repeats = static_cast<int64_t>(kept.size());
    kept_before += layout.repeats;
    if (kept.empty()) continue;  // every repeat it held for was dropped
    layout.median = report::Median(kept);
    layouts.push_back(std::move(layout));
  }
  return layouts;
}

}  // namespace kprof::core
