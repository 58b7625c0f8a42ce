// Summary statistics over samples (seconds per call of each repeat, say), as pure functions.
//
// Every function takes the samples by value or const reference and touches nothing else, so it
// is tested on literal vectors. Empty input yields NaN: there is no mean of nothing, and NaN
// says so where 0 would pass for a measurement.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

namespace kprof::report {

double Mean(const std::vector<double>& samples);
double Min(const std::vector<double>& samples);
double Max(const std::vector<double>& samples);

// The middle sample, or the mean of the two middle samples for an even count.
double Median(std::vector<double> samples);

// Population standard deviation (divides by n, as numpy.std and TVM's BenchmarkResult do);
// 0 for a single sample.
double StdDev(const std::vector<double>& samples);

// StdDev / Mean: the relative spread. NaN when the mean is 0.
double CoefficientOfVariation(const std::vector<double>& samples);

// The p-th percentile, p in [0, 100], interpolating linearly between the closest ranks (numpy's
// default). NaN for p outside [0, 100] or NaN.
double Percentile(std::vector<double> samples, double p);

// Indices, in increasing order, of the samples outside Tukey's fences [Q1 - k·IQR, Q3 + k·IQR]
// (quartiles as by Percentile). None for fewer than 4 samples, too few to tell an outlier from
// the spread, and none when Q1 = Q3, where there are no fences to draw.
std::vector<size_t> TukeyOutliers(const std::vector<double>& samples, double k = 1.5);

// Tukey's "far out" k: pictures of repeats draw those within these fences on their axis and
// count the rest apart, so that one stalled repeat does not squeeze the others into one bar.
inline constexpr double kFarOut = 3.0;

// The samples whose indices are not in `excluded` (sorted, as TukeyOutliers returns them).
std::vector<double> Without(const std::vector<double>& samples,
                            const std::vector<size_t>& excluded);

// Counts of the samples in `bins` equal bins from the smallest to the largest (the largest in
// the last bin). Every sample in the first bin when all are equal; empty for no samples or no
// bins. NaN and infinite samples are not counted.
std::vector<size_t> Histogram(const std::vector<double>& samples, size_t bins);

struct Summary {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  size_t count = 0;
  double mean = kUnset, median = kUnset, min = kUnset, max = kUnset, stddev = kUnset, cv = kUnset;
};

// All of the above at once, each computed as by its own function.
Summary Summarize(const std::vector<double>& samples);

}  // namespace kprof::report
