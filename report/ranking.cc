#include "report/ranking.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "report/statistics.h"

namespace kprof::report {

std::vector<size_t> RacePlan(size_t initial, size_t max_repeats, double growth) {
  std::vector<size_t> steps = {initial};
  while (steps.back() < max_repeats) {
    const auto grown = static_cast<size_t>(std::ceil(static_cast<double>(steps.back()) * growth));
    steps.push_back(std::min(max_repeats, std::max(steps.back() + 1, grown)));
  }
  return steps;
}

size_t LowerCount(size_t m, size_t n, double alpha) {
  // A race asks for the same few (m, n, alpha) over and over.
  thread_local std::map<std::tuple<size_t, size_t, double>, size_t> cache;
  const auto key = std::make_tuple(m, n, alpha);
  if (const auto found = cache.find(key); found != cache.end()) return found->second;
  size_t c = 0;
  if (CountsFit(m, n)) {
    const std::vector<__int128> counts = UCounts(m, n);
    __int128 total = 0, below = 0;
    for (const __int128 count : counts) total += count;
    for (size_t d = 0; d < counts.size(); ++d) {
      below += counts[d];
      if (static_cast<double>(below) / static_cast<double>(total) > alpha / 2) break;
      c = d + 1;
    }
  } else {
    // P(U <= c - 1) by the normal with continuity correction, which grows with c: the largest c
    // at or below alpha / 2, by bisection.
    const double mn = static_cast<double>(m) * static_cast<double>(n);
    const double mean = mn / 2;
    const double sd = std::sqrt(mn * static_cast<double>(m + n + 1) / 12);
    size_t low = 0, high = m * n / 2;
    while (low < high) {
      const size_t mid = (low + high + 1) / 2;
      const double p =
          0.5 * std::erfc(-(static_cast<double>(mid) - 0.5 - mean) / (sd * std::sqrt(2.0)));
      if (p <= alpha / 2) {
        low = mid;
      } else {
        high = mid - 1;
      }
    }
    c = low;
  }
  c = std::min(c, m * n / 2);  // an interval's ends in order, whatever alpha is
  cache.emplace(key, c);
  return c;
}

namespace {

// The k-th smallest (from 0) of every y[j] - x[i], x and y sorted, without building the m x n
// differences: rows i of the matrix y[j] - x[i] ascend along j and descend along i, so the
// elements below a pivot in every row are counted at once by two pointers. Each round draws a
// pivot among the candidates left and keeps the side that holds the k-th: O((m + n) log(m n))
// time expected, O(m + n) memory. The answer is one of the differences, computed as the whole
// matrix would hold it, so any other way of selecting it gives the same bits.
double KthDifference(const std::vector<double>& x, const std::vector<double>& y, size_t k) {
  const size_t m = x.size(), n = y.size();
  std::vector<size_t> lo(m, 0), hi(m, n), below(m), through(m);
  std::mt19937_64 random(m * 1000003 + n);
  // The elements of row i at or past position j that are (<, <=) `pivot`, for every row.
  const auto count = [&](double pivot, std::vector<size_t>& out, bool or_equal) {
    size_t j = 0;
    for (size_t i = 0; i < m; ++i) {
      while (j < n && (or_equal ? y[j] - x[i] <= pivot : y[j] - x[i] < pivot)) ++j;
      out[i] = std::clamp(j, lo[i], hi[i]);
    }
  };
  while (true) {
    size_t left = 0;
    for (size_t i = 0; i < m; ++i) left += hi[i] - lo[i];
    if (left <= 4 * (m + n)) {  // few enough to hold
      std::vector<double> rest;
      rest.reserve(left);
      for (size_t i = 0; i < m; ++i) {
        for (size_t j = lo[i]; j < hi[i]; ++j) rest.push_back(y[j] - x[i]);
      }
      std::nth_element(rest.begin(), rest.begin() + static_cast<ptrdiff_t>(k), rest.end());
      return rest[k];
    }
    size_t pick = std::uniform_int_distribution<size_t>(0, left - 1)(random), row = 0;
    while (pick >= hi[row] - lo[row]) {
      pick -= hi[row] - lo[row];
      ++row;
    }
    const double pivot = y[lo[row] + pick] - x[row];
    count(pivot, below, false);
    count(pivot, through, true);
    size_t less = 0, equal = 0;
    for (size_t i = 0; i < m; ++i) {
      less += below[i] - lo[i];
      equal += through[i] - below[i];
    }
    if (k < less) {
      hi = below;
    } else if (k < less + equal) {
      return pivot;
    } else {
      k -= less + equal;
      lo = through;
    }
  }
}

}  // namespace

Shift LogShift(const std::vector<double>& base, const std::vector<double>& fresh, double alpha) {
  std::vector<double> x(base.size()), y(fresh.size());
  std::transform(base.begin(), base.end(), x.begin(), [](double v) { return std::log(v); });
  std::transform(fresh.begin(), fresh.end(), y.begin(), [](double v) { return std::log(v); });
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  // Four order statistics of the differences: the median's two middle ones and the interval's.
  const auto nth = [&](size_t k) { return KthDifference(x, y, k); };
  const size_t count = x.size() * y.size();
  const size_t c = LowerCount(x.size(), y.size(), alpha);
  Shift shift;
  if (c < 1) {
    shift.interval = {-INFINITY, INFINITY};
  } else {
    shift.interval = {nth(c - 1), nth(count - c)};
  }
  // As Median computes it: the middle one, or between the two middle ones.
  const size_t middle = (count - 1) / 2;
  const double low = nth(middle);
  const double high = count % 2 == 1 ? low : nth(middle + 1);
  shift.estimate = count % 2 == 1 ? low : low + (high - low) * 0.5;
  return shift;
}

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kFastest:
      return "fastest";
    case RankState::kTied:
      return "tied";
    case RankState::kUndecided:
      return "undecided";
    case RankState::kSlower:
      return "slower";
    case RankState::kFailed:
      break;
  }
  return "failed";
}

