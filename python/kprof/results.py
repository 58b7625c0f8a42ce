"""What calls give back: a measurement's result (BenchmarkResult), a batch job's (BatchResult),
and a refusal (KprofError). Imports nothing of the package but the check's messages."""

import grpc

from kprof.check import verdict_of_trailers
from kprof.compare import _seconds
from kprof.gbench import gbench_document, gbench_runs
from kprof.pictures import repeats_svg


class KprofError(Exception):
    """A call the daemon refused or could not complete: its gRPC status code and message, and
    for a checked measurement that failed its check, the `verdict` (a CheckVerdict)."""

    def __init__(self, code, message, verdict=None):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.verdict = verdict


def _error(error):
    """The KprofError of a grpc.RpcError; one that reached no daemon says where to look, as the
    CLI's does."""
    message = error.details() or ""
    if error.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect" in message:
        message += " (is kprofd running there? connect()'s target, else $KPROF_TARGET, names it)"
    return KprofError(error.code(), message, verdict_of_trailers(error.trailing_metadata()))


def _call(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except grpc.RpcError as error:
        raise _error(error) from None


class BenchmarkResult:
    """A TimeEvaluate result the way TVM's BenchmarkResult reads: seconds per call, one per
    repeat, and their statistics; `raw` is the daemon's whole answer (environment manifest,
    convergence, timing...)."""

    def __init__(self, response):
        self.raw = response
        self.results = list(response.seconds_per_call)
        stats = response.statistics
        self.mean = stats.mean
        self.median = stats.median
        self.min = stats.min
        self.max = stats.max
        self.std = stats.std
        # With a check: its verdict (passed; a wrong answer comes back as an error).
        self.check = response.check if response.HasField("check") else None
        # Bytes (and items, FLOP) per second at the median call, against the device's peak.
        self.throughput = response.throughput if response.HasField("throughput") else None
        # What the job's worker printed (escaped): its last 16 KiB, and how many bytes in all.
        self.output = response.output.tail
        self.output_bytes = response.output.bytes

    def __repr__(self):
        return (f"BenchmarkResult(min={self.min:.6g}, mean={self.mean:.6g}, "
                f"median={self.median:.6g}, max={self.max:.6g}, std={self.std:.6g}, "
                f"{len(self.results)} repeats)")

    def as_gbench(self, name):
        """Google Benchmark's JSON of this result, benchmark `name` (e.g. "spin_us/float64:100"),
        as `kprof time --format gbench` writes it."""
        return gbench_document(self.raw.environment, gbench_runs(name, self.raw))

    def as_svg(self, title):
        """The repeats' histogram with the median marked, as `kprof time --plot` draws it."""
        return repeats_svg(title, self.results)

    def __str__(self):
        """As the CLI's table says it: times in a unit that suits each (ns below a microsecond),
        one spread (the sample relative standard deviation), the repeats, the warnings."""
        raw = self.raw
        n = len(self.results)
        spread = "%.2f%%" % (raw.rel_stddev * 100) if n > 1 else "- (one repeat)"
        numbers = sorted(set(raw.numbers)) or [0]
        calls = str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
        lines = [f"median {_seconds(self.median)}  mean {_seconds(self.mean)}  "
                 f"min {_seconds(self.min)}  max {_seconds(self.max)}  relative std {spread}",
                 f"{n} repeat(s) of {calls} call(s)"]
        if raw.HasField("converged"):
            lines.append(f"{'converged' if raw.converged else 'NOT converged'}: relative std "
                         f"{raw.rel_stddev * 100:.2f}% after {n} repeats ({raw.stop_reason})")
        lines += [f"warning: {w}" for w in raw.warnings]
        return "\n".join(lines)


class BatchResult:
    """One job's answer in a batch: `ok` with `result` (a BenchmarkResult), or the `code` and
    `message` it failed with; `function` and `args` of the job."""

    def __init__(self, job_id, ok, result=None, code=None, message="", function="", args=(),
                 verdict=None):
        self.id = job_id
        self.ok = ok
        self.result = result
        self.code = code
        self.message = message
        # A checked job's verdict: passed (ok), or why its answer was wrong.
        self.verdict = result.check if ok and result is not None else verdict
        self.function, self.args = function, list(args)  # the job's call, as it named it
        self.daemon = ""  # of a farm of several daemons, the one that answered (HOST:PORT)

    def __repr__(self):
        if self.ok:
            return f"BatchResult({self.id!r}, {self.result!r})"
        return f"BatchResult({self.id!r}, {self.code.name}: {self.message})"
