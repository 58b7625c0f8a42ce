// Ranking candidates by their repeats (seconds per call): the fastest, the candidates shown to be
// within a threshold of it (tied), those shown slower by more, and those still undecided — as
// pure functions, and a race that asks for more repeats only of the candidates in doubt.
//
// The fastest is the candidate of the lowest median. Every other one is compared with it by the
// shift of their log-times: the Hodges–Lehmann estimate (the median of all pairwise
// differences) with Moses' distribution-free interval, read off the Mann–Whitney U distribution
// (exact while the orderings can be counted in 128-bit integers, else the normal approximation
// with continuity correction). The change is exp(shift) - 1. Intervals need no resampling, so
// they hold at the small error rates a ranking needs: the confidence is split (Bonferroni) over
// the comparisons and over the rounds a race may look in, so that all its verdicts hold
// together at the confidence asked — a race that peeks after every round is no less sure than
// one set of repeats.
//
// A race measures each candidate `initial` repeats, then round by round brings the fastest and
// the undecided to the next step of a geometric plan (x1.5 up to `max_repeats`). Clear losers
// stop after a round or two, ties once shown within the threshold; a fixed plan must give every
// candidate the repeats the closest tie needs. The Python client (python/kprof/ranking.py)
// computes the same numbers to the last bit.
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report/compare.h"

namespace kprof::report {

// The repeats a candidate has after each round: initial, then x growth (at least +1), capped.
std::vector<size_t> RacePlan(size_t initial, size_t max_repeats, double growth = 1.5);

// The largest c with P(U < c) <= alpha / 2, for samples of m and n without ties; 0 when even
// the most extreme ordering is likelier than that (too few repeats for the confidence).
size_t LowerCount(size_t m, size_t n, double alpha);

struct Shift {
  double estimate = std::numeric_limits<double>::quiet_NaN();
  Interval interval;  // infinite ends when the samples are too small for 1 - alpha
};

// log(fresh) - log(base): the Hodges–Lehmann estimate and its 1 - alpha interval. Both samples
// positive and non-empty.
Shift LogShift(const std::vector<double>& base, const std::vector<double>& fresh, double alpha);

enum class RankState { kFastest, kTied, kUndecided, kSlower, kFailed };

// "fastest", "tied", "undecided", "slower", "failed".
const char* RankStateName(RankState state);

struct RankedCandidate {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  std::string name;
  RankState state = RankState::kFailed;
  size_t repeats = 0;
  double median = kUnset;
  double change = kUnset;  // from the fastest: exp(shift) - 1
  Interval interval;       // of the change
  std::string error;       // why it failed
  // A race's slower candidate: the round that found it slower (from 1), whose change and
  // interval (against the fastest of then) it keeps, measured no more. 0: these repeats'.
  size_t decided_round = 0;
};

struct RankOptions {
  double confidence = 0.95;  // that every verdict of the ranking holds, together
  double threshold = 0.01;   // changes within it are ties
  size_t initial = 10;       // a race's first round
  size_t max_repeats = 300;  // its last
};

struct Ranking {
  // Fastest first; then the tied and the undecided, then the slower, each by median; then the
  // failed, in the order given.
  std::vector<RankedCandidate> candidates;
  double confidence = 0.95, threshold = 0.01;
  size_t looks = 1;   // the rounds the confidence is split over
  double alpha = 0;   // the error rate of each interval
  size_t rounds = 1;  // rounds measured (a race's)
  size_t repeats = 0;
  double seconds = std::numeric_limits<double>::quiet_NaN();  // a race's wall time

  // The fastest's name; empty when every candidate failed.
  std::string Fastest() const;
  // The fastest and every candidate not shown slower (tied or undecided).
  std::vector<std::string> Ties() const;
  // Whether no candidate is undecided.
  bool Decided() const;
};

// Ranks `candidates` (name, repeats). Candidates without repeats, or with one that is not a
// positive finite time, fail. `looks`: the rounds a race may look in (1 for one set of
// repeats); `slower`: the candidates a race has already found slower, by name, which stay
// slower with the change and interval of that verdict.
Ranking RankRepeats(const std::vector<std::pair<std::string, std::vector<double>>>& candidates,
                    const RankOptions& options, size_t looks = 1,
                    const std::map<std::string, RankedCandidate>& slower = {});

// A race as a state machine: NextRound() says how many repeats each candidate (by index) is to
// get next, Add() gives them, until NextRound() asks for none.
class Race {
 public:
  Race(std::vector<std::string> names, const RankOptions& options);

  // (candidate index, repeats to add) for the next round, fastest and undecided only; empty
  // when the race is over: every candidate decided, the plan spent, or Stop() called.
  std::vector<std::pair<size_t, size_t>> NextRound();
  void Add(size_t candidate, const std::vector<double>& seconds);
  // The candidate's jobs failed: it leaves the race.
  void Fail(size_t candidate, std::string error);
  // No more rounds (a time budget spent).
  void Stop() { stopped_ = true; }
  // The round NextRound() just handed out is not measured, and no other will be.
  void Withdraw() {
    if (round_ > 0) --round_;
    stopped_ = true;
  }

  size_t round() const { return round_; }
  const std::vector<double>& repeats(size_t candidate) const { return repeats_[candidate]; }
  // The ranking of the repeats so far.
  Ranking Current() const;

 private:
  std::vector<std::string> names_;
  RankOptions options_;
  std::vector<size_t> plan_;
  std::vector<std::vector<double>> repeats_;
  std::vector<std::string> errors_;
  std::map<std::string, RankedCandidate> slower_;  // as found slower, by name
  size_t round_ = 0;                               // rounds handed out
  bool stopped_ = false;
};

}  // namespace kprof::report
