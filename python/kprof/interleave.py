"""Interleaved candidates: every job's repeats run as jobs of one repeat each, in a random order
across the jobs drawn from a seed, so that a slow spell of the machine falls on all of them
rather than on the one that happened to run then (the C++ client's MeasureInterleaved,
`kprof batch --interleave SEED`; the same seed gives the same order there and here).

    for r in daemon.interleave(jobs, seed=7):   # a Client, or a Farm of one daemon
        print(r.id, r.result.median, list(r.result.raw.run_order))

Each job comes back once, its repeats merged in its own order as if it had run them itself,
`run_order` giving each repeat's place in the run. With "discard_throttled" the throttled
repeats are left out and counted; with "randomize_layout" each part takes the layout its repeat
has in the whole job ("first_layout_repeat").
"""

import array
import math

import grpc

from kprof.results import BatchResult, BenchmarkResult
from kprof.statistics import median as _median

_MASK = (1 << 64) - 1
_MAX_REPEAT = 100_000
# Parts are made and sent this many at a time: a run of 100 jobs x 100 000 repeats holds 4 bytes
# a repeat and one chunk of jobs, not ten million of them.
_CHUNK = 4096


def _splitmix64(seed):
    """SplitMix64's stream from `seed`, as report::SplitMix64 draws it."""
    state = seed & _MASK
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield z ^ (z >> 31)


def interleave_slots(repeats, seed):
    """The job at each place of the run order (an array of 4-byte ints): a permutation drawn
    from `seed` alone, as the C++ client's InterleaveSlots draws it."""
    slots = array.array("I")
    for j, n in enumerate(repeats):
        slots.extend([j] * n)
    draws = _splitmix64(seed)
    for i in range(len(slots), 1, -1):  # Fisher-Yates from the top, Lemire's reduction
        k = (next(draws) * i) >> 64
        slots[i - 1], slots[k] = slots[k], slots[i - 1]
    return slots


def interleave_order(repeats, seed):
    """The run order of `repeats[j]` repeats of each job j: (job, repeat) pairs, every one once,
    a permutation drawn from `seed` alone; each job's repeats in their own order."""
    order, taken = [], [0] * len(repeats)
    for j in interleave_slots(repeats, seed):
        order.append((j, taken[j]))
        taken[j] += 1
    return order


def summarize(response):
    """Sets `response`'s statistics and rel_stddev from all its seconds_per_call, as the CLI
    does for merged repeats; the parts' outlier filtering is dropped."""
    seconds = list(response.seconds_per_call)
    stats = response.statistics
    total = 0.0
    for v in seconds:  # summed in order, as the CLI does
        total += v
    stats.mean = total / len(seconds)
    stats.median = _median(seconds)
    stats.min, stats.max = min(seconds), max(seconds)
    stats.std = math.sqrt(sum((v - stats.mean) ** 2 for v in seconds) / len(seconds))
    stats.cv = stats.std / stats.mean if stats.mean else float("nan")
    response.rel_stddev = stats.cv
    response.ClearField("filtered_statistics")
    del response.outliers[:]


def merge_repeats(merged, part):
    """Adds `part`'s repeats (a TimeEvaluateResponse) to `merged` (None for the first), with
    their throttled repeats, clock reasons and layouts, and returns it, summarized."""
    if merged is None:
        merged = type(part)()
        merged.CopyFrom(part)
        summarize(merged)
        return merged
    offset = len(merged.seconds_per_call)
    merged.seconds_per_call.extend(part.seconds_per_call)
    merged.numbers.extend(part.numbers)
    merged.warnings.extend(part.warnings)
    merged.throttled_repeats.extend(offset + i for i in part.throttled_repeats)
    merged.discarded_throttled += part.discarded_throttled
    for reason in part.clock_reasons:
        into = next((c for c in merged.clock_reasons if c.reason == reason.reason), None)
        if into is None:
            into = merged.clock_reasons.add(reason=reason.reason)
        into.repeats.extend(offset + i for i in reason.repeats)
    for layout in part.layouts:
        begins = offset + layout.first_repeat
        last = merged.layouts[-1] if merged.layouts else None
        if last is not None and last.first_repeat + last.repeats == begins and \
                last.index == layout.index:
            # The part went on with the layout the one before ended in: one layout.
            last.repeats += layout.repeats
            last.median = _median(
                merged.seconds_per_call[last.first_repeat:last.first_repeat + last.repeats])
            continue
        added = merged.layouts.add()
        added.CopyFrom(layout)
        added.first_repeat = begins
    merged.final_number = part.final_number
    merged.timing.queue_wait_seconds += part.timing.queue_wait_seconds
    merged.timing.execution_seconds += part.timing.execution_seconds
    summarize(merged)
    return merged


