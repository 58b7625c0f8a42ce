"""Checked measurements from Python: reference= and expect= (NumPy arrays), the verdict on a
right answer, KprofError with its verdict on a wrong one, batches that name wrong candidates, and
the same verdicts as the CLI gives for the same runs."""
import json
import os
import subprocess

import numpy
import pytest

import kprof
from kprof.v1 import check_pb2
from conftest import KPROF, MODULES

ANSWERS = os.path.join(MODULES, "answers.so")
CHEATS = os.path.join(MODULES, "cheats.so")
ARGS = ["float32[1000]", "float32[1000]:random", "float32[1000]:random"]


def test_a_right_answer_carries_its_verdict(client):
    result = client.time_evaluate(ANSWERS, "add_honest", ARGS, repeat=2,
                                  reference=f"{ANSWERS}:add_ref")
    assert len(result.results) == 2
    assert result.check.outcome == result.check.PASSED
    assert list(result.check.outputs) == [0]


def test_a_wrong_answer_raises_with_its_verdict(client):
    with pytest.raises(kprof.KprofError) as raised:
        client.time_evaluate(ANSWERS, "add_half", ARGS, reference=(ANSWERS, "add_ref"))
    assert raised.value.code.name == "ABORTED"
    assert "wrong answer" in raised.value.message
    assert raised.value.verdict.outcome == raised.value.verdict.WRONG
    assert raised.value.verdict.mismatches[0].mismatched == 500


def test_expected_data_as_numpy_arrays(client):
    right = numpy.full(4, 2.5, dtype=numpy.float32)
    result = client.time_evaluate("builtin", "fill", ["float32[4]", "float64:2.5"], expect=[right])
    assert result.check.reference == "expected data"
    wrong = right.copy()
    wrong[1] = 1.0
    with pytest.raises(kprof.KprofError) as raised:
        client.time_evaluate("builtin", "fill", ["float32[4]", "float64:2.5"], expect=wrong)
    assert raised.value.verdict.mismatches[0].first_index == 1
    with pytest.raises(ValueError, match="rtol, atol, outputs, checks and bitwise shape a check"):
        client.time_evaluate("builtin", "fill", ["float32[4]", "float64:2.5"], rtol=0.1)


def test_a_batch_names_wrong_candidates_and_keeps_the_right_ones(client):
    jobs = [{"id": f, "module": ANSWERS, "function": f, "args": ARGS, "repeat": 2,
             "reference": {"module": ANSWERS, "function": "add_ref"}}
            for f in ("add_honest", "add_nothing", "add_minus", "add_ref")]
    results = {r.id: r for r in client.batch(jobs)}
    assert results["add_honest"].ok and results["add_ref"].ok
    assert results["add_honest"].verdict.outcome == results["add_honest"].verdict.PASSED
    for name in ("add_nothing", "add_minus"):
        assert not results[name].ok
        assert results[name].code.name == "ABORTED"
        assert results[name].verdict.outcome == results[name].verdict.WRONG


def test_the_cli_and_python_agree_on_verdicts(daemon, client):
    for function in ("add_honest", "add_half", "add_writes_input", "add_off"):
        cli = subprocess.run(
            [KPROF, "--target", daemon, "time", ANSWERS, function,
             *[word for a in ARGS for word in ("--arg", a)],
             "--reference", f"{ANSWERS}:add_ref", "--format", "json"],
            capture_output=True, text=True, check=False)
        try:
            python = client.time_evaluate(ANSWERS, function, ARGS, reference=f"{ANSWERS}:add_ref")
            python_verdict = "passed"
        except kprof.KprofError as error:
            python_verdict = "wrong"
            assert f"ABORTED: {error.message}" in cli.stderr
        cli_verdict = json.loads(cli.stdout)["check"]["outcome"] if cli.returncode == 0 else "wrong"
        assert cli_verdict == python_verdict, function


