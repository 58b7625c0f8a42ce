"""The Python client against a real kprofd: results, errors, modules, batches, targets and tokens."""

import os
import socket
import subprocess
import tempfile

import grpc
import pytest

import kprof
from kprof.report import Count, Duration

from conftest import MODULES, run_within, start_daemon


def test_time_evaluate_reads_like_tvms_benchmark_result(client):
    result = client.time_evaluate("builtin", "spin_us", args=["float64:200"], number=2, repeat=4)
    assert len(result.results) == 4
    assert all(r >= 190e-6 for r in result.results)
    assert result.min <= result.median <= result.max
    assert result.mean == pytest.approx(sum(result.results) / 4)
    assert result.raw.device == "cpu:0"
    assert "BenchmarkResult(min=" in repr(result)
    # As the CLI says it: units that suit the times (a spin of 200 us in us, a nop in ns), one
    # spread, the repeats.
    text = str(result)
    assert text.startswith("median 2") and " us  mean " in text, text
    assert "relative std" in text and "4 repeat(s) of 2 call(s)" in text, text
    nop = str(client.time_evaluate("builtin", "nop", number=100, repeat=3))
    assert " ns  " in nop and "(ms)" not in nop, nop


def test_convergence_needs_no_repeat_count(client):
    """Without `repeat`, max_relative_stddev converges within the daemon's 10000 repeats, as the
    CLI's --max-rel-stddev does; unary and in a batch."""
    # Converged, out of time, or — on a host so busy that a spread of 50% is never reached —
    # stopped by the convergence default of 10000 repeats: never by a repeat count of 1.
    def not_stopped_by_one(raw, results):
        assert raw.stop_reason in ("converged", "time budget", "repeat count"), raw.stop_reason
        if raw.stop_reason == "repeat count":
            assert len(results) == 10000, len(results)
        assert len(results) >= 4

    result = client.time_evaluate("builtin", "spin_us", args=["float64:50"],
                                  max_relative_stddev=0.5, min_repeats=4, max_time_ms=5000)
    not_stopped_by_one(result.raw, result.results)
    [answer] = list(client.batch([{"id": "c", "module": "builtin", "function": "spin_us",
                                   "args": ["float64:50"], "max_relative_stddev": 0.5,
                                   "min_repeats": 4, "max_time_ms": 5000}]))
    assert answer.ok, answer.message
    not_stopped_by_one(answer.result.raw, answer.result.results)
    # And a fixed count still means that count.
    assert len(client.time_evaluate("builtin", "spin_us", args=["float64:5"], repeat=1).results) == 1


def test_by_default_it_times_until_the_repeats_agree_as_the_cli_does(client):
    """Neither number nor repeat: repeats of 1 ms or more, at least 10, until they agree or 1 s
    has passed; unary and in a batch. Either given: exactly that, the other 1."""
    def measured(raw, results):
        assert raw.stop_reason in ("converged", "time budget"), raw.stop_reason
        assert len(results) >= 10, len(results)
        lasted = [s * n for s, n in zip(raw.seconds_per_call, raw.numbers)]
        assert min(lasted) >= 0.9e-3, lasted
        assert sum(lasted) <= 1.0 + max(lasted)

    result = client.time_evaluate("builtin", "spin_us", args=["float64:200"])
    measured(result.raw, result.results)
    assert result.median == pytest.approx(200e-6, abs=60e-6)
    [answer] = list(client.batch([{"id": "s", "module": "builtin", "function": "spin_us",
                                   "args": ["float64:200"]}]))
    assert answer.ok, answer.message
    measured(answer.result.raw, answer.result.results)
    assert list(client.time_evaluate("builtin", "spin_us", args=["float64:20"],
                                     number=3).raw.numbers) == [3]
    assert list(client.time_evaluate("builtin", "spin_us", args=["float64:20"],
                                     repeat=2).raw.numbers) == [1, 1]
    # One spec alone is one argument, not a spec a character.
    one = client.time_evaluate("builtin", "spin_us", args="float64:20", repeat=1)
    assert one.raw.argument_shapes == "float64:20" and len(one.results) == 1
    # The wire's one call is asked for by name; a count beside until_stable is refused.
    assert len(client.time_evaluate("builtin", "nop", until_stable=False).results) == 1
    with pytest.raises(kprof.KprofError) as refused:
        client.time_evaluate("builtin", "nop", number=2, until_stable=True)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "until_stable chooses the calls per repeat" in str(refused.value)