def interleave(batch, jobs, seed):
    """Runs `jobs` (dicts, as for batch, each with a fixed "repeat", default 1) interleaved
    through `batch` (one daemon's) and yields a BatchResult per job once all its repeats are
    in: merged, or the first repeat that failed. ValueError, before anything runs, for a job
    that converges (max_relative_stddev) or whose repeat is out of range."""
    jobs = [dict(job) for job in jobs]
    repeats = []
    for job in jobs:
        if job.get("max_relative_stddev", 0):
            raise ValueError(f"job {job.get('id')!r}: interleaving runs each repeat as a job of "
                             "its own; give 'repeat', not 'max_relative_stddev'")
        repeat = job.get("repeat", 1)
        if not isinstance(repeat, int) or not 1 <= repeat <= _MAX_REPEAT:
            raise ValueError(f"job {job.get('id')!r}: repeat = {repeat!r} is out of range "
                             f"(accepted: 1 to {_MAX_REPEAT})")
        repeats.append(repeat)
    return _run(batch, jobs, repeats, interleave_slots(repeats, seed))


def _run(batch, jobs, repeats, slots):
    """The parts made and sent _CHUNK at a time, each job's merged in its repeats' order as
    they come, so that what is held is a chunk of parts and the repeats that came early."""
    made = [0] * len(jobs)  # parts made, per job: the next one's repeat
    runs = [_Merging() for _ in jobs]
    finished = set()
    for begin in range(0, len(slots), _CHUNK):
        parts, part_of = [], {}
        for position in range(begin, min(len(slots), begin + _CHUNK)):
            j = slots[position]
            r, made[j] = made[j], made[j] + 1
            if j in finished:
                continue
            # A part of one repeat cannot drop it: the merge drops the throttled ones instead.
            part = dict(jobs[j], id=f"i{position}", repeat=1, discard_throttled=False)
            if part.get("randomize_layout"):
                part["first_layout_repeat"] = jobs[j].get("first_layout_repeat", 0) + r
            part_of[part["id"]] = (j, r, position)
            parts.append(part)
        for result in batch(parts) if parts else ():
            if result.id not in part_of:
                continue
            j, r, position = part_of.pop(result.id)
            if j in finished:
                continue
            job = jobs[j]
            named = {"function": job.get("function", ""), "args": job.get("args", ())}
            if not result.ok:
                finished.add(j)
                yield BatchResult(str(job.get("id", "")), False, code=result.code,
                                  message=f"repeat {r + 1} of {repeats[j]}: {result.message}",
                                  **named)
                continue
            run = runs[j]
            run.add(r, position, result.result.raw, bool(job.get("discard_throttled")))
            if run.taken < repeats[j]:
                continue
            finished.add(j)
            runs[j] = None
            if run.merged is None:
                yield BatchResult(str(job.get("id", "")), False,
                                  code=grpc.StatusCode.FAILED_PRECONDITION,
                                  message=f"all {repeats[j]} repeats were throttled, so "
                                          "discard_throttled leaves none: cool the host, or "
                                          "lower throttle_threshold", **named)
                continue
            del run.merged.run_order[:]
            run.merged.run_order.extend(run.run_order)
            run.merged.discarded_throttled = run.dropped
            yield BatchResult(str(job.get("id", "")), True, BenchmarkResult(run.merged), **named)


class _Merging:
    """One job's parts merged in its repeats' order: those that come early wait their turn."""

    def __init__(self):
        self.merged, self.dropped, self.run_order, self.taken = None, 0, [], 0
        self._early = {}  # repeat -> (place, the part's result)

    def add(self, repeat, place, part, discard_throttled):
        self._early[repeat] = (place, part)
        while self.taken in self._early:
            place, part = self._early.pop(self.taken)
            self.taken += 1
            if discard_throttled and part.throttled_repeats:
                self.dropped += 1
                continue
            self.merged = merge_repeats(self.merged, part)
            self.run_order.append(place)