def test_a_farm_sends_the_reference_module_with_the_jobs(three_daemons):
    """Candidates and their reference as files: each daemon of the farm gets the reference's
    bytes with the jobs that need it."""
    target = ",".join(address for _, address in three_daemons)
    with kprof.farm(target) as farm:
        jobs = [{"id": f"{f}-{i}", "module": ANSWERS, "function": f, "args": ARGS,
                 "reference": {"module": os.path.join(MODULES, "add_honest.so"),
                               "function": "add"}}
                for i in range(6) for f in ("add_honest", "add_minus")]
        results = list(farm.batch(jobs))
    assert sorted(r.id for r in results if r.ok) == sorted(f"add_honest-{i}" for i in range(6))
    for result in results:
        if not result.ok:
            assert result.code.name == "ABORTED", result.message
            assert result.verdict.outcome == result.verdict.WRONG


def test_a_race_ranks_only_the_right_candidates(client):
    reference = {"module": ANSWERS, "function": "add_ref"}
    jobs = [{"id": f, "module": ANSWERS, "function": f, "args": ARGS, "reference": reference}
            for f in ("add_honest", "add_ref", "add_half", "add_nothing")]
    ranking = client.rank(jobs, initial=5, max_repeats=20)
    states = {c.name: c.state for c in ranking.candidates}
    assert states["add_half"] == "failed" and states["add_nothing"] == "failed"
    assert states["add_honest"] != "failed" and states["add_ref"] != "failed"
    assert ranking.fastest in ("add_honest", "add_ref")


def test_one_check_for_a_whole_batch(client, three_daemons):
    jobs = [{"id": f"{f}-{i}", "module": ANSWERS, "function": f, "args": ARGS,
             "repeat": 3}
            for i in range(3) for f in ("add_honest", "add_half")]
    results = list(client.batch(jobs, reference=f"{ANSWERS}:add_ref"))
    assert sorted(r.id for r in results if r.ok) == [f"add_honest-{i}" for i in range(3)]
    reused = [r.verdict.reference_reused for r in results]
    assert reused.count(False) <= 1  # run once for the stream (or held from an earlier test)
    target = ",".join(address for _, address in three_daemons)
    with kprof.farm(target) as farm:
        farmed = list(farm.batch(jobs, reference=(ANSWERS, "add_ref")))
    assert sorted(r.id for r in farmed if r.ok) == [f"add_honest-{i}" for i in range(3)]
    assert all(r.verdict.outcome == r.verdict.WRONG for r in farmed if not r.ok)


def test_profiles_are_checked_each_call_on_its_own(client):
    report = client.profile_function(ANSWERS, "add_honest", ARGS,
                                     reference=f"{ANSWERS}:add_ref")
    assert [v.outcome for v in report.checks] == [report.checks[0].PASSED]
    with pytest.raises(kprof.KprofError) as raised:
        client.profile_function(ANSWERS, "add_minus", ARGS, reference=f"{ANSWERS}:add_ref")
    assert raised.value.code.name == "ABORTED"
    honest = {"module": ANSWERS, "function": "add_honest", "args": ARGS,
              "reference": f"{ANSWERS}:add_ref"}
    unchecked = ("builtin", "copy", ["float32[8]", "float32[8]:random"])
    report = client.profile([unchecked, honest, dict(honest, function="add_ref")])
    assert [v.call for v in report.checks] == [1, 2]
    assert all(v.outcome == v.PASSED for v in report.checks)
    assert len(report.calls) == 3
    with pytest.raises(kprof.KprofError) as raised:
        client.profile([honest, dict(honest, function="add_nothing")])
    assert "call 1 (function 'add_nothing')" in raised.value.message
    assert raised.value.verdict.call == 1
    with pytest.raises(ValueError, match="unknown keys"):
        client.profile([dict(honest, refrence="x")])