def test_a_batch_sends_again_a_job_whose_module_was_evicted(client):
    """A job whose module the daemon no longer holds is answered once the client has uploaded
    the module again and sent the job again, on the same stream."""
    from kprof.v1 import kprof_pb2
    module_id = client.load_module(os.path.join(MODULES, "vector_add.so"))
    client._stub.UnloadModule(kprof_pb2.UnloadModuleRequest(id=module_id))
    assert not client._stub.HasModule(kprof_pb2.HasModuleRequest(id=module_id)).present
    results = list(client.batch([
        {"id": "evicted", "module": module_id, "function": "vadd",
         "args": ["float32[4]", "float32[4]:ones", "float32[4]:ones"]},
        {"id": "builtin", "module": "builtin", "function": "spin_us", "args": ["float64:5"]}]))
    assert sorted(r.id for r in results) == ["builtin", "evicted"]
    assert all(r.ok for r in results), [r.message for r in results]
    assert client._stub.HasModule(kprof_pb2.HasModuleRequest(id=module_id)).present


def test_profiles_take_a_seed(client):
    """profile() and profile_function() send the seed that chooses the random data."""
    sent = []
    for name in ("ProfileFunction", "Profile"):
        real = getattr(client._stub, name)

        def spy(request, *args, real=real, **kwargs):
            sent.append(request)
            return real(request, *args, **kwargs)
        setattr(client._stub, name, spy)
    client.profile_function("builtin", "copy", args=["float32[8]", "float32[8]:random"], seed=7)
    client.profile([("builtin", "copy", ["float32[8]", "float32[8]:random"])], seed=9)
    client.profile_function("builtin", "copy", args=["float32[8]", "float32[8]:random"])
    assert [r.seed for r in sent] == [7, 9, 0]


def test_modules_upload_once_and_options_pass_by_name(client):
    path = os.path.join(MODULES, "vector_add.so")
    module_id = client.load_module(path)
    assert len(module_id) == 64
    assert client.load_module(open(path, "rb").read()) == module_id
    result = client.time_evaluate(path, "vadd", args=["float32[64]:zeros", "float32[64]:ones",
                                                      "float32[64]:ones"], checksums=True,
                                  min_repeat_ms=1)
    assert len(result.raw.checksums) == 3
    assert result.raw.final_number >= 1


def test_errors_carry_the_daemons_code_and_message(client):
    with pytest.raises(kprof.KprofError) as error:
        client.time_evaluate("builtin", "no_such_function")
    assert error.value.code.name == "NOT_FOUND"
    assert "no_such_function" in error.value.message
    with pytest.raises(kprof.KprofError) as error:
        client.time_evaluate("builtin", "spin_us", args=["float64:1"], repeat=0)
    assert error.value.code.name == "INVALID_ARGUMENT"
    with pytest.raises(ValueError):
        client.time_evaluate("builtin", "spin_us", no_such_option=3)
    # A misspelt option is named with the nearest one, in the names Python takes.
    with pytest.raises(ValueError) as misspelt:
        client.time_evaluate("builtin", "spin_us", repeats=3)
    assert str(misspelt.value).startswith(
        "unknown option 'repeats' (did you mean 'repeat'?); accepted: cache_flush_bytes, ")
    assert "minRepeatMs" not in str(misspelt.value)


