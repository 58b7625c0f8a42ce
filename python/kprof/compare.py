"""Which measurements of one run are faster or slower than another's: `kprof compare` in Python.

    import kprof
    result = kprof.compare("base.jsonl", "new.jsonl")       # files, as kprof compare reads
    for c in result.comparisons:
        print(c.name, c.verdict, c.change, c.interval, c.p_value)
    print(result.as_table(), end="")                        # byte for byte the CLI's output
    kprof.compare_repeats([...seconds...], [...seconds...]) # two samples: one Comparison

The numbers are the CLI's (report/compare.cc): the change of medians, a percentile bootstrap
interval drawn from SplitMix64 with the same fixed seed, a two-sided Mann-Whitney U test as
scipy computes it, and a verdict of faster, slower, same or insufficient — or noisy, for a
measurement that did not converge or came with kprofd's warning (a busy host), not judged
unless accept_noisy.
"""

import json
import math
import os
import sys

from kprof.pictures import comparison_svg
from kprof.report_metrics import shortest_decimal
from kprof.statistics import bootstrap_change_interval, mann_whitney_u, median as _median

_NAN = float("nan")

# What the figures of a comparison are (the CLI's kMethod).
METHOD = ("change: the new median over the base's, less 1; interval: percentile bootstrap of that "
          "change; p: two-sided Mann-Whitney U")


class Comparison:
    """Base against new: repeats and medians of each, the change, its interval, p, verdict."""

    def __init__(self, name="", base_repeats=0, new_repeats=0, base_median=_NAN,
                 new_median=_NAN, change=_NAN, interval=(_NAN, _NAN), p_value=_NAN,
                 verdict="insufficient", error="", noise=""):
        self.name = name
        self.base_repeats, self.new_repeats = base_repeats, new_repeats
        self.base_median, self.new_median = base_median, new_median
        self.change, self.interval, self.p_value = change, interval, p_value
        self.verdict, self.error, self.noise = verdict, error, noise
        self.base_seconds, self.new_seconds = [], []  # the repeats compared, where known

    def __repr__(self):
        return (f"Comparison({self.name!r}, {self.verdict}, change={self.change:+.4f}, "
                f"interval=({self.interval[0]:+.4f}, {self.interval[1]:+.4f}), "
                f"p={self.p_value:.3g})")


def _divide(a, b):
    """a / b as IEEE 754 (and C++) divide: by zero, an infinity or NaN, not an exception."""
    if b != 0 or math.isnan(b):
        return a / b
    if math.isnan(a) or a == 0:
        return _NAN
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def compare_repeats(base, new, confidence=0.95, min_repeats=5, resamples=2000, threshold=1.0,
                    name=""):
    """One Comparison of two samples of seconds per call (threshold in percent)."""
    base, new = [float(v) for v in base], [float(v) for v in new]
    c = Comparison(name, len(base), len(new))
    if base:
        c.base_median = _median(base)
    if new:
        c.new_median = _median(new)
    c.change = _divide(c.new_median, c.base_median) - 1
    if (len(base) < min_repeats or len(new) < min_repeats or not c.base_median > 0
            or not c.new_median > 0):
        return c
    c.p_value = mann_whitney_u(base, new)[1]
    c.interval = bootstrap_change_interval(base, new, confidence, resamples)
    significant = c.p_value < 1 - confidence
    limit = threshold / 100
    if significant and c.interval[1] < 0 and c.change < -limit:
        c.verdict = "faster"
    elif significant and c.interval[0] > 0 and c.change > limit:
        c.verdict = "slower"
    else:
        c.verdict = "same"
    return c


class _Measurement:
    def __init__(self, name, call="", seconds=(), error="", noise=""):
        self.name, self.call, self.seconds, self.error = name, call, list(seconds), error
        self.noise = noise

    def refuse_odd_times(self):
        """A time that is not positive, finite and normal makes this a failed measurement, its
        times dropped (as the CLI's RefuseOddTimes, in its words)."""
        for k, s in enumerate(self.seconds):
            if not (s > 0 and math.isfinite(s) and s >= sys.float_info.min):
                self.error = (f"INVALID_ARGUMENT: repeat {k + 1} of {len(self.seconds)} is not "
                              "a positive, finite, normal number of seconds")
                self.seconds = []
                return self
        return self


def _not_results(path, why):
    return ValueError(
        f"'{path}' {why}: kprof compare reads the output of `kprof time --format json` (an "
        "object with \"results\"), `kprof batch` (JSONL, a line per job) or Google Benchmark's "
        "--benchmark_format=json (an object with \"benchmarks\")")


