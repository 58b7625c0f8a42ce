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
"""

from kprof.client import BatchResult, BenchmarkResult, Client, KprofError, connect
from kprof.report import Count, Duration, Percent, Ratio, Report

__all__ = ["BatchResult", "BenchmarkResult", "Client", "Count", "Duration", "KprofError",
           "Percent", "Ratio", "Report", "connect"]