def test_a_missing_module_is_a_detail_of_the_rich_status(daemon):
    """The daemon names a missing module in the google.rpc.Status of the call's
    grpc-status-details-bin trailer; the client reads that, never the message's words."""
    from kprof import client as client_module
    from kprof.v1 import kprof_pb2, kprof_pb2_grpc
    missing = "d" * 64
    with grpc.insecure_channel(daemon) as channel:
        stub = kprof_pb2_grpc.ProfilerStub(channel)
        request = kprof_pb2.TimeEvaluateRequest()
        request.call.module_id = missing
        request.call.function = "vadd"
        with pytest.raises(grpc.RpcError) as error:
            stub.TimeEvaluate(request, timeout=30)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert client_module._missing_module_of_error(error.value) == missing
    rich = kprof_pb2.RichStatus()
    trailers = dict(error.value.trailing_metadata())
    rich.ParseFromString(trailers["grpc-status-details-bin"])
    assert rich.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert rich.details[0].type_url == "type.googleapis.com/kprof.v1.MissingModule"
    # A NOT_FOUND of another kind names no module.
    with grpc.insecure_channel(daemon) as channel:
        stub = kprof_pb2_grpc.ProfilerStub(channel)
        request = kprof_pb2.TimeEvaluateRequest()
        request.call.module_id = "builtin"
        request.call.function = "no_such_function"
        with pytest.raises(grpc.RpcError) as error:
            stub.TimeEvaluate(request, timeout=30)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert client_module._missing_module_of_error(error.value) is None


def test_profiles_come_back_as_reports(client):
    report = client.profile_function("builtin", "spin_us", args=["float64:100"], number=3,
                                     collectors=["rusage"])
    assert len(report.calls) == 1
    row = report.calls[0]
    assert row["Name"] == "spin_us"
    assert isinstance(row["Count"], Count) and row["Count"] == 3
    assert isinstance(row["Duration (us)"], Duration) and row["Duration (us)"] >= 290
    assert "cpu0" in report.device_metrics
    sequence = client.profile([("builtin", "spin_us", ["float64:50"]),
                               {"module": "builtin", "function": "sleep_us",
                                "args": ["float64:50"]}], repeat=2)
    assert sorted({c["Name"] for c in sequence.calls}) == ["sleep_us", "spin_us"]
    assert len(sequence.calls) == 4


def test_a_batch_answers_every_job_once(client):
    jobs = [{"id": f"j{i}", "module": "builtin", "function": "spin_us",
             "args": ["float64:20"], "repeat": 2} for i in range(60)]
    jobs.append({"id": "bad", "module": "builtin", "function": "no_such"})
    seen = {}
    progress = []
    for result in client.batch(jobs, progress=progress.append):
        assert result.id not in seen
        seen[result.id] = result
    assert len(seen) == 61
    assert all(seen[f"j{i}"].ok and len(seen[f"j{i}"].result.results) == 2 for i in range(60))
    assert not seen["bad"].ok and seen["bad"].code.name == "NOT_FOUND"
    assert progress[-1].done == 60 and progress[-1].failed == 1


def test_targets_name_daemons_or_say_what_is_wrong(monkeypatch):
    assert kprof.resolve_target("h1:9177,h2:9178") == ["h1:9177", "h2:9178"]
    assert kprof.resolve_target("ipv4:127.0.0.1:1,127.0.0.2:2") == ["127.0.0.1:1", "127.0.0.2:2"]
    assert kprof.resolve_target("ipv6:[::1]:9177") == ["[::1]:9177"]
    assert "127.0.0.1:9177" in kprof.resolve_target("dns:///localhost:9177")
    assert "127.0.0.1:9177" in kprof.resolve_target("dns://8.8.8.8/localhost:9177")
    for bad, says in [("h1", "is not HOST:PORT"), ("h1:9177,h2:x", "'h2:x' is not HOST:PORT"),
                      ("dns://x", "is not dns:///HOST:PORT"),
                      ("ipv4:not-an-address:1", "'not-an-address:1' in .* is not an ipv4"),
                      ("ipv4:[::1]:1", "is not an ipv4"), ("ipv6:127.0.0.1:1", "is not an ipv6")]:
        with pytest.raises(ValueError, match=says):
            kprof.resolve_target(bad)

    # One daemon too: a bare host dialled port 0, a URL asked DNS for "http://...".
    for bad, says in [("127.0.0.1", "'127.0.0.1' is not HOST:PORT"),
                      ("http://127.0.0.1:9177", "is a URL; a target is HOST:PORT")]:
        with pytest.raises(ValueError, match=says):
            kprof.connect(bad)

    def unknown(*_args, **_kwargs):  # the resolver's answer for a name it does not know
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(ValueError, match="cannot resolve 'nowhere': Name or service not known"):
        kprof.resolve_target("dns:///nowhere:9177")


