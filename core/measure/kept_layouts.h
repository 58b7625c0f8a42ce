// The layouts a randomized placement's repeats kept once throttled repeats may have been
// dropped: what LocalRunner::Time reports of each placement.
#pragma once

#include <vector>

#include "core/measure/clock_watch.h"
#include "core/measure/local_runner.h"

namespace kprof::core {

// The layouts of a randomized placement with the repeats each kept (those not dropped as
// throttled), renumbered as the result's repeats, and their medians; a layout whose every repeat
// was dropped leaves. `all_seconds`: the repeats before any was dropped.
std::vector<Layout> KeptLayouts(std::vector<Layout> given, const std::vector<double>& all_seconds,
                                const ClockWatch& throttle, const TimeJob& time,
                                const TimeResult& result);

}  // namespace kprof::core