def test_strict_checks_refuse_what_basic_ones_pass(client):
    honest = client.time_evaluate(ANSWERS, "add_honest", ARGS, repeat=20,
                                  reference=f"{ANSWERS}:add_ref", checks="strict")
    assert honest.check.level == check_pb2.AnswerCheck.STRICT
    assert len(honest.check.checked_repeats) == 4 and 19 in honest.check.checked_repeats
    assert honest.check.fresh_inputs == 1
    assert honest.throughput.bytes_per_call == 3 * 1000 * 4
    assert honest.throughput.bytes_per_second == pytest.approx(12000 / honest.median)
    assert honest.throughput.fraction_of_peak > 0
    client.time_evaluate(CHEATS, "add_remembers", ARGS, repeat=20,
                         reference=f"{ANSWERS}:add_ref", checks="basic")
    with pytest.raises(kprof.KprofError) as raised:
        client.time_evaluate(CHEATS, "add_remembers", ARGS, repeat=20,
                             reference=f"{ANSWERS}:add_ref", checks="strict")
    assert raised.value.code.name == "ABORTED"
    assert "wrong answer: function 'add_remembers', checked repeat" in raised.value.message
    with pytest.raises(ValueError, match="checks='paranoid' is not a level of checking"):
        client.time_evaluate(ANSWERS, "add_honest", ARGS, reference=f"{ANSWERS}:add_ref",
                             checks="paranoid")


# The kit of tests/modules/cheats.c and what refuses each under strict checks (any of the
# alternatives), as tests/support/cheat_kit.h has it for the C++ tests.
CHEAT_KIT = {
    "add_remembers": ["wrong answer: function 'add_remembers', checked repeat"],
    "add_skips_familiar": ["wrong answer: function 'add_skips_familiar', checked repeat"],
    "add_first_calls": ["wrong answer: function 'add_first_calls', checked repeat"],
    "add_when_changed": ["wrong answer: function 'add_when_changed', checked repeat"],
    "add_in_thread": ["thread(s) still running when it returned"],
    "add_in_pool": ["changed after the call returned", "left 1 thread(s) running"],
    "add_reads_stale": ["wrong answer: function 'add_reads_stale', checked repeat"],
    "add_zeroes_inputs": ["wrote its input argument 1 (the reference leaves it as it is)"],
    "heavy_remembers": ["seeing the same inputs again"],
}


def test_a_strict_batch_names_each_cheat_and_keeps_the_honest(client):
    """Every cheat of the kit in one batch: the heavy ones name a reference of their own and
    still get the batch's strict checks."""
    def job(job_id, module, function):
        line = {"id": job_id, "module": module, "function": function, "args": ARGS, "repeat": 8}
        if function.startswith("heavy_"):
            line["reference"] = f"{CHEATS}:heavy_ref"
        return line
    jobs = [job("honest", ANSWERS, "add_honest"), job("heavy_honest", CHEATS, "heavy_honest")]
    jobs += [job(f, CHEATS, f) for f in CHEAT_KIT]
    results = {r.id: r for r in client.batch(jobs, reference=f"{ANSWERS}:add_ref",
                                             checks="strict")}
    for honest in ("honest", "heavy_honest"):
        assert results[honest].ok, results[honest].message
        assert results[honest].verdict.level == check_pb2.AnswerCheck.STRICT
    for function, whys in CHEAT_KIT.items():
        assert not results[function].ok, function
        assert any(why in results[function].message for why in whys), \
            (function, results[function].message)


def test_a_batchs_level_alone_holds_for_the_jobs_own_references(client):
    jobs = [{"id": "honest", "module": ANSWERS, "function": "add_honest", "args": ARGS,
             "repeat": 8, "reference": f"{ANSWERS}:add_ref"}]
    [result] = client.batch(jobs, checks="strict")
    assert result.ok and result.verdict.level == check_pb2.AnswerCheck.STRICT
    jobs.append({"id": "bare", "module": ANSWERS, "function": "add_honest", "args": ARGS})
    with pytest.raises(ValueError, match="job 'bare' names no reference"):
        list(client.batch(jobs, checks="strict"))