def test_target_and_token_come_from_the_clis_environment(monkeypatch):
    """$KPROF_TARGET and $KPROF_TOKEN_FILE mean to the Python client what they mean to kprof."""
    with tempfile.TemporaryDirectory() as scratch:
        tokens = os.path.join(scratch, "tokens")
        with open(tokens, "w") as out:
            out.write("# the lab's tokens\n\nsecret-one\nsecret-two\n")
        process, target = start_daemon(scratch, "--token-file", tokens)
        try:
            monkeypatch.delenv("KPROF_TOKEN", raising=False)
            monkeypatch.delenv("KPROF_TOKEN_FILE", raising=False)
            monkeypatch.setenv("KPROF_TARGET", target)
            with kprof.connect() as anonymous:
                with pytest.raises(kprof.KprofError) as refused:
                    anonymous.info()
                assert refused.value.code.name == "UNAUTHENTICATED"
            monkeypatch.setenv("KPROF_TOKEN_FILE", tokens)
            with kprof.connect() as daemon:
                assert daemon.info().devices[0].device == "cpu:0"
            with kprof.farm() as farm:
                result = farm.time_evaluate("builtin", "spin_us", args=["float64:5"], repeat=2)
            assert len(result.results) == 2
            with kprof.connect(target, token_file=tokens) as daemon:
                assert daemon.info().devices[0].device == "cpu:0"
            empty = os.path.join(scratch, "empty")
            with open(empty, "w") as out:
                out.write("# nothing yet\n")
            with pytest.raises(kprof.KprofError, match="the token file '.*empty' holds no token"):
                kprof.connect(token_file=empty)
            with pytest.raises(kprof.KprofError, match="cannot read token file '/nowhere'"):
                kprof.connect(token_file="/nowhere")
        finally:
            process.terminate()
            process.wait(timeout=20)


def test_a_large_module_refused_on_a_daemons_first_job_fails_only_its_jobs(daemon):
    """A module over 4 MiB goes by upload; when the daemon refuses it on a stream not yet
    opened, each of its jobs fails with the reason and the others run."""
    junk = b"not an ELF file " * (5 << 16)  # 5 MiB
    jobs = [{"id": "junk1", "module": junk, "function": "gemm"},
            {"id": "junk2", "module": junk, "function": "gemm"},
            {"id": "nop", "module": "builtin", "function": "nop"}]
    with kprof.Farm(daemon) as farm:
        results = {r.id: r for r in run_within(120, lambda: list(farm.batch(jobs)))}
    assert sorted(results) == ["junk1", "junk2", "nop"]
    assert results["nop"].ok, results["nop"].message
    for k in ("junk1", "junk2"):
        assert not results[k].ok and results[k].code.name == "INVALID_ARGUMENT", results[k]


def test_a_lease_runs_the_clients_calls_alone_and_refuses_them_after(daemon):
    with kprof.connect(daemon) as holder, kprof.connect(daemon) as other:
        with holder.lease("cpu:0", seconds=60) as lease:
            assert lease.holder == "local" and lease.device == "cpu:0" and len(lease.id) == 32
            assert not lease.clocks_locked and lease.clocks_note  # recorded only
            assert holder.time_evaluate("builtin", "spin_us", ["float64:10"], repeat=1).mean > 0
            # On a loopback daemon everyone is "local": a call without the lease waits, and one
            # due before the lease's end is refused at once, naming it.
            with pytest.raises(kprof.KprofError) as refused:
                other.time_evaluate("builtin", "spin_us", ["float64:10"], repeat=1, timeout=5)
            assert refused.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "cpu:0 is leased to local" in refused.value.message
            held = holder.info().devices[0].lease
            assert held.lease_id == lease.id
            assert other.info().devices[0].lease.lease_id == ""  # the holder's to know
            with pytest.raises(kprof.KprofError) as second:
                holder.lease("cpu:0", seconds=10)
            assert second.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert "holds lease" in second.value.message
        assert lease.end_reason == "released"
        assert not holder.info().devices[0].HasField("lease")
        # The holder's calls no longer carry it, and run as anyone's.
        assert holder.time_evaluate("builtin", "spin_us", ["float64:10"], repeat=1).mean > 0
        with pytest.raises(kprof.KprofError) as too_long:
            holder.lease("cpu:0", seconds=10 ** 6)
        assert too_long.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "--max-lease" in too_long.value.message


