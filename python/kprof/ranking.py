"""Which candidates are fastest, and which are not distinguishable from the fastest: a ranking.

    import kprof
    ranking = kprof.rank_repeats({"k1": [...seconds...], "k2": [...], ...})
    print(ranking.fastest, ranking.ties, ranking.decided)
    ranking = daemon.rank(jobs)         # a race over a Client's or a Farm's batches
    print(ranking.as_table(), end="")   # byte for byte what `kprof batch --rank` prints

The numbers are the CLI's (report/ranking.cc). The fastest is the candidate of the lowest median.
Every other one is compared with it by the shift of their log-times: the Hodges-Lehmann
estimate (the median of every pairwise difference) with its distribution-free confidence
interval from the Mann-Whitney U distribution (Moses' interval: exact while the orderings can
be counted, else the normal approximation). The change is exp(shift) - 1. A candidate whose
whole interval lies beyond the threshold is slower; one whose whole interval lies within it is
tied; any other is undecided. The confidence is split (Bonferroni) over the candidates and the
rounds a race may look, so that every verdict of a ranking holds together at the confidence.

A race measures every candidate `initial` repeats, then, round by round, brings the fastest
and the undecided to the next step of a geometric plan (x1.5, up to `max_repeats`): clear
losers stop after the first rounds, ties after they are shown to be within the threshold.
"""

import json
import math
import os
import random
import time

from kprof.compare import _aligned_table, _csv_number, _percent, _seconds, read_measurements
from kprof.interleave import merge_repeats
from kprof.report_metrics import shortest_decimal
from kprof.results import BenchmarkResult
from kprof.statistics import median as _median, u_counts as _u_counts

_INF = math.inf
_NAN = float("nan")


def plan(initial=10, max_repeats=300, growth=1.5):
    """The repeats a candidate has after each round of a race: initial, x growth, ..., max."""
    steps = [initial]
    while steps[-1] < max_repeats:
        steps.append(min(max_repeats, max(steps[-1] + 1, math.ceil(steps[-1] * growth))))
    return steps


_QUANTILES = {}