def _call_of(result):
    if not isinstance(result.get("function"), str):
        return ""
    words = [result["module"]] if isinstance(result.get("module"), str) else []
    words.append(result["function"])
    words += [a for a in result.get("args", []) if isinstance(a, str)] \
        if isinstance(result.get("args"), list) else []
    return " ".join(words)


def _from_result(result, name, where):
    seconds = result["results"]
    if not isinstance(seconds, list):
        raise ValueError(f"{where}: \"results\" is not an array")
    for v in seconds:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}: \"results\" holds {_echo(v)}, not seconds per call")
    own = result.get("id")
    return _Measurement(own if isinstance(own, str) else name, _call_of(result), seconds,
                        noise=_noise_of(result)).refuse_odd_times()


def _noise_of(result):
    """Why a result's times are not to be judged by (as the CLI's NoiseOf): it did not converge,
    or kprofd warned about it; "" when neither."""
    why = []
    if result.get("converged") is False:
        spread = "its repeats did not converge"
        rel = result.get("rel_stddev")
        if isinstance(rel, (int, float)) and not isinstance(rel, bool):
            spread += " (relative std %.1f%%)" % (rel * 100)
        why.append(spread)
    if isinstance(result.get("warnings"), list):
        why += [w for w in result["warnings"] if isinstance(w, str)]
    return "; ".join(why)


def _text(obj, key, fallback):
    """A member's text, or `fallback` when it is missing or not a string, as the CLI reads."""
    value = obj.get(key)
    return value if isinstance(value, str) else fallback


_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _from_google_benchmark(doc, path):
    if not isinstance(doc["benchmarks"], list):
        raise _not_results(path, "has \"benchmarks\" but no array")
    measurements, index = [], {}
    for run in doc["benchmarks"]:
        if not isinstance(run, dict):
            raise _not_results(path, "holds a benchmark that is not an object")
        if _text(run, "run_type", "iteration") == "aggregate":
            continue
        name = run["run_name"] if isinstance(run.get("run_name"), str) else _text(run, "name", "")
        if name not in index:
            index[name] = len(measurements)
            measurements.append(_Measurement(name))
        m = measurements[index[name]]
        if run.get("error_occurred") is True:
            m.error = _text(run, "error_message", "the benchmark reported an error")
            continue
        real = run.get("real_time")
        unit = _text(run, "time_unit", "ns")
        if unit not in _UNITS or isinstance(real, bool) or not isinstance(real, (int, float)):
            raise _not_results(path, f"has a run of '{name}' without a real_time in ns, us, ms "
                                     "or s")
        m.seconds.append(real * _UNITS[unit])
    return [m.refuse_odd_times() if not m.error else m for m in measurements]


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


# How deep a file may nest, as the CLI reads it (client/cli/json_input.h).
_MAX_DEPTH = 64
_SHOWN = 60  # characters of a value echoed in an error


class _TooDeep(ValueError):
    """A file refused for its nesting, which no other reading of it helps."""


def _too_deep(value):
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth >= _MAX_DEPTH:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def _strict_json(text, path, where=None):
    """`text` parsed, NaN refused (ValueError); one nested past _MAX_DEPTH refused naming
    `path` (and `where`, a line), as the CLI refuses it."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
        too_deep = _too_deep(value)
    except RecursionError:
        too_deep = True
    if too_deep:
        raise _TooDeep(str(_not_results(path, f"{where + ' ' if where else ''}nests deeper than "
                                              f"{_MAX_DEPTH} levels")))
    return value


def _echo(value):
    """`value` as JSON, cut to _SHOWN characters, as the CLI echoes it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def read_measurements(path):
    """The measurements of a result file, as kprof compare reads them."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"'{path}' is a directory, not a result file")
    # As the CLI reads: a byte-order mark skipped, lines split at \n alone, NaN refused.
    with open(path, encoding="utf-8-sig", newline="") as f:
        text = f.read()
    try:
        whole = _strict_json(text, path)
    except _TooDeep:
        raise
    except ValueError:
        whole = None
    if isinstance(whole, dict) and "benchmarks" in whole:
        return _from_google_benchmark(whole, path)
    if isinstance(whole, dict) and "status" not in whole:
        if "results" not in whole:
            raise _not_results(path, "is a JSON object without results")
        return [_from_result(whole, os.path.basename(path), f"'{path}'")]
    if whole is not None and not isinstance(whole, dict):
        raise _not_results(path, "is not an object")
    measurements = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip(" \t\r"):
            continue
        try:
            obj = _strict_json(line, path, f"line {number}")
        except _TooDeep:
            raise
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise _not_results(path, f"line {number} is not a JSON object")
        if "ranking" in obj and "id" not in obj:
            continue  # kprof batch --rank's last line
        if "results" in obj:
            measurements.append(_from_result(obj, f"line {number}", f"'{path}' line {number}"))
        elif isinstance(obj.get("status"), str):
            own = obj.get("id")
            measurements.append(_Measurement(
                own if isinstance(own, str) else f"line {number}",
                error=f"{obj['status']}: {_text(obj, 'error', '')}"))
        else:
            raise _not_results(path, f"line {number} has neither \"results\" nor \"status\"")
    if not measurements:
        raise _not_results(path, "holds no measurement")
    return measurements


def _seconds(s):
    if math.isnan(s):
        return "-"
    a = abs(s)
    if a < 1e-6:
        return "%.1f ns" % (s * 1e9)
    if a < 1e-3:
        return "%.2f us" % (s * 1e6)
    if a < 1:
        return "%.3f ms" % (s * 1e3)
    return "%.3f s" % s


def _percent(change):
    return "-" if math.isnan(change) else "%+.2f%%" % (change * 100)


def _number(v):
    return v if math.isfinite(v) else None  # JSON has no NaN or infinity


def _csv_number(v):
    return "" if math.isnan(v) else shortest_decimal(v)


def _aligned_table(cells, left, notes):
    """As the CLI's AlignedTable: columns as wide as their widest cell (in bytes), padded on the
    right for the columns in `left`, no trailing spaces, data row r's note after it, wrapped."""
    width = [max(len(line[k].encode()) for line in cells) for k in range(len(cells[0]))]
    out = []
    for r, line in enumerate(cells):
        text = ""
        for k, cell in enumerate(line):
            pad = " " * (width[k] - len(cell.encode()))
            text += ("  " if k else "") + (cell + pad if k in left else pad + cell)
        out.append(text.rstrip(" ") + "\n")
        if r > 0 and r - 1 < len(notes) and notes[r - 1]:
            out.append(_wrapped(f"({notes[r - 1]})", "  "))
    return "".join(out)


