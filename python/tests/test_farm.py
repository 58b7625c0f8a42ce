"""A farm of real kprofd daemons: batches spread over them, modules uploaded where jobs go, a daemon
killed or shutting down mid-batch, none answering."""

import os
import socket

import pytest

import kprof

from conftest import MODULES, run_within


def jobs_completed(target):
    with kprof.connect(target) as c:
        return sum(d.jobs_completed for d in c.info().devices)


def test_a_farm_spreads_a_batch_and_uploads_modules_where_jobs_go(three_daemons):
    targets = [target for _, target in three_daemons]
    path = os.path.join(MODULES, "vector_add.so")
    jobs = [{"id": f"v{i}", "module": path, "function": "vadd", "repeat": 1,
             "args": ["float32[256]:zeros", "float32[256]:ones", "float32[256]:ones"]}
            for i in range(150)]
    jobs += [{"id": "gpu", "module": "builtin", "function": "nop", "device": "cuda:63"},
             {"id": "v0", "module": "builtin", "function": "nop"},
             {"id": "alias", "module": "builtin", "function": "nop", "device": "cpu"}]
    farm = kprof.farm(",".join(targets))
    assert isinstance(farm, kprof.Farm)
    progress = []
    with farm:
        results = list(farm.batch(jobs, progress=progress.append))
        single = farm.time_evaluate("builtin", "spin_us", args=["float64:10"], repeat=2)
    assert len(single.results) == 2
    by_id = {}
    for r in results:
        assert r.id not in by_id or r.id == "v0", r.id
        by_id.setdefault(r.id, []).append(r)
    assert all(by_id[f"v{i}"][0].ok for i in range(1, 150))
    # Each answer says which daemon measured it; every daemon measured some.
    assert {by_id[f"v{i}"][0].daemon for i in range(1, 150)} == set(targets)
    assert by_id["alias"][0].ok, by_id["alias"][0]
    # The duplicate id is refused, the first v0 runs.
    assert sorted(r.ok for r in by_id["v0"]) == [False, True]
    assert [r.code.name for r in by_id["v0"] if not r.ok] == ["INVALID_ARGUMENT"]
    assert by_id["gpu"][0].code.name == "UNAVAILABLE"
    assert "no live daemon has cuda:63" in by_id["gpu"][0].message
    assert progress[-1].done == 151 and progress[-1].failed == 2
    assert progress[-1].queued == 0
    assert all(jobs_completed(t) > 0 for t in targets), "every daemon ran jobs"


def test_jobs_for_a_device_no_daemon_has_among_many_are_each_answered_once(three_daemons):
    """A long batch through a narrow window: once the daemons' device is full the farm stops
    looking further, yet every job is answered once, and those for a device no daemon has
    fail saying so, the last one too."""
    jobs, elsewhere = [], set()
    for i in range(2000):
        jobs.append({"id": f"n{i}", "module": "builtin", "function": "nop", "number": 1,
                     "repeat": 1})
        if i % 700 == 7 or i == 1999:
            elsewhere.add(f"gpu{i}")
            jobs.append({"id": f"gpu{i}", "module": "builtin", "function": "nop",
                         "device": "cuda:63"})
    targets = ",".join(target for _, target in three_daemons)

    def work():
        with kprof.Farm(targets, window=2) as farm:
            return list(farm.batch(jobs))
    results = run_within(300, work)
    assert sorted(r.id for r in results) == sorted(j["id"] for j in jobs)
    for r in results:
        if r.id in elsewhere:
            assert r.code.name == "UNAVAILABLE" and "no live daemon has cuda:63" in r.message
        else:
            assert r.ok, (r.id, r.message)


