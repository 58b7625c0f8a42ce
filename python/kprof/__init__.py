"""kprof: the Python client of kprofd.

    import kprof
    daemon = kprof.connect("gpu-host:9177", token="...")
    result = daemon.time_evaluate("kernels.so", "gemm",
                                  args=["float32[512,512]:zeros", "float32[512,512]:random",
                                        "float32[512,512]:random"], number=10, repeat=5)
    print(result.median)          # seconds, like TVM's BenchmarkResult
    report = daemon.profile_function("kernels.so", "gemm", args=[...], collectors=["rusage"])
    print(report.as_table())
    for r in daemon.batch([{"id": "k1", "module": "k1.so", "function": "gemm", "args": [...]}]):
        print(r.id, r.ok, r.result.mean if r.ok else r.message)
    farm = kprof.farm("gpu1:9177,gpu2:9177")      # or "dns:///kprofd.lab:9177"
    for r in farm.batch(jobs):                     # spread over the daemons, each job once
        ...
    print(kprof.compare("base.jsonl", "new.jsonl").as_table())   # as `kprof compare` prints
    ranking = daemon.rank(jobs)                    # a race: the fastest, and those tied with it
    for r in daemon.interleave(jobs, seed=7):     # candidates' repeats in a random joint order
        ...
    print(ranking.fastest, ranking.ties, ranking.as_table())
    print(kprof.gbench(daemon.batch(jobs)))        # Google Benchmark's JSON, as the CLI's
"""

from kprof.client import BatchResult, BenchmarkResult, Client, KprofError, connect
from kprof.compare import Comparison, Comparisons, compare, compare_repeats
from kprof.farm import Farm, farm, resolve_target
from kprof.gbench import gbench
from kprof.ranking import Race, Ranking, rank_repeats, rank_results
from kprof.report import Count, Duration, Percent, Ratio, Report

__all__ = ["BatchResult", "BenchmarkResult", "Client", "Comparison", "Comparisons", "Count",
           "Duration", "Farm", "KprofError", "Percent", "Race", "Ranking", "Ratio", "Report",
           "compare", "compare_repeats", "connect", "farm", "gbench", "rank_repeats",
           "rank_results", "resolve_target"]
