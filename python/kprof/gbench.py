"""Google Benchmark's JSON, byte for byte as `kprof time --format gbench` and `kprof batch
--format gbench` write it (client/gbench_format.cc), for the tools that read it (compare.py,
dashboards).

    text = result.as_gbench("spin_us/float64:100")    # a BenchmarkResult
    text = kprof.gbench(results)                       # BatchResults of a batch, in their order
"""

import datetime
import json
import math

from kprof.statistics import median as _median


def gbench_name(job_id, function, args):
    """"id/function/arg/arg...": a benchmark's name (without an id for kprof time)."""
    return "/".join(([job_id] if job_id else []) + [function] + list(args))


def _aggregate(name, aggregate, repetitions, value, percentage):
    run = {"name": f"{name}_{aggregate}", "family_index": 0, "per_family_instance_index": 0,
           "run_name": name, "run_type": "aggregate", "repetitions": repetitions, "threads": 1,
           "aggregate_name": aggregate, "aggregate_unit": "percentage" if percentage else "time",
           "iterations": repetitions, "real_time": value, "cpu_time": value, "time_unit": "ns"}
    if percentage:
        del run["time_unit"]
    return run


def gbench_runs(name, response):
    """A run per repeat of a TimeEvaluateResponse, then the mean, median, stddev and cv."""
    runs, ns = [], []
    seconds = list(response.seconds_per_call)
    numbers = list(response.numbers)
    for i, s in enumerate(seconds):
        ns.append(s * 1e9)
        runs.append({"name": name, "family_index": 0, "per_family_instance_index": 0,
                     "run_name": name, "run_type": "iteration", "repetitions": len(seconds),
                     "repetition_index": i, "threads": 1,
                     "iterations": numbers[i] if i < len(numbers) else response.final_number,
                     "real_time": ns[-1], "cpu_time": ns[-1], "time_unit": "ns"})
    if not ns:
        return runs
    total = 0.0
    for v in ns:
        total += v
    mean = total / len(ns)
    squares = 0.0
    for v in ns:
        squares += (v - mean) * (v - mean)
    stddev = math.sqrt(squares / (len(ns) - 1)) if len(ns) > 1 else 0.0
    runs.append(_aggregate(name, "mean", len(seconds), mean, False))
    runs.append(_aggregate(name, "median", len(seconds), _median(ns), False))
    runs.append(_aggregate(name, "stddev", len(seconds), stddev, False))
    runs.append(_aggregate(name, "cv", len(seconds), stddev / mean if mean != 0 else 0.0, True))
    return runs


def gbench_error(name, message):
    return {"name": name, "family_index": 0, "per_family_instance_index": 0, "run_name": name,
            "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1,
            "iterations": 0, "real_time": 0, "cpu_time": 0, "time_unit": "ns",
            "error_occurred": True, "error_message": message}


def _value(v):
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def gbench_document(environment, runs):
    """The whole document (its text, as the CLI prints it): a context of the manifest
    `environment` (a MetricMap, or None) and the runs."""
    manifest = {}
    if environment is not None:
        manifest = {key: _value(value) for key, value in environment.metrics.items()}
        # JSON has no NaN or infinity: null, as the CLI writes them.
        manifest = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                    for k, v in manifest.items()}

    def number(key):
        v = manifest.get(key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return v if ok else None

    governor = manifest.get("CPU governor")
    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": manifest["Host"] if isinstance(manifest.get("Host"), str) else "",
        "executable": "kprof",
        "num_cpus": number("CPUs online") if number("CPUs online") is not None else 0,
        "mhz_per_cpu": number("CPU frequency (MHz)")
        if number("CPU frequency (MHz)") is not None else 0,
        "cpu_scaling_enabled": isinstance(governor, str) and governor != "performance" and
        governor != "unavailable",
        "caches": [], "library_build_type": "release"}
    if isinstance(manifest.get("Load average"), str):
        load = []
        for part in manifest["Load average"].split(","):
            try:
                load.append(float(part.strip()))
            except ValueError:
                pass
        context["load_avg"] = load
    context["kprof_timing"] = "wall clock per call; cpu_time repeats real_time"
    context["kprof_environment"] = {key: manifest[key] for key in sorted(manifest)}
    return json.dumps({"context": context, "benchmarks": runs}, indent=2,
                      ensure_ascii=False) + "\n"


def gbench(results):
    """The document `kprof batch --format gbench` writes for `results` (BatchResults, in the
    order they came): a benchmark per job named after its id, function and arguments, a failed
    job a run with error_occurred; the context from the first result's manifest."""
    runs, environment = [], None
    for r in results:
        if r.ok:
            if environment is None:
                environment = r.result.raw.environment
            runs.extend(gbench_runs(gbench_name(r.id, r.function, r.args), r.result.raw))
        else:
            runs.append(gbench_error(r.id, f"{r.code.name}: {r.message}"))
    return gbench_document(environment, runs)