def test_what_a_kernel_prints_comes_back_with_its_result(client):
    """A function's printf reaches its result (escaped, the last 16 KiB), not the daemon's log;
    in a batch too; a crash's error ends with what it printed last."""
    faults = os.path.join(MODULES, "faults.so")
    r = client.time_evaluate(faults, "prints", repeat=1)
    assert r.output.startswith("hello from the kernel\n")
    assert "moves the cursor: \\x1b[2J\n" in r.output and "\x1b" not in r.output
    assert r.output_bytes == 2 * 148  # the untimed first call and the timed one
    [line] = client.batch([{"id": "p", "module": faults, "function": "prints", "repeat": 1}])
    assert line.ok and "forged CODE=ABORTED" in line.result.output
    with pytest.raises(kprof.KprofError, match='its output ended: "vadd.c:12: vadd: check'):
        client.time_evaluate(faults, "asserts")


def test_a_job_that_is_no_job_fails_alone_and_the_others_run(client, daemon):
    """As a bad line of `kprof batch` is answered on its own line: a missing key, an unknown
    option, a module file that is not there, each a failed result naming the job and what was
    wrong; on one daemon's stream and over a farm alike."""
    jobs = [{"id": "good", "module": "builtin", "function": "nop", "repeat": 1},
            {"id": "no_function", "module": "builtin"},
            {"id": "misspelt", "module": "builtin", "function": "nop", "repet": 3},
            {"id": "no_file", "module": "/nonexistent/k.so", "function": "f"},
            {"id": "also_good", "module": "builtin", "function": "nop", "repeat": 1}]
    for results in (list(client.batch(jobs)), list(kprof.Farm(daemon).batch(jobs))):
        by_id = {r.id: r for r in results}
        assert sorted(by_id) == sorted(j["id"] for j in jobs), results
        assert by_id["good"].ok and by_id["also_good"].ok
        missing = by_id["no_function"]
        assert not missing.ok and missing.code == grpc.StatusCode.INVALID_ARGUMENT
        assert missing.message == "job 'no_function': needs a 'function' key"
        assert by_id["misspelt"].code == grpc.StatusCode.INVALID_ARGUMENT
        assert "repet" in by_id["misspelt"].message
        assert by_id["no_file"].code == grpc.StatusCode.NOT_FOUND
        assert "/nonexistent/k.so" in by_id["no_file"].message


def test_the_source_trees_python_imports_after_a_build():
    """PYTHONPATH=python (the source tree's) finds the generated modules of the build beside it;
    without a build it says to make one."""
    import shutil
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
    root = os.path.dirname(source)
    built = [p for p in ("release", "debug", "asan", "clang")
             if os.path.isdir(os.path.join(root, "build", p, "python", "kprof", "v1"))]
    if not built:
        pytest.skip("no build beside this source tree")
    env = dict(os.environ, PYTHONPATH=source)
    out = subprocess.run(["/usr/bin/python3", "-c", "import kprof, kprof.v1.kprof_pb2 as pb; "
                          "print(kprof.__file__); print(pb.__file__)"],
                         env=env, capture_output=True, text=True, check=True,
                         cwd="/").stdout.split("\n")  # not a build's python/ as `-c`'s path
    assert out[0] == os.path.join(source, "kprof", "__init__.py")
    assert out[1].startswith(os.path.join(root, "build", built[0], "python"))
    with tempfile.TemporaryDirectory() as alone:
        shutil.copytree(os.path.join(source, "kprof"), os.path.join(alone, "python", "kprof"))
        bare = subprocess.run(["/usr/bin/python3", "-c", "import kprof"],
                              env=dict(os.environ, PYTHONPATH=os.path.join(alone, "python")),
                              capture_output=True, text=True, cwd="/")
        assert bare.returncode != 0 and "run `make` first" in bare.stderr, bare.stderr
