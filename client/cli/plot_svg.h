// Pictures of measurements as self-contained SVG (no scripts, no external fonts or files): the
// repeats of one measurement, and comparisons.
#pragma once

#include <string>
#include <vector>

#include "report/compare.h"

namespace kprof::client {

// A histogram of `seconds` (one measurement's repeats) with the median marked and labelled,
// the axis from the fastest to the slowest repeat within Tukey's far-out fences (the repeats
// beyond drawn apart, in a bar at that end with their count), titled `title`.
std::string RepeatsSvg(const std::string& title, const std::vector<double>& seconds);

struct PlottedComparison {
  std::string name;
  report::Comparison comparison;
  std::vector<double> base, fresh;  // the repeats of each side
};

// Each comparison's change as a point within its interval, against no change, coloured by its
// verdict; with a single comparison, its two distributions beneath, on one axis.
std::string ComparisonSvg(const std::vector<PlottedComparison>& rows, double confidence);

}  // namespace kprof::client