def _lower_count(m, n, alpha):
    """The largest c with P(U < c) <= alpha / 2 for samples of m and n without ties (0: none)."""
    key = (m, n, alpha)
    if key in _QUANTILES:
        return _QUANTILES[key]
    c = 0
    if math.comb(m + n, min(m, n)) < 2 ** 100:
        counts = _u_counts(m, n)
        total, below = float(sum(counts)), 0
        for d, count in enumerate(counts):
            below += count
            if float(below) / total > alpha / 2:
                break
            c = d + 1
    else:
        mean, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
        low, high = 0, m * n // 2  # P(U <= c - 1) as the normal with continuity grows with c
        while low < high:
            mid = (low + high + 1) // 2
            if 0.5 * math.erfc(-(mid - 0.5 - mean) / (sd * math.sqrt(2.0))) <= alpha / 2:
                low = mid
            else:
                high = mid - 1
        c = low
    c = min(c, m * n // 2)  # an interval's ends in order, whatever alpha is
    _QUANTILES[key] = c
    return c


def _kth_difference(x, y, k):
    """The k-th smallest (from 0) of every y[j] - x[i], x and y sorted, without holding the m x n
    differences: as report/ranking.cc selects it (rows ascend along j and descend along i, so
    two pointers count what lies below a pivot in every row), the same bits."""
    m, n = len(x), len(y)
    lo, hi = [0] * m, [n] * m
    draw = random.Random(m * 1000003 + n)

    def count(pivot, or_equal):
        out, j = [0] * m, 0
        for i, a in enumerate(x):
            if or_equal:
                while j < n and y[j] - a <= pivot:
                    j += 1
            else:
                while j < n and y[j] - a < pivot:
                    j += 1
            out[i] = min(max(j, lo[i]), hi[i])
        return out

    while True:
        left = sum(h - l for l, h in zip(lo, hi))
        if left <= 4 * (m + n):  # few enough to hold
            rest = sorted(y[j] - x[i] for i in range(m) for j in range(lo[i], hi[i]))
            return rest[k]
        pick, row = draw.randrange(left), 0
        while pick >= hi[row] - lo[row]:
            pick -= hi[row] - lo[row]
            row += 1
        pivot = y[lo[row] + pick] - x[row]
        below, through = count(pivot, False), count(pivot, True)
        less = sum(b - l for b, l in zip(below, lo))
        equal = sum(t - b for t, b in zip(through, below))
        if k < less:
            hi = below
        elif k < less + equal:
            return pivot
        else:
            k -= less + equal
            lo = through


def shift_interval(base, new, alpha):
    """(estimate, low, high) of log(new) - log(base): the Hodges-Lehmann estimate and its
    1 - alpha interval (infinite ends when the samples are too small for that confidence)."""
    x, y = sorted(math.log(v) for v in base), sorted(math.log(v) for v in new)
    k = len(x) * len(y)
    middle = (k - 1) // 2
    low = _kth_difference(x, y, middle)
    high = low if k % 2 == 1 else _kth_difference(x, y, middle + 1)
    estimate = low if k % 2 == 1 else low + (high - low) * 0.5
    c = _lower_count(len(x), len(y), alpha)
    if c < 1:
        return estimate, -_INF, _INF
    return estimate, _kth_difference(x, y, c - 1), _kth_difference(x, y, k - c)


class RankedCandidate:
    """One candidate's place: its state (fastest, tied, slower, undecided or failed), repeats,
    median seconds, and its change from the fastest with that change's interval."""

    def __init__(self, name, state, repeats=0, median=_NAN, change=_NAN,
                 interval=(_NAN, _NAN), error="", decided_round=0):
        self.name, self.state, self.repeats, self.median = name, state, repeats, median
        self.change, self.interval, self.error = change, interval, error
        # A race's slower candidate: the round that found it slower, whose change and interval
        # it keeps (0: these repeats').
        self.decided_round = decided_round

    def __repr__(self):
        return f"RankedCandidate({self.name!r}, {self.state}, change={self.change:+.4f})"


# What a ranking's figures are (the CLI's kRankMethod).
METHOD = ("change: from the fastest, the Hodges-Lehmann shift of log-times; interval: Moses', every "
          "one at the confidence together (kprof compare shows the median ratio, one pair at a time)")


def _valid(seconds):
    return bool(seconds) and all(math.isfinite(v) and v > 0 for v in seconds)


def rank_repeats(repeats, confidence=0.95, threshold=1.0, looks=1, slower=()):
    """A Ranking of candidates' repeats ({name: [seconds per call]}, in the order given).
    `looks`: the rounds a race may look in (1 for one set of repeats); `slower`: names a race
    already found slower, which stay slower — as {name: RankedCandidate of that verdict}, with
    its change and interval, or as names alone, judged again."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: a probability between 0 and 1, e.g. 0.95")
    if not 0 <= threshold < 100:
        raise ValueError(f"threshold {threshold}: a percentage from 0 to under 100 (default 1)")
    names = list(repeats)
    samples = {name: [float(v) for v in repeats[name]] for name in names}
    valid = [name for name in names if _valid(samples[name])]
    verdicts = slower if isinstance(slower, dict) else {}
    slower = set(slower)
    looks = max(1, looks)
    alpha = (1 - confidence) / (max(1, len(valid) - 1) * looks)
    limit = threshold / 100
    medians = {name: _median(samples[name]) for name in valid}
    contenders = [name for name in valid if name not in slower]
    fastest = min(contenders, key=lambda name: medians[name]) if contenders else None
    placed = []
    for name in names:
        seconds = samples[name]
        if name not in medians:
            why = "no repeats" if not seconds else "a repeat that is not a positive time"
            placed.append(RankedCandidate(name, "failed", len(seconds), error=why))
            continue
        if fastest is None:  # every valid one found slower than one that has since failed
            placed.append(RankedCandidate(name, "slower", len(seconds), medians[name]))
            continue
        if name == fastest:
            placed.append(RankedCandidate(name, "fastest", len(seconds), medians[name], 0.0,
                                          (0.0, 0.0)))
            continue
        if name in verdicts:  # its verdict's own figures, not those of later repeats
            v = verdicts[name]
            placed.append(RankedCandidate(name, "slower", len(seconds), medians[name], v.change,
                                          v.interval, decided_round=v.decided_round))
            continue
        estimate, low, high = shift_interval(samples[fastest], seconds, alpha)
        change, interval = math.expm1(estimate), (math.expm1(low), math.expm1(high))
        if name in slower or interval[0] > limit:
            state = "slower"
        elif interval[1] <= limit and interval[0] >= -limit:
            state = "tied"
        else:
            state = "undecided"
        placed.append(RankedCandidate(name, state, len(seconds), medians[name], change,
                                      interval))
    order = {"fastest": 0, "tied": 1, "undecided": 1, "slower": 2, "failed": 3}
    placed.sort(key=lambda c: (order[c.state], c.median if c.state != "failed" else 0.0))
    return Ranking(placed, confidence, threshold, looks, alpha)


class Ranking:
    """Candidates fastest first: then those tied with it or undecided (by median), then the
    slower ones (by median), then those that failed. `ties` names the fastest and every
    candidate not shown slower; `decided` says whether each of them is shown within the
    threshold (else the repeats ran out first)."""

    def __init__(self, candidates, confidence, threshold, looks, alpha, rounds=1, repeats=None,
                 seconds=_NAN):
        self.candidates = candidates
        self.confidence, self.threshold = confidence, threshold
        self.looks, self.alpha = looks, alpha
        self.rounds = rounds
        self.repeats = sum(c.repeats for c in candidates) if repeats is None else repeats
        self.seconds = seconds
        self.results = {}  # a race's: each measured candidate's BenchmarkResult

    @property
    def fastest(self):
        return next((c.name for c in self.candidates if c.state == "fastest"), None)

    @property
    def ties(self):
        return [c.name for c in self.candidates if c.state in ("fastest", "tied", "undecided")]

    @property
    def decided(self):
        return all(c.state != "undecided" for c in self.candidates)

    def as_dict(self):
        """The {"ranking": ...} object kprof prints (numbers that are not finite are None)."""
        def number(v):
            return v if math.isfinite(v) else None
        candidates = []
        for c in self.candidates:
            item = {"name": c.name, "state": c.state, "repeats": c.repeats,
                    "median": number(c.median), "change": number(c.change),
                    "interval": [number(c.interval[0]), number(c.interval[1])]}
            if c.error:
                item["error"] = c.error
            if c.decided_round:
                item["decided_round"] = c.decided_round
            candidates.append(item)
        return {"ranking": {"method": METHOD, "fastest": self.fastest, "ties": self.ties, "decided": self.decided,
                            "confidence": self.confidence, "threshold": self.threshold / 100,
                            "looks": self.looks, "alpha": self.alpha, "rounds": self.rounds,
                            "repeats": self.repeats, "seconds": number(self.seconds),
                            "candidates": candidates}}

    def as_json(self):
        """As `kprof rank --format json` prints it."""
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False) + "\n"

    def as_line(self):
        """As the last line of `kprof batch --rank` prints it."""
        return json.dumps(self.as_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"

    def as_csv(self):
        lines = ["name,state,median_seconds,change,interval_low,interval_high,repeats"]
        for c in self.candidates:
            quoted = '"' + c.name.replace('"', '""') + '"'
            lines.append(",".join([quoted, c.state, _csv_number(c.median), _csv_number(c.change),
                                   _csv_number(c.interval[0]), _csv_number(c.interval[1]),
                                   str(c.repeats)]))
        return "\n".join(lines) + "\n"

    def as_table(self):
        cells = [["rank", "candidate", "median", "change", "interval", "state", "repeats"]]
        counts = {}
        for i, c in enumerate(self.candidates):
            counts[c.state] = counts.get(c.state, 0) + 1
            failed = c.state == "failed"
            interval = "-" if failed or c.state == "fastest" else \
                f"[{_percent(c.interval[0])}, {_percent(c.interval[1])}]"
            cells.append(["-" if failed else str(i + 1), c.name, _seconds(c.median),
                          "-" if c.state == "fastest" else _percent(c.change), interval, c.state,
                          str(c.repeats)])
        notes = [f"slower in round {c.decided_round}: its change and interval are that round's; "
                 "measured no more" if c.decided_round else c.error for c in self.candidates]
        out = [_aligned_table(cells, (1, 5), notes)]
        percent = shortest_decimal(self.threshold / 100 * 100)
        confidence = "%g%%" % (self.confidence * 100)
        fastest = self.fastest
        if fastest is None:
            fastest = "none left (every candidate failed, or was found slower than one that failed)"
        out.append(f"\nfastest: {fastest}\n")
        out.append(f"tie set: {_names(self.ties)} (not shown slower than the fastest by over "
                   f"{percent}%; every verdict at {confidence} confidence together)\n")
        undecided = [c.name for c in self.candidates if c.state == "undecided"]
        if not undecided:
            out.append(f"decided: each of the tie set is shown within {percent}% of the fastest\n")
        else:
            out.append(f"undecided: {_names(undecided)} (the repeats ran out before each was "
                       f"shown within {percent}% or beyond it)\n")
        text = (f"{counts.get('slower', 0)} slower, {counts.get('failed', 0)} failed; "
                f"{self.repeats} repeats in {self.rounds} "
                f"{'round' if self.rounds == 1 else 'rounds'}")
        if math.isfinite(self.seconds):
            text += ", %.1f s" % self.seconds
        out.append(text + "\n" + METHOD + "\n")
        return "".join(out)

    def __repr__(self):
        return f"Ranking(fastest={self.fastest!r}, ties={self.ties!r}, decided={self.decided})"


def _names(names):
    shown = ", ".join(names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def rank_results(*paths, confidence=0.95, threshold=1.0, accept_noisy=False):
    """Ranks the measurements of result files as `kprof rank FILE...` does: one that did not
    converge or came with a warning (a busy host) is left out, naming why, unless
    accept_noisy."""
    repeats, errors, file_of = {}, {}, {}
    for path in paths:
        path = os.fspath(path)
        for m in read_measurements(path):
            if m.name in file_of:
                where = f"twice in '{path}'" if file_of[m.name] == path else \
                    f"in '{file_of[m.name]}' and in '{path}'"
                raise ValueError(
                    f"the measurement '{m.name}' is {where} "
                    "(names must differ: rank the files apart, or give their jobs other ids)")
            file_of[m.name] = path
            repeats[m.name] = m.seconds
            if m.error:
                errors[m.name] = m.error
            elif m.noise and not accept_noisy:
                errors[m.name] = f"noisy, not ranked (--accept-noisy ranks it): {m.noise}"
                repeats[m.name] = []
    ranking = rank_repeats(repeats, confidence, threshold)
    for c in ranking.candidates:
        if c.name in errors:
            c.error = errors[c.name]
    return ranking


class Race:
    """A race as a state machine, as core::Race: next_round() says how many repeats each
    candidate (by index) gets next, add() gives them, until next_round() asks for none."""

    def __init__(self, names, confidence=0.95, threshold=1.0, initial=10, max_repeats=300):
        if not 2 <= initial <= 2000:
            raise ValueError(f"initial {initial}: repeats of the first round, from 2 to 2000")
        if not initial <= max_repeats <= 2000:
            raise ValueError(f"max_repeats {max_repeats}: from initial ({initial}) to 2000")
        self.names = list(names)
        self.confidence, self.threshold = confidence, threshold
        self.plan = plan(initial, max_repeats)
        self.repeats = [[] for _ in self.names]
        self.errors = [""] * len(self.names)
        self.slower = {}  # name: its RankedCandidate when found slower
        self.round = 0
        self.stopped = False

    def next_round(self):
        if self.stopped or self.round >= len(self.plan):
            return []
        if self.round == 0:
            planned = [(i, self.plan[0]) for i in range(len(self.names)) if not self.errors[i]]
        else:
            ranking = self.current()
            state = {c.name: c.state for c in ranking.candidates}
            for c in ranking.candidates:
                if c.state == "slower" and c.name not in self.slower:
                    c.decided_round = self.round
                    self.slower[c.name] = c
            if ranking.decided:
                return []
            target = self.plan[self.round]
            planned = [(i, target - len(self.repeats[i])) for i, name in enumerate(self.names)
                       if state[name] in ("fastest", "undecided") and
                       len(self.repeats[i]) < target]
        if planned:
            self.round += 1
        return planned

    def add(self, i, seconds):
        self.repeats[i].extend(seconds)

    def fail(self, i, error):
        self.errors[i] = error

    def withdraw(self):
        """The round next_round() just handed out is not measured, and no other will be."""
        if self.round > 0:
            self.round -= 1
        self.stopped = True

    def current(self):
        ranking = rank_repeats({name: [] if self.errors[i] else self.repeats[i]
                                for i, name in enumerate(self.names)},
                               self.confidence, self.threshold, len(self.plan), self.slower)
        ranking.rounds = self.round
        index = {name: i for i, name in enumerate(self.names)}
        for c in ranking.candidates:
            i = index[c.name]
            if self.errors[i]:
                c.error, c.repeats = self.errors[i], len(self.repeats[i])
        ranking.repeats = sum(c.repeats for c in ranking.candidates)
        return ranking


_TURN = 5  # repeats per job of a round: candidates take turns, so drift falls on all alike


def race(batch, jobs, confidence=0.95, threshold=1.0, initial=10, max_repeats=300, budget=None):
    """Races `jobs` (dicts, as for batch; without "repeat" or "max_relative_stddev", which the
    race sets) through `batch` (a Client's or a Farm's) as `kprof batch --rank` does, and
    returns the Ranking, with `results`: each measured candidate's BenchmarkResult of all its
    repeats."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: a probability between 0 and 1, e.g. 0.95")
    if not 0 <= threshold < 100:
        raise ValueError(f"threshold {threshold}: a percentage from 0 to under 100 (default 1)")
    if budget is not None and not (0 < budget < math.inf):
        raise ValueError(f"budget {budget}: seconds, more than 0 (None: no budget)")
    jobs = [dict(job) for job in jobs]
    names = []
    for job in jobs:
        if "repeat" in job or job.get("max_relative_stddev", 0):
            raise ValueError(f"job {job.get('id')!r}: the race sets each candidate's repeats: "
                             "leave out 'repeat' and 'max_relative_stddev'")
        name = str(job.get("id", ""))
        if not name or name in names:
            raise ValueError(f"job id '{name}' is empty or used twice (ids must be unique)")
        names.append(name)
    state = Race(names, confidence, threshold, initial, max_repeats)
    merged = [None] * len(jobs)
    # Each candidate's repeats sent so far: with randomize_layout its next job goes on through
    # its layouts instead of drawing the first ones again.
    sent = [0] * len(jobs)
    start, seconds_per_repeat, so_far = time.monotonic(), 0.0, 0
    while True:
        planned = state.next_round()
        if not planned:
            break
        total = sum(add for _, add in planned)
        if budget is not None and state.round > 1 and \
                time.monotonic() - start + seconds_per_repeat * total > budget:
            state.withdraw()
            break
        turns = max((add + _TURN - 1) // _TURN for _, add in planned)
        round_jobs, candidate_of = [], {}
        for turn in range(turns):
            for i, add in planned:
                if turn * _TURN >= add:
                    continue
                job = dict(jobs[i], id=f"{state.round}.{turn}.{i}",
                           repeat=min(_TURN, add - turn * _TURN))
                if job.get("randomize_layout"):
                    job["first_layout_repeat"] = jobs[i].get("first_layout_repeat", 0) + sent[i]
                sent[i] += job["repeat"]
                candidate_of[job["id"]] = i
                round_jobs.append(job)
        failed_now = set()
        for result in batch(round_jobs):
            i = candidate_of.get(result.id)
            if i is None:
                continue
            if result.ok:
                response = result.result.raw
                state.add(i, list(response.seconds_per_call))
                merged[i] = merge_repeats(merged[i], response)
            elif i not in failed_now:
                failed_now.add(i)
                state.fail(i, f"{result.code.name}: {result.message}")
        so_far += total
        seconds_per_repeat = (time.monotonic() - start) / max(1, so_far)
    ranking = state.current()
    ranking.seconds = time.monotonic() - start
    ranking.results = {}
    for i, name in enumerate(names):
        if merged[i] is not None:
            ranking.results[name] = BenchmarkResult(merged[i])
    return ranking