def test_a_daemon_answering_short_jobs_quickly_is_sent_more_than_the_window(daemon,
                                                                           monkeypatch):
    """The window grows with the pace of a daemon's answers (what it answers in 50 ms): short
    jobs go out, and come back, many at a time; long ones stay within the window."""
    from kprof import farm_daemon
    held = []
    send = farm_daemon._Daemon.send

    def watched(self, jobs, modules=()):
        held.append(len(self.holding))
        return send(self, jobs, modules)
    monkeypatch.setattr(farm_daemon._Daemon, "send", watched)
    short = [{"id": f"n{i}", "module": "builtin", "function": "nop", "number": 1, "repeat": 1}
             for i in range(3000)]
    with kprof.Farm(daemon, window=4) as farm:
        assert all(r.ok for r in farm.batch(short))
    assert max(held) > 4, max(held)
    held.clear()
    long = [{"id": f"s{i}", "module": "builtin", "function": "spin_us", "args": ["float64:30000"],
             "number": 1, "repeat": 1} for i in range(12)]
    with kprof.Farm(daemon, window=4) as farm:
        assert all(r.ok for r in farm.batch(long))
    assert max(held) <= 4, held


def test_a_farm_uploads_candidates_ahead_and_each_job_runs_its_own(daemon):
    """Candidates of one entry point, each its own module, sent on the stream with their first
    job (modules over 4 MiB are uploaded ahead, several at once): each job runs its own candidate (its `candidate` returns K, which fails the job
    saying so; its `gemm` sleeps 2K ms), a refused module fails each of its jobs with the
    daemon's reason, and the others run."""
    jobs = []
    for k in range(1, 7):
        path = os.path.join(MODULES, f"candidate_{k}.so")
        jobs.append({"id": f"gemm{k}", "module": path, "function": "gemm", "number": 1,
                     "repeat": 1})
        jobs.append({"id": f"which{k}", "module": path, "function": "candidate"})
    jobs.insert(3, {"id": "junk", "module": b"not an ELF file at all", "function": "gemm"})
    with kprof.Farm(daemon) as farm:
        results = {r.id: r for r in farm.batch(jobs)}
    assert sorted(results) == sorted(j["id"] for j in jobs)
    assert not results["junk"].ok and results["junk"].code.name == "INVALID_ARGUMENT"
    for k in range(1, 7):
        which = results[f"which{k}"]
        assert not which.ok and f"returned {k}" in which.message, (k, which.message)
        gemm = results[f"gemm{k}"]
        assert gemm.ok, gemm.message
        # A sleep never ends early; on a busy host it may end late, by more than the
        # candidates' spacing (the `candidate` job above tells them apart).
        assert gemm.result.median >= 2e-3 * k * 0.99, gemm.result


def farm_batch_stopping_one(daemons, stop, after):
    """A batch of 300 short spins over `daemons`, calling `stop` once `after` results are in."""
    jobs = [{"id": f"s{i}", "module": "builtin", "function": "spin_us", "repeat": 1,
             "args": ["float64:2000"]} for i in range(300)]

    def work():
        seen = []
        with kprof.Farm(",".join(target for _, target in daemons)) as farm:
            for r in farm.batch(jobs):
                seen.append(r)
                if len(seen) == after:
                    stop()
        return seen
    seen = run_within(120, work)
    assert sorted(r.id for r in seen) == sorted(j["id"] for j in jobs)
    assert all(r.ok for r in seen), [r for r in seen if not r.ok][:3]


def test_a_daemon_killed_mid_batch_loses_no_job(three_daemons):
    farm_batch_stopping_one(three_daemons, three_daemons[1][0].kill, after=40)
    assert three_daemons[1][0].wait(timeout=20) != 0


def test_a_daemon_shutting_down_mid_batch_hands_its_jobs_on(three_daemons):
    farm_batch_stopping_one(three_daemons, three_daemons[2][0].terminate, after=40)
    assert three_daemons[2][0].wait(timeout=20) == 0


def test_a_farm_with_no_daemon_answering_says_so():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    with kprof.Farm(closed + "," + closed, timeout=5) as farm:
        with pytest.raises(kprof.KprofError, match="no daemon answered") as error:
            list(farm.batch([{"id": "a", "module": "builtin", "function": "nop"}]))
    assert error.value.code.name == "UNAVAILABLE"
    # One client to nothing says where to look, as the CLI does.
    with kprof.connect(closed, timeout=5) as nothing:
        with pytest.raises(kprof.KprofError, match=r"is kprofd running there\? connect\(\)'s target"):
            nothing.info()
