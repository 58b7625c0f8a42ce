#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "report/statistics.h"

namespace kprof::report {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

size_t SplitMix64::Below(size_t n) {
  return static_cast<size_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
}

// Whether C(m + n, m), the number of orderings of two samples without ties, stays below 2^100:
// then the exact tail below counts them in 128-bit integers without overflow.
bool CountsFit(size_t m, size_t n) {
  if (m > n) std::swap(m, n);
  long double count = 1;
  for (size_t k = 1; k <= m; ++k) {
    count = count * static_cast<long double>(n + k) / static_cast<long double>(k);
    if (count >= 0x1p100L) return false;
  }
  return true;
}

// U's distribution for samples of sizes m and n without ties is the Gaussian binomial
// coefficient [m+n choose m] as a polynomial in q, built as the product over k = 1..m of
// (1 - q^(n+k)) / (1 - q^k), each step itself a polynomial. O(m^2 n), with m the smaller size.
std::vector<__int128> UCounts(size_t m, size_t n) {
  if (m > n) std::swap(m, n);
  std::vector<__int128> f(m * n + m + 1, 0);  // room for the product before the division
  f[0] = 1;
  size_t degree = 0;
  for (size_t k = 1; k <= m; ++k) {
    // Times (1 - q^(n+k)), highest terms first so that each reads the old values.
    const size_t shift = n + k;
    for (size_t d = degree + shift; d >= shift; --d) f[d] -= f[d - shift];
    degree += shift;
    // Over (1 - q^k): g[d] = f[d] + g[d - k].
    for (size_t d = k; d <= degree; ++d) f[d] += f[d - k];
    degree -= k;
  }
  f.resize(degree + 1);
  return f;
}

namespace {

// P(U >= u), counted exactly (CountsFit), then each count rounded to a double and divided: what
// the Python client computes from its own exact integers, to the last bit.
double ExactUpperTail(size_t m, size_t n, double u) {
  const std::vector<__int128> f = UCounts(m, n);
  __int128 total = 0, upper = 0;
  for (size_t d = 0; d < f.size(); ++d) {
    total += f[d];
    if (static_cast<double>(d) >= u) upper += f[d];
  }
  return static_cast<double>(upper) / static_cast<double>(total);
}

// Ranks of the pooled samples (ties get the mean of their ranks, from 1), and the tie term
// sum(t^3 - t) over groups of t tied values.
std::vector<double> Ranks(const std::vector<double>& pooled, double* tie_term) {
  std::vector<size_t> order(pooled.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pooled[a] < pooled[b]; });
  std::vector<double> ranks(pooled.size());
  *tie_term = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && pooled[order[j + 1]] == pooled[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    const double t = static_cast<double>(j - i + 1);
    *tie_term += t * t * t - t;
    i = j + 1;
  }
  return ranks;
}

// The median of a bootstrap resample of `sorted` (ascending): n indices drawn, counted, and the
// values at the middle ranks read off the counts. O(n), no sort.
double ResampledMedian(const std::vector<double>& sorted, SplitMix64& random,
                       std::vector<uint32_t>& counts) {
  const size_t n = sorted.size();
  counts.assign(n, 0);
  for (size_t i = 0; i < n; ++i) ++counts[random.Below(n)];
  const size_t low_rank = (n - 1) / 2, high_rank = n / 2;
  double low = 0, high = 0;
  size_t seen = 0;
  bool have_low = false;
  for (size_t k = 0; k < n; ++k) {
    seen += counts[k];
    if (!have_low && seen > low_rank) {
      low = sorted[k];
      have_low = true;
    }
    if (seen > high_rank) {
      high = sorted[k];
      break;
    }
  }
  return (low + high) / 2;
}

}  // namespace

MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y) {
  MannWhitney result;
  if (x.empty() || y.empty()) return result;
  std::vector<double> pooled(x);
  pooled.insert(pooled.end(), y.begin(), y.end());
  double tie_term = 0;
  const std::vector<double> ranks = Ranks(pooled, &tie_term);
  const double n1 = static_cast<double>(x.size()), n2 = static_cast<double>(y.size());
  double r1 = 0;
  for (size_t i = 0; i < x.size(); ++i) r1 += ranks[i];
  result.u = r1 - n1 * (n1 + 1) / 2;
  const double u = std::max(result.u, n1 * n2 - result.u);
  // As scipy's method "auto": exact when a sample has at most 8 values and none are tied.
  // (and while the orderings can be counted exactly: past 2^100 of them, the approximation).
  result.exact = (x.size() <= 8 || y.size() <= 8) && tie_term == 0 && CountsFit(x.size(), y.size());
  double p = 0;
  if (result.exact) {
    p = 2 * ExactUpperTail(x.size(), y.size(), u);
  } else {
    const double n = n1 + n2;
    const double s = std::sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))));
    const double z = (u - n1 * n2 / 2 - 0.5) / s;  // with the continuity correction
    p = std::erfc(z / std::sqrt(2.0));             // twice the normal's upper tail
  }
  result.p = std::clamp(std::isnan(p) ? 1.0 : p, 0.0, 1.0);
  return result;
}

Interval BootstrapChangeInterval(const std::vector<double>& base, const std::vector<double>& fresh,
                                 double confidence, int resamples) {
  Interval interval;
  if (base.empty() || fresh.empty() || resamples < 1) return interval;
  SplitMix64 random(kCompareSeed);
  std::vector<double> a(base), b(fresh), changes;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<uint32_t> counts;
  changes.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    // Base's draws first, then new's: the order the other clients draw in too.
    const double base_median = ResampledMedian(a, random, counts);
    const double fresh_median = ResampledMedian(b, random, counts);
    // A resample whose base median is 0 (repeats that read no time) has no ratio: left out.
    if (base_median > 0) changes.push_back(fresh_median / base_median - 1);
  }
  if (changes.empty()) return interval;
  const double tail = (1 - confidence) / 2 * 100;
  interval.low = Percentile(changes, tail);
  interval.high = Percentile(std::move(changes), 100 - tail);
  return interval;
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster:
      return "faster";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kSame:
      return "same";
    case Verdict::kNoisy:
      return "noisy";
    case Verdict::kInsufficient:
      break;
  }
  return "insufficient";
}

Comparison CompareRepeats(const std::vector<double>& base, const std::vector<double>& fresh,
                          const CompareOptions& options) {
  Comparison c;
  c.base_repeats = base.size();
  c.new_repeats = fresh.size();
  if (!base.empty()) c.base_median = Median(base);
  if (!fresh.empty()) c.new_median = Median(fresh);
  c.change = c.new_median / c.base_median - 1;
  if (base.size() < options.min_repeats || fresh.size() < options.min_repeats ||
      !(c.base_median > 0) || !(c.new_median > 0)) {
    c.verdict = Verdict::kInsufficient;
    return c;
  }
  c.p = MannWhitneyU(base, fresh).p;
  c.interval = BootstrapChangeInterval(base, fresh, options.confidence, options.resamples);
  const bool significant = c.p < 1 - options.confidence;
  if (significant && c.interval.high < 0 && c.change < -options.threshold) {
    c.verdict = Verdict::kFaster;
  } else if (significant && c.interval.low > 0 && c.change > options.threshold) {
    c.verdict = Verdict::kSlower;
  } else {
    c.verdict = Verdict::kSame;
  }
  return c;
}

}  // namespace kprof::report
