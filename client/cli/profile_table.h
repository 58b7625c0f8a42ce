// kprof profile's table, for a terminal: a row per function (aggregated), its calls, the total
// and per-call time, its share, then as many of the collectors' metrics as fit the width (the
// shortest names first), the others named beneath. Every time (perf's clocks in nanoseconds
// too) is written in a unit that suits it, in each cell. --wide prints TVM's
// whole table instead (report::AsTable).
#pragma once

#include <string>

#include "report/report.h"

namespace kprof::client {

struct ProfileTableOptions {
  size_t width = 100;  // columns
  bool sort = true;    // longest total first
};

std::string ProfileTable(const report::Report& report, const ProfileTableOptions& options = {});

}  // namespace kprof::client