def _wrapped(text, first, width=100):
    """As the CLI's Wrapped: `text` in lines of at most `width` bytes, broken between words (a
    longer word stays whole), the first after `first`, the others after as many spaces."""
    out, line, empty = [], first, True
    for word in (w for w in text.split(" ") if w):
        if not empty and len(line.encode()) + 1 + len(word.encode()) > width:
            out.append(line + "\n")
            line, empty = " " * len(first.encode()), True
        line += ("" if empty else " ") + word
        empty = False
    out.append(line + "\n")
    return "".join(out)


class Comparisons:
    """The comparisons of two result files, renderable as `kprof compare` renders them."""

    def __init__(self, comparisons, base_only, new_only, base_path, new_path, confidence,
                 threshold, min_repeats, resamples, accept_noisy=False):
        self.comparisons, self.base_only, self.new_only = comparisons, base_only, new_only
        self._paths = base_path, new_path
        self.confidence, self.threshold = confidence, threshold
        self.min_repeats, self.resamples = min_repeats, resamples
        self.accept_noisy = accept_noisy

    def summary(self):
        counts = {"faster": 0, "insufficient": 0, "noisy": 0, "same": 0, "slower": 0}
        for c in self.comparisons:
            counts[c.verdict] += 1
        return counts

    def as_json(self):
        out = {"confidence": self.confidence, "threshold": self.threshold / 100,
               "min_repeats": self.min_repeats, "resamples": self.resamples, "method": METHOD,
               "accept_noisy": self.accept_noisy, "comparisons": []}
        for c in self.comparisons:
            item = {"name": c.name,
                    "base": {"repeats": c.base_repeats, "median": _number(c.base_median)},
                    "new": {"repeats": c.new_repeats, "median": _number(c.new_median)},
                    "change": _number(c.change),
                    "interval": [_number(c.interval[0]), _number(c.interval[1])],
                    "p_value": _number(c.p_value), "verdict": c.verdict}
            if c.error:
                item["error"] = c.error
            if c.noise:
                item["noise"] = c.noise
            out["comparisons"].append(item)
        out["base_only"], out["new_only"] = self.base_only, self.new_only
        out["summary"] = self.summary()
        return json.dumps(out, indent=2, ensure_ascii=False) + "\n"

    def as_csv(self):
        lines = ["name,verdict,change,interval_low,interval_high,p_value,base_repeats,"
                 "base_median_seconds,new_repeats,new_median_seconds,noise"]
        for c in self.comparisons:
            quoted = '"' + c.name.replace('"', '""') + '"'
            lines.append(",".join([quoted, c.verdict, _csv_number(c.change),
                                   _csv_number(c.interval[0]), _csv_number(c.interval[1]),
                                   _csv_number(c.p_value), str(c.base_repeats),
                                   _csv_number(c.base_median), str(c.new_repeats),
                                   _csv_number(c.new_median),
                                   '"' + c.noise.replace('"', '""') + '"']))
        return "\n".join(lines) + "\n"

    def as_table(self):
        cells = [["measurement", "base", "new", "change", "%g%% interval" % (self.confidence * 100),
                  "p", "verdict", "repeats"]]
        for c in self.comparisons:
            interval = "-" if math.isnan(c.interval[0]) else \
                f"[{_percent(c.interval[0])}, {_percent(c.interval[1])}]"
            cells.append([c.name, _seconds(c.base_median), _seconds(c.new_median),
                          _percent(c.change), interval,
                          "-" if math.isnan(c.p_value) else "%.3g" % c.p_value, c.verdict,
                          f"{c.base_repeats}/{c.new_repeats}"])
        notes = [c.error + ("; " if c.error and c.noise else "") +
                 (f"noisy: {c.noise}" if c.noise else "") for c in self.comparisons]
        out = [_aligned_table(cells, (0, 6, 7), notes)]
        counts = self.summary()
        out.append(f"\n{counts['faster']} faster, {counts['slower']} slower, {counts['same']} the "
                   f"same within the noise, {counts['insufficient']} with too few repeats to say "
                   f"(fewer than {self.min_repeats} on a side)")
        if counts["noisy"]:
            out.append(f", {counts['noisy']} noisy (not judged: --accept-noisy judges them all the "
                       "same)")
        out.append(f"\n{METHOD}\n")
        if self.base_only:
            out.append(f"{len(self.base_only)} only in {self._paths[0]}\n")
        if self.new_only:
            out.append(f"{len(self.new_only)} only in {self._paths[1]}\n")
        return "".join(out)

    def as_svg(self):
        """Each comparison's change within its interval, as `kprof compare --plot` draws it."""
        return comparison_svg(self.comparisons, self.confidence)

    def regressions(self, percent):
        """The comparisons judged slower by more than `percent`."""
        return [c for c in self.comparisons if c.verdict == "slower" and c.change * 100 > percent]