std::string Ranking::Fastest() const {
  for (const RankedCandidate& c : candidates) {
    if (c.state == RankState::kFastest) return c.name;
  }
  return "";
}

std::vector<std::string> Ranking::Ties() const {
  std::vector<std::string> ties;
  for (const RankedCandidate& c : candidates) {
    if (c.state == RankState::kFastest || c.state == RankState::kTied ||
        c.state == RankState::kUndecided) {
      ties.push_back(c.name);
    }
  }
  return ties;
}

bool Ranking::Decided() const {
  return std::none_of(candidates.begin(), candidates.end(),
                      [](const RankedCandidate& c) { return c.state == RankState::kUndecided; });
}

namespace {

bool Valid(const std::vector<double>& seconds) {
  return !seconds.empty() && std::all_of(seconds.begin(), seconds.end(),
                                         [](double v) { return std::isfinite(v) && v > 0; });
}

}  // namespace

Ranking RankRepeats(const std::vector<std::pair<std::string, std::vector<double>>>& candidates,
                    const RankOptions& options, size_t looks,
                    const std::map<std::string, RankedCandidate>& slower) {
  Ranking ranking;
  ranking.confidence = options.confidence;
  ranking.threshold = options.threshold;
  ranking.looks = std::max<size_t>(1, looks);
  size_t valid = 0;
  std::vector<double> medians(candidates.size(), RankedCandidate::kUnset);
  size_t fastest = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!Valid(candidates[i].second)) continue;
    ++valid;
    medians[i] = Median(candidates[i].second);
    if (slower.count(candidates[i].first) > 0) continue;
    if (fastest == candidates.size() || medians[i] < medians[fastest]) fastest = i;
  }
  ranking.alpha = (1 - options.confidence) / (static_cast<double>(std::max<size_t>(2, valid) - 1) *
                                              static_cast<double>(ranking.looks));
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& [name, seconds] = candidates[i];
    RankedCandidate c;
    c.name = name;
    c.repeats = seconds.size();
    ranking.repeats += seconds.size();
    if (std::isnan(medians[i])) {
      c.state = RankState::kFailed;
      c.error = seconds.empty() ? "no repeats" : "a repeat that is not a positive time";
    } else if (fastest == candidates.size()) {
      // Every valid candidate was found slower than one that has since failed: slower they stay,
      // with nothing left to measure their change from.
      c.state = RankState::kSlower;
      c.median = medians[i];
    } else if (i == fastest) {
      c.state = RankState::kFastest;
      c.median = medians[i];
      c.change = 0;
      c.interval = {0, 0};
    } else if (const auto found = slower.find(name); found != slower.end()) {
      // Its verdict's own figures: an interval from later repeats of the fastest would not be
      // the one that decided it (and might not show it slower at all).
      c.state = RankState::kSlower;
      c.median = medians[i];
      c.change = found->second.change;
      c.interval = found->second.interval;
      c.decided_round = found->second.decided_round;
    } else {
      c.median = medians[i];
      const Shift shift = LogShift(candidates[fastest].second, seconds, ranking.alpha);
      c.change = std::expm1(shift.estimate);
      c.interval = {std::expm1(shift.interval.low), std::expm1(shift.interval.high)};
      if (c.interval.low > options.threshold) {
        c.state = RankState::kSlower;
      } else if (c.interval.high <= options.threshold && c.interval.low >= -options.threshold) {
        c.state = RankState::kTied;
      } else {
        c.state = RankState::kUndecided;
      }
    }
    ranking.candidates.push_back(std::move(c));
  }
  const auto order = [](RankState state) {
    switch (state) {
      case RankState::kFastest:
        return 0;
      case RankState::kTied:
      case RankState::kUndecided:
        return 1;
      case RankState::kSlower:
        return 2;
      case RankState::kFailed:
        break;
    }
    return 3;
  };
  std::stable_sort(ranking.candidates.begin(), ranking.candidates.end(),
                   [&](const RankedCandidate& a, const RankedCandidate& b) {
                     const double ma = a.state == RankState::kFailed ? 0 : a.median;
                     const double mb = b.state == RankState::kFailed ? 0 : b.median;
                     return std::make_pair(order(a.state), ma) < std::make_pair(order(b.state), mb);
                   });
  return ranking;
}

