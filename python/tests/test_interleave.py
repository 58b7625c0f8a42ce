"""Interleaved candidates from Python: the same order as `kprof batch --interleave` for a seed,
each job's repeats merged with their places in the run, randomized layouts continued across the
parts, and a race's turns going on through a candidate's layouts."""
import json
import os
import subprocess
import tempfile

import pytest

import kprof
from conftest import KPROF
from kprof.interleave import interleave_order


def spin(job_id, us, repeat):
    return {"id": job_id, "module": "builtin", "function": "spin_us", "args": [f"float64:{us}"],
            "repeat": repeat}


def copy(job_id, n, **options):
    return dict({"id": job_id, "module": "builtin", "function": "copy",
                 "args": [f"float32[{n}]:zeros", f"float32[{n}]:random"]}, **options)


def test_the_order_is_a_permutation_drawn_from_the_seed():
    order = interleave_order([5, 3, 1, 7], 42)
    assert len(order) == 16
    for j, n in enumerate([5, 3, 1, 7]):
        assert [r for job, r in order if job == j] == list(range(n))
    assert interleave_order([5, 3, 1, 7], 42) == order
    assert interleave_order([5, 3, 1, 7], 43) != order
    assert interleave_order([], 1) == []


def test_the_same_seed_gives_the_clis_order_and_each_job_its_own_repeats(daemon):
    jobs = [spin("a", 50, 4), spin("b", 300, 3), spin("c", 20, 2)]
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "jobs.jsonl")
        with open(path, "w") as f:
            f.writelines(json.dumps(job) + "\n" for job in jobs)
        cli = subprocess.run([KPROF, "--target", daemon, "batch", path, "--interleave", "7"],
                             capture_output=True, text=True, timeout=120, check=True)
    cli_order = {line["id"]: sorted(line["run_order"])
                 for line in map(json.loads, cli.stdout.splitlines()) if "run_order" in line}
    with kprof.connect(daemon) as client:
        results = {r.id: r for r in client.interleave(jobs, seed=7)}
    assert set(results) == {"a", "b", "c"}
    order = interleave_order([4, 3, 2], 7)
    for j, job in enumerate(jobs):
        r = results[job["id"]]
        assert r.ok, r.message
        assert len(r.result.results) == job["repeat"]
        expected = [p for p, (k, _) in enumerate(order) if k == j]
        assert list(r.result.raw.run_order) == expected
        assert cli_order[job["id"]] == expected
        # Each repeat is the job's own spin, not another's.
        us = float(job["args"][0].split(":")[1])
        assert us * 1e-6 <= r.result.min < us * 1e-6 + 30e-6
        assert r.result.min == min(r.result.results)


def test_a_run_of_several_chunks_comes_back_whole_and_a_failed_job_once(client):
    """Parts go out 4096 at a time: 2 x 2500 repeats and a job that fails, over two chunks."""
    jobs = [{"id": n, "module": "builtin", "function": "nop", "repeat": 2500} for n in "xy"]
    jobs.append({"id": "z", "module": "builtin", "function": "no_such", "repeat": 2500})
    results = list(client.interleave(jobs, seed=9))
    assert sorted(r.id for r in results) == ["x", "y", "z"]
    order = interleave_order([2500, 2500, 2500], 9)
    for r in results:
        if r.id == "z":
            assert not r.ok and "repeat 1 of 2500" in r.message
            continue
        assert r.ok, r.message
        j = "xy".index(r.id)
        assert list(r.result.raw.run_order) == [p for p, (k, _) in enumerate(order) if k == j]


def test_randomized_layouts_go_on_across_the_parts(client):
    jobs = [copy("a", 4096, repeat=6, randomize_layout=True, repeats_per_layout=2),
            copy("b", 1024, repeat=6, randomize_layout=True, repeats_per_layout=2)]
    merged = {r.id: r for r in client.interleave(jobs, seed=5)}
    for job in jobs:
        r = merged[job["id"]]
        assert r.ok, r.message
        whole = client.time_evaluate(job["module"], job["function"], args=job["args"], repeat=6,
                                     randomize_layout=True, repeats_per_layout=2)
        layouts = r.result.raw.layouts
        assert [list(l.offsets) for l in layouts] == \
            [list(l.offsets) for l in whole.raw.layouts]
        assert [(l.first_repeat, l.repeats) for l in layouts] == [(0, 2), (2, 2), (4, 2)]
        assert len({tuple(l.offsets) for l in layouts}) >= 2


def test_a_failed_repeat_fails_its_job_and_bad_jobs_are_refused_first(client, three_daemons):
    jobs = [spin("fine", 20, 2), dict(spin("broken", 20, 2), args=["int32:1"])]
    results = {r.id: r for r in client.interleave(jobs, seed=3)}
    assert results["fine"].ok
    assert not results["broken"].ok
    assert results["broken"].message.startswith("repeat 1 of 2: ")
    assert "spin_us" in results["broken"].message
    with pytest.raises(ValueError, match="max_relative_stddev"):
        client.interleave([dict(spin("x", 20, 2), max_relative_stddev=0.01)], seed=1)
    with pytest.raises(ValueError, match="repeat = 0"):
        client.interleave([spin("x", 20, 0)], seed=1)
    targets = ",".join(target for _, target in three_daemons)
    with kprof.farm(targets) as farm, pytest.raises(ValueError, match="3 daemons"):
        farm.interleave(jobs, seed=1)


def test_a_race_goes_on_through_each_candidates_layouts(client):
    jobs = [copy("small", 1024, randomize_layout=True), copy("large", 65536,
                                                              randomize_layout=True)]
    ranking = client.rank(jobs, threshold=5, max_repeats=30)
    for name, result in ranking.results.items():
        layouts = result.raw.layouts
        assert len(layouts) == len(result.results), name  # one repeat each
        assert [l.first_repeat for l in layouts] == list(range(len(layouts)))
        # A race's turn is 5 repeats: drawn again each turn, there would be 5 layouts at most.
        assert len(result.results) > 5, name
        assert len({tuple(l.offsets) for l in layouts}) > 5, name
