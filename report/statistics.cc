#include "report/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kprof::report {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

double Mean(const std::vector<double>& samples) {
  if (samples.empty()) return kNaN;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double Min(const std::vector<double>& samples) {
  if (samples.empty()) return kNaN;
  return *std::min_element(samples.begin(), samples.end());
}

double Max(const std::vector<double>& samples) {
  if (samples.empty()) return kNaN;
  return *std::max_element(samples.begin(), samples.end());
}

double Median(std::vector<double> samples) { return Percentile(std::move(samples), 50); }

double StdDev(const std::vector<double>& samples) {
  if (samples.empty()) return kNaN;
  const double mean = Mean(samples);
  double sum_of_squares = 0;
  for (double x : samples) sum_of_squares += (x - mean) * (x - mean);
  return std::sqrt(sum_of_squares / static_cast<double>(samples.size()));
}

double CoefficientOfVariation(const std::vector<double>& samples) {
  const double mean = Mean(samples);
  if (mean == 0) return kNaN;
  return StdDev(samples) / mean;
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty() || !(p >= 0 && p <= 100)) return kNaN;
  std::sort(samples.begin(), samples.end());
  const double rank = p / 100 * static_cast<double>(samples.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, samples.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  if (fraction == 0) return samples[below];  // exact rank: no interpolation (safe with inf)
  return samples[below] + (samples[above] - samples[below]) * fraction;
}

std::vector<size_t> Histogram(const std::vector<double>& samples, size_t bins) {
  std::vector<size_t> counts;
  double low = kNaN, high = kNaN;
  for (double x : samples) {
    if (!std::isfinite(x)) continue;
    low = std::isnan(low) ? x : std::min(low, x);
    high = std::isnan(high) ? x : std::max(high, x);
  }
  if (bins == 0 || std::isnan(low)) return counts;
  counts.assign(bins, 0);
  for (double x : samples) {
    if (!std::isfinite(x)) continue;
    const double at = high > low ? (x - low) / (high - low) * static_cast<double>(bins) : 0;
    ++counts[std::min(static_cast<size_t>(at), bins - 1)];
  }
  return counts;
}

std::vector<size_t> TukeyOutliers(const std::vector<double>& samples, double k) {
  std::vector<size_t> outliers;
  if (samples.size() < 4) return outliers;
  const double q1 = Percentile(samples, 25);
  const double q3 = Percentile(samples, 75);
  // No spread between the quartiles (a coarse clock reading the same tick): no fences to draw,
  // rather than calling every other value an outlier.
  if (!(q3 > q1)) return outliers;
  const double low = q1 - k * (q3 - q1);
  const double high = q3 + k * (q3 - q1);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i] < low || samples[i] > high) outliers.push_back(i);
  }
  return outliers;
}

std::vector<double> Without(const std::vector<double>& samples,
                            const std::vector<size_t>& excluded) {
  std::vector<double> kept;
  kept.reserve(samples.size());
  auto next = excluded.begin();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (next != excluded.end() && *next == i) {
      ++next;
      continue;
    }
    kept.push_back(samples[i]);
  }
  return kept;
}

Summary Summarize(const std::vector<double>& samples) {
  Summary s;
  s.count = samples.size();
  s.mean = Mean(samples);
  s.median = Median(samples);
  s.min = Min(samples);
  s.max = Max(samples);
  s.stddev = StdDev(samples);
  s.cv = CoefficientOfVariation(samples);
  return s;
}

}  // namespace kprof::report