Race::Race(std::vector<std::string> names, const RankOptions& options)
    : names_(std::move(names)),
      options_(options),
      plan_(RacePlan(options.initial, options.max_repeats)),
      repeats_(names_.size()),
      errors_(names_.size()) {}

std::vector<std::pair<size_t, size_t>> Race::NextRound() {
  std::vector<std::pair<size_t, size_t>> round;
  if (stopped_ || round_ >= plan_.size()) return round;
  if (round_ == 0) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (errors_[i].empty()) round.emplace_back(i, plan_[0]);
    }
  } else {
    const Ranking ranking = Current();
    std::map<std::string, RankState> state;
    for (const RankedCandidate& c : ranking.candidates) {
      state[c.name] = c.state;
      if (c.state == RankState::kSlower && slower_.count(c.name) == 0) {
        RankedCandidate verdict = c;
        verdict.decided_round = round_;
        slower_.emplace(c.name, std::move(verdict));
      }
    }
    if (ranking.Decided()) return round;
    for (size_t i = 0; i < names_.size(); ++i) {
      const RankState s = state[names_[i]];
      if (s != RankState::kFastest && s != RankState::kUndecided) continue;
      if (repeats_[i].size() < plan_[round_])
        round.emplace_back(i, plan_[round_] - repeats_[i].size());
    }
  }
  if (!round.empty()) ++round_;
  return round;
}

void Race::Add(size_t candidate, const std::vector<double>& seconds) {
  repeats_[candidate].insert(repeats_[candidate].end(), seconds.begin(), seconds.end());
}

void Race::Fail(size_t candidate, std::string error) { errors_[candidate] = std::move(error); }

Ranking Race::Current() const {
  std::vector<std::pair<std::string, std::vector<double>>> candidates;
  for (size_t i = 0; i < names_.size(); ++i) {
    candidates.emplace_back(names_[i], errors_[i].empty() ? repeats_[i] : std::vector<double>());
  }
  Ranking ranking = RankRepeats(candidates, options_, plan_.size(), slower_);
  ranking.rounds = round_;
  ranking.repeats = 0;
  for (RankedCandidate& c : ranking.candidates) {
    const size_t i =
        static_cast<size_t>(std::find(names_.begin(), names_.end(), c.name) - names_.begin());
    if (i < names_.size() && !errors_[i].empty()) {
      c.error = errors_[i];
      c.repeats = repeats_[i].size();
    }
    ranking.repeats += c.repeats;
  }
  return ranking;
}

}  // namespace kprof::report
