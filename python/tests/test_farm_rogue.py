"""Farms with daemons that misbehave: a fake daemon (a gRPC server of the kprof service, in this
process) that answers ids no one sent, or says a job runs and then nothing, and a real daemon
frozen mid-batch (SIGSTOP). The farm ignores the strays, never hangs, and runs a silent or
frozen daemon's jobs on the others, each answered once."""

import signal
import tempfile
import threading
from concurrent import futures

import grpc

import kprof
from kprof.v1 import kprof_pb2, kprof_pb2_grpc

from conftest import run_within, start_daemon


class Rogue(kprof_pb2_grpc.ProfilerServicer):
    """A daemon of cpu:0 whose jobs may run 0.2 s: "strays" answers an id no one sent before
    each job's answer; "silent" says each job runs, then nothing."""

    def __init__(self, mode):
        self.mode = mode
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        kprof_pb2_grpc.add_ProfilerServicer_to_server(self, self.server)
        self.target = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def GetInfo(self, request, context):
        info = kprof_pb2.GetInfoResponse()
        info.devices.add(device="cpu:0")
        info.limits.job_timeout_seconds = 0.2
        return info

    def MeasureBatch(self, request_iterator, context):
        for request in request_iterator:
            for job in request.jobs:
                if self.mode == "silent":
                    yield kprof_pb2.BatchUpdate(id=job.id, state=kprof_pb2.BatchUpdate.RUNNING)
                    continue
                done = kprof_pb2.BatchUpdate(id=job.id, state=kprof_pb2.BatchUpdate.DONE)
                done.time_evaluate.seconds_per_call.append(1e-6)
                done.time_evaluate.numbers.append(1)
                stray = kprof_pb2.BatchUpdate()
                stray.CopyFrom(done)
                stray.id = "\x1b[2Jstray-" + job.id
                yield stray
                yield done


def spins(n, prefix):
    return [{"id": f"{prefix}{i}", "module": "builtin", "function": "spin_us",
             "args": ["float64:500"], "repeat": 1} for i in range(n)]


def test_updates_for_ids_no_job_has_are_ignored(capfd):
    rogue = Rogue("strays")
    try:
        with kprof.farm(rogue.target) as farm:
            results = run_within(60, lambda: list(farm.batch(spins(20, "s"))))
    finally:
        rogue.server.stop(0)
    assert sorted(r.id for r in results) == sorted(f"s{i}" for i in range(20))
    assert all(r.ok for r in results)
    err = capfd.readouterr().err
    assert "which is no job of this batch: ignored" in err
    assert "\\x1b[2Jstray-s" in err and "\x1b" not in err


def test_a_daemon_silent_after_running_is_lost_and_its_jobs_run_elsewhere():
    rogue = Rogue("silent")
    with tempfile.TemporaryDirectory() as scratch:
        process, target = start_daemon(scratch)
        try:
            with kprof.farm(f"{rogue.target},{target}") as farm:
                results = run_within(90, lambda: list(farm.batch(spins(40, "t"))))
            assert sorted(r.id for r in results) == sorted(f"t{i}" for i in range(40))
            assert all(r.ok for r in results), [r.message for r in results if not r.ok]
            with kprof.farm(rogue.target) as alone:
                failed = run_within(60, lambda: list(alone.batch(spins(3, "u"))))
            assert len(failed) == 3 and not any(r.ok for r in failed)
            assert all("has not answered since (its jobs may run 0.2 s)" in r.message
                       for r in failed), failed[0].message
        finally:
            rogue.server.stop(0)
            process.terminate()
            process.wait(timeout=20)


def test_a_frozen_daemon_is_lost_after_its_keepalive(three_daemons):
    (first, a), (second, b), _ = three_daemons
    seen, stopped = [], threading.Event()

    def run():
        with kprof.farm(f"{a},{b}", keepalive=2.0) as farm:
            for result in farm.batch(spins(300, "f")):
                seen.append(result)
                if len(seen) == 30:
                    second.send_signal(signal.SIGSTOP)
                    stopped.set()
    try:
        run_within(45, run)
    finally:
        second.send_signal(signal.SIGCONT)
    assert stopped.is_set()
    assert sorted(r.id for r in seen) == sorted(f"f{i}" for i in range(300))
    assert all(r.ok for r in seen), [r.message for r in seen if not r.ok][:3]