def compare(base, new, confidence=0.95, min_repeats=5, resamples=2000, threshold=1.0,
            accept_noisy=False):
    """Compares two result files (paths) as `kprof compare BASE NEW` does. ValueError when a file
    is none of kprof time's JSON, kprof batch's JSONL and Google Benchmark's JSON, or when no
    measurement of one is in the other. A measurement that did not converge or came with a
    warning is "noisy", not judged, unless accept_noisy."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: a probability between 0 and 1, e.g. 0.95")
    if not 100 <= resamples <= 1000000:
        raise ValueError(f"resamples {resamples}: between 100 and 1000000")
    if min_repeats < 1:
        raise ValueError("min_repeats: at least 1")
    if not 0 <= threshold < 100:
        raise ValueError(f"threshold {threshold}: a percentage from 0 to under 100 (default 1)")
    base_path, new_path = os.fspath(base), os.fspath(new)
    a, b = read_measurements(base_path), read_measurements(new_path)
    pairs, base_only, new_only = [], [], []
    if len(a) == 1 and len(b) == 1:
        pairs = [(0, 0)]
    else:
        for by_call in (False, True):
            def key(m):
                return m.call if by_call else m.name
            in_new = {}
            for j, m in enumerate(b):
                if key(m):
                    in_new.setdefault(key(m), j)
            matched, base_only = [False] * len(b), []
            for i, m in enumerate(a):
                j = in_new.get(key(m)) if key(m) else None
                if j is None or matched[j]:
                    base_only.append(m.name)
                    continue
                matched[j] = True
                pairs.append((i, j))
            new_only = [m.name for j, m in enumerate(b) if not matched[j]]
            if pairs:
                break
        if not pairs:
            raise ValueError(
                f"no measurement of '{base_path}' is in '{new_path}': neither their ids (e.g. "
                f"'{a[0].name}' and '{b[0].name}') nor their module, function and arguments "
                "match")
    comparisons = []
    for i, j in pairs:
        x, y = a[i], b[j]
        name = x.name if x.name == y.name else f"{x.name} -> {y.name}"
        c = compare_repeats(x.seconds, y.seconds, confidence, min_repeats, resamples, threshold,
                            name)
        error = f"base: {x.error}" if x.error else ""
        if y.error:
            error += ("; new: " if error else "new: ") + y.error
        c.error = error
        c.noise = f"base: {x.noise}" if x.noise else ""
        if y.noise:
            c.noise += ("; new: " if c.noise else "new: ") + y.noise
        if c.noise and not accept_noisy and c.verdict != "insufficient":
            c.verdict = "noisy"
        c.base_seconds, c.new_seconds = x.seconds, y.seconds
        comparisons.append(c)
    return Comparisons(comparisons, base_only, new_only, base_path, new_path, confidence,
                       threshold, min_repeats, resamples, accept_noisy)
