"""The Python client against a real kprofd, and its report renderings against the C++ ones
(`kprof report`)."""

import json
import math
import os
import socket
import subprocess
import tempfile
import threading

import grpc
import pytest

import kprof
from kprof.report import Count, Duration, Percent, Ratio, Report, shortest_decimal

from conftest import KPROF, MODULES, start_daemon


@pytest.fixture()
def three_daemons():
    with tempfile.TemporaryDirectory() as scratch:
        started = [start_daemon(os.path.join(scratch, str(i))) for i in range(3)]
        yield started
        for process, _ in started:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=20)


@pytest.fixture()
def client(daemon):
    with kprof.connect(daemon) as c:
        yield c


def test_time_evaluate_reads_like_tvms_benchmark_result(client):
    result = client.time_evaluate("builtin", "spin_us", args=["float64:200"], number=2, repeat=4)
    assert len(result.results) == 4
    assert all(r >= 190e-6 for r in result.results)
    assert result.min <= result.median <= result.max
    assert result.mean == pytest.approx(sum(result.results) / 4)
    assert result.raw.device == "cpu:0"
    assert "BenchmarkResult(min=" in repr(result)
    assert "mean (ms)" in str(result)


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
    assert len(client.time_evaluate("builtin", "spin_us", args=["float64:5"]).results) == 1


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


def jobs_completed(target):
    with kprof.connect(target) as c:
        return sum(d.jobs_completed for d in c.info().devices)


def test_a_farm_spreads_a_batch_and_uploads_modules_where_jobs_go(three_daemons):
    targets = [target for _, target in three_daemons]
    path = os.path.join(MODULES, "vector_add.so")
    jobs = [{"id": f"v{i}", "module": path, "function": "vadd",
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


def run_within(seconds, work):
    """work() in a thread, failing the test if it takes longer than `seconds` (a batch that
    waits forever must fail, not hang the suite)."""
    outcome = {}

    def target():
        try:
            outcome["value"] = work()
        except Exception as error:  # pylint: disable=broad-except
            outcome["error"] = error
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def farm_batch_stopping_one(daemons, stop, after):
    """A batch of 300 short spins over `daemons`, calling `stop` once `after` results are in."""
    jobs = [{"id": f"s{i}", "module": "builtin", "function": "spin_us",
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


def kprof_report(report_json, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(report_json)
    try:
        return subprocess.run([KPROF, "report", f.name, *args], check=True, capture_output=True,
                              text=True).stdout
    finally:
        os.unlink(f.name)


# A report that exercises the renderings: aggregation of repeated calls, mixed kinds in one
# column, ratios, big counts, non-finite numbers, quotes, commas, non-ASCII names.
TRICKY = Report(
    calls=[
        {"Name": "matmul", "Duration (us)": Duration(812.5), "Count": Count(1),
         "Percent": Percent(61.0), "Device": "cpu0", "Argument Shapes": "float32[256, 256]",
         "Ratio": Ratio(0.5), "Faults": Count(1234567)},
        {"Name": "matmul", "Duration (us)": Duration(1000.25), "Count": Count(2),
         "Percent": Percent(10.0), "Device": "cpu0", "Argument Shapes": "float32[256, 256]",
         "Ratio": Ratio(0.25), "Faults": Count(3)},
        {"Name": "relu \"fused\", ünïcode", "Duration (us)": Duration(1e-7), "Count": Count(5),
         "Device": "cpu0", "Note": "a,b"},
        {"Name": "nan call", "Duration (us)": Duration(math.nan), "Mixed": Count(7)},
        {"Name": "big", "Duration (us)": Duration(123456789.125), "Mixed": "text",
         "Ratio": Ratio(1e20)},
    ],
    device_metrics={"cpu0": {"Duration (us)": Duration(2000.0), "Name": "Total"},
                    "cuda0": {"Duration (us)": Duration(math.inf)}},
    configuration={"Number of threads": Count(2), "Host": "lab-1", "Load": Ratio(0.125)})


@pytest.mark.parametrize("options", [(), ("--no-aggregate",), ("--no-sort",), ("--no-sums",),
                                     ("--no-aggregate", "--no-sort", "--no-sums")])
def test_tables_match_the_cli(options):
    text = TRICKY.as_json()
    expected = kprof_report(text, *options)
    # The same report on both sides: as read back from the JSON (where inf became null, NaN).
    table = Report.from_json(text).as_table(sort="--no-sort" not in options,
                            aggregate="--no-aggregate" not in options,
                            col_sums="--no-sums" not in options)
    assert table == expected


def test_csv_and_json_match_the_cli():
    text = TRICKY.as_json()
    assert TRICKY.as_csv() == kprof_report(text, "--format", "csv")
    assert json.loads(kprof_report(text, "--format", "json")) == json.loads(text)
    assert Report.from_json(kprof_report(text, "--format", "json")).as_json() == text


def test_traces_match_the_cli():
    """The Chrome trace event format, byte for byte as `kprof report --format trace`, and a
    trace by the format's rules: a named track per device, slices end to end on each."""
    text = TRICKY.as_json()
    back = Report.from_json(text)
    assert back.as_trace() + "\n" == kprof_report(text, "--format", "trace")
    trace = json.loads(back.as_trace())
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["cpu0", "cuda0", "unknown device"]
    cpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and names[e["tid"]] == "cpu0"]
    assert [e["name"] for e in cpu] == ["matmul", "matmul", 'relu "fused", ünïcode']
    assert cpu[1]["ts"] == cpu[0]["ts"] + cpu[0]["dur"] == 812.5
    assert cpu[0]["args"]["Faults"] == 1234567


def test_html_pages_match_the_cli_and_render_in_a_real_browser():
    """`kprof report --format html` and Report.as_html(), byte for byte; the page in headless
    Chromium: bars drawn, the devices and calls named."""
    text = TRICKY.as_json()
    back = Report.from_json(text)
    page = kprof_report(text, "--format", "html")
    assert back.as_html() == page
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "report.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        (_, _, rows), dom = _render_in_chromium(path, scratch, "900,700")
        pixels = [p for row in rows for p in row]
        bars = sum(1 for r, g, b in pixels
                   if abs(r - 0x4a) < 24 and abs(g - 0x78) < 24 and abs(b - 0xc2) < 24)
        assert bars > 500, f"{bars} bar pixels"
        for label in ("cpu0", "unknown device", "matmul", "Calls by device", "Configuration"):
            assert label in dom, label


def test_reports_read_back_with_their_kinds():
    back = Report.from_json(TRICKY.as_json(indent=2))
    assert back.calls[0]["Faults"] == 1234567 and isinstance(back.calls[0]["Faults"], Count)
    assert isinstance(back.calls[0]["Ratio"], Ratio)
    assert math.isnan(back.calls[3]["Duration (us)"])
    assert back.configuration == TRICKY.configuration


def test_malformed_reports_name_the_place():
    with pytest.raises(ValueError, match=r'calls\[0\]\."Duration \(us\)": unknown metric kind '
                                         r'"seconds"'):
        Report.from_json('{"calls": [{"Duration (us)": {"seconds": 1}}]}')
    with pytest.raises(ValueError, match="not JSON"):
        Report.from_json("{")
    with pytest.raises(ValueError, match="a count is an integer"):
        Report.from_json('{"calls": [{"Count": {"count": 1.5}}]}')


@pytest.mark.parametrize("value,text", [
    (100.0, "100"), (0.1, "0.1"), (1e16, "1e+16"), (1e15, "1e+15"), (123456.0, "123456"),
    (1e-5, "1e-05"), (0.0001, "1e-04"), (0.001, "0.001"), (-2.5, "-2.5"), (0.0, "0"), (1.5e300, "1.5e+300"),
    (812.5, "812.5"), (math.inf, "inf"), (math.nan, "nan")])
def test_shortest_decimal_is_cxx_to_chars(value, text):
    assert shortest_decimal(value) == text


def test_kprof_compare_agrees_with_scipys_u_test():
    """kprof compare's p-values against scipy.stats.mannwhitneyu on the same repeats: small
    samples without ties (exact), with ties and large ones (the normal approximation), shifted
    and not."""
    import random
    from scipy.stats import mannwhitneyu
    rng = random.Random(20261202)
    cases = []
    for n1, n2, shift, ties in [(5, 5, 1.0, False), (4, 7, 1.02, False), (8, 30, 1.01, False),
                                (12, 12, 1.0, True), (30, 30, 1.01, False), (50, 40, 1.003, True),
                                (9, 9, 1.05, False), (6, 600, 1.002, False)]:
        draw = (lambda: round(rng.lognormvariate(0, 0.01), 3)) if ties else \
            (lambda: rng.lognormvariate(0, 0.01))
        base = [1e-3 * draw() for _ in range(n1)]
        new = [1e-3 * shift * draw() for _ in range(n2)]
        cases.append((base, new))
    with tempfile.TemporaryDirectory() as scratch:
        for k, (base, new) in enumerate(cases):
            paths = []
            for side, repeats in (("base", base), ("new", new)):
                paths.append(os.path.join(scratch, f"{side}{k}.json"))
                with open(paths[-1], "w") as f:
                    json.dump({"results": repeats}, f)
            out = subprocess.run([KPROF, "compare", *paths, "--format", "json",
                                  "--min-repeats", "1"], check=True, capture_output=True,
                                 text=True).stdout
            got = json.loads(out)["comparisons"][0]
            expected = mannwhitneyu(base, new, alternative="two-sided").pvalue
            assert math.isclose(got["p_value"], expected, rel_tol=1e-9, abs_tol=1e-15), \
                (len(base), len(new), got["p_value"], expected)
            assert got["interval"][0] <= got["interval"][1], got


def test_compare_gives_the_clis_output_byte_for_byte():
    """kprof.compare against `kprof compare` on the same files, in every format: kprof time
    JSON (ties, exact and approximate U tests, too few repeats), kprof batch JSONL (a failed
    job, ids in one file only, names to quote), Google Benchmark JSON, and files matched by
    call."""
    import random
    rng = random.Random(7)

    def repeats(n, scale, digits=None):
        values = [scale * rng.lognormvariate(0, 0.02) for _ in range(n)]
        return [round(v, digits) for v in values] if digits else values

    def batch_file(path, shift, prefix=""):
        with open(path, "w") as f:
            for k, (n, digits) in enumerate([(30, None), (6, None), (12, 6), (4, None),
                                             (40, None), (9, 7)]):
                f.write(json.dumps({"id": f'{prefix}k{k} "q",x', "status": "OK",
                                    "module": "m.so", "function": "gemm", "args": [f"a{k}"],
                                    "results": repeats(n, 1e-3 * (1 + shift * k), digits)})
                        + "\n")
            f.write(json.dumps({"id": f"{prefix}broken", "status": "NOT_FOUND",
                                "error": "no function"}) + "\n")
            f.write(json.dumps({"id": f"{prefix}only-{shift}", "status": "OK",
                                "results": repeats(10, 1e-6)}) + "\n")

    def gbench_file(path, scale):
        runs = []
        for name, n in (("BM_a/8", 12), ("BM_b", 3)):
            for v in repeats(n, 800 * scale):
                runs.append({"name": name, "run_name": name, "run_type": "iteration",
                             "real_time": v, "cpu_time": v, "time_unit": "us"})
            runs.append({"name": name + "_mean", "run_name": name, "run_type": "aggregate",
                         "real_time": 1.0, "cpu_time": 1.0, "time_unit": "us"})
        with open(path, "w") as f:
            json.dump({"context": {}, "benchmarks": runs}, f)

    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, values in (("t1", repeats(5, 2e-4)), ("t2", repeats(7, 2.2e-4)),
                             ("t3", repeats(25, 2e-4, 6)), ("t4", repeats(3, 2e-4))):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "w") as f:
                json.dump({"module": "builtin", "function": "spin_us", "results": values}, f)
        files["b1"], files["b2"] = os.path.join(d, "b1.jsonl"), os.path.join(d, "b2.jsonl")
        batch_file(files["b1"], 0.0)
        batch_file(files["b2"], 0.02)
        files["b3"] = os.path.join(d, "b3.jsonl")
        batch_file(files["b3"], 0.01, prefix="other-")
        files["g1"], files["g2"] = os.path.join(d, "g1.json"), os.path.join(d, "g2.json")
        gbench_file(files["g1"], 1.0)
        gbench_file(files["g2"], 0.93)
        # Odd shapes both read alike: repeats of no time (an infinite change, a resample without
        # a ratio), one side of 6 against 2000 (the exact test over many orderings), a byte-order
        # mark and CRLF lines, members of the wrong type.
        for name, values in (("z0", [0.0] * 6), ("z1", [0.0, 0.0, 0.0, 1e-6, 2e-6, 3e-6]),
                             ("long", repeats(2000, 2.1e-4))):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "w") as f:
                json.dump({"results": values}, f)
        files["crlf"] = os.path.join(d, "crlf.jsonl")
        with open(files["crlf"], "w", encoding="utf-8-sig", newline="") as f:
            for k in range(3):
                f.write(json.dumps({"id": f'k{k} "q",x', "status": "OK",
                                    "results": repeats(12, 1e-3)}) + "\r\n")
        files["odd"] = os.path.join(d, "odd.json")
        with open(files["odd"], "w") as f:
            json.dump({"benchmarks": [
                {"name": 7, "run_name": "BM_a/8", "run_type": 5, "real_time": 800.0,
                 "time_unit": "us", "error_occurred": 1},
                {"name": "BM_b", "real_time": 3.0, "time_unit": 4, "error_occurred": False}]}, f)
        pairs = [("t1", "t2", []), ("t3", "t1", []), ("t1", "t4", []),
                 ("t2", "t3", ["--confidence", "0.99", "--threshold", "0"]),
                 ("b1", "b2", []), ("b1", "b3", []),
                 ("b2", "b1", ["--min-repeats", "3", "--resamples", "500"]), ("g1", "g2", []),
                 ("z0", "t1", []), ("z1", "t1", []), ("t1", "long", ["--resamples", "100"]),
                 ("crlf", "b1", []), ("g1", "odd", ["--min-repeats", "1"])]
        for base, new, options in pairs:
            kwargs = {"confidence": 0.95, "threshold": 1.0, "min_repeats": 5, "resamples": 2000}
            for flag, value in zip(options[::2], options[1::2]):
                key = flag[2:].replace("-", "_")
                kwargs[key] = int(value) if key in ("min_repeats", "resamples") else float(value)
            result = kprof.compare(files[base], files[new], **kwargs)
            for fmt, rendered in (("table", result.as_table()), ("json", result.as_json()),
                                  ("csv", result.as_csv())):
                cli = subprocess.run([KPROF, "compare", files[base], files[new], "--format", fmt,
                                      *options], check=True, capture_output=True,
                                     text=True).stdout
                assert rendered == cli, (base, new, fmt, rendered, cli)
        verdicts = {c.name: c.verdict for c in kprof.compare(files["b1"], files["b2"]).comparisons}
        assert verdicts['k5 "q",x'] == "slower" and verdicts['k3 "q",x'] == "insufficient"
        with pytest.raises(ValueError, match="is a directory"):
            kprof.compare(d, files["t1"])
        assert kprof.compare_repeats([1e-3] * 5, [2e-3] * 5).verdict == "slower"


def _png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG, as Chromium writes them."""
    import struct
    import zlib
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6) and body[12] == 0, body
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(
        width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def _render_in_chromium(svg, scratch, size):
    """A screenshot of `svg` by headless Chromium, and the page's text as Chromium read it."""
    import shutil
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: deploy/install-deps.sh installs it"
    png = os.path.join(scratch, os.path.basename(svg) + ".png")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={os.path.join(scratch, 'profile')}"]
    subprocess.run([*common, f"--screenshot={png}", f"--window-size={size}", "file://" + svg],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([*common, "--dump-dom", "file://" + svg], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return _png_pixels(png), dom


def test_plots_render_in_a_real_browser(daemon):
    """kprof time --plot and kprof compare --plot, rendered by headless Chromium: not blank,
    the bars and the verdicts' colours drawn, the labels there."""
    with tempfile.TemporaryDirectory() as scratch:
        times = {}
        for name, us in (("base", 100), ("new", 130)):
            out = os.path.join(scratch, name + ".json")
            with open(out, "w") as f:
                subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                                f"float64:{us}", "--repeat", "20", "--format", "json",
                                *(["--plot", os.path.join(scratch, "repeats.svg")]
                                  if name == "base" else [])],
                               check=True, stdout=f)
            times[name] = out
        subprocess.run([KPROF, "compare", times["base"], times["new"], "--plot",
                        os.path.join(scratch, "compare.svg")], check=True, capture_output=True)
        (width, height, rows), dom = _render_in_chromium(os.path.join(scratch, "repeats.svg"),
                                                         scratch, "720,300")
        assert (width, height) == (720, 300)
        pixels = [p for row in rows for p in row]
        inked = sum(1 for p in pixels if p != (255, 255, 255))
        assert inked > 0.05 * len(pixels), f"{inked} of {len(pixels)} pixels drawn"
        assert any(abs(r - 0x4a) < 24 and abs(g - 0x78) < 24 and abs(b - 0xc2) < 24
                   for r, g, b in pixels), "no histogram bars"
        assert "spin_us float64:100" in dom and "median" in dom and "20 repeats" in dom
        (width, height, rows), dom = _render_in_chromium(os.path.join(scratch, "compare.svg"),
                                                         scratch, "720,470")
        pixels = [p for row in rows for p in row]
        red = sum(1 for r, g, b in pixels if r > 150 and g < 90 and b < 90)
        assert red > 200, f"the slower verdict's colour: {red} pixels"
        import re
        assert re.search(r"slower \+(2[89]|3[0-2])\.\d\d%", dom), dom  # spins of 100 and 130 us
        assert "no change" in dom and "base.json -&gt; new.json" in dom


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


def test_rank_gives_the_clis_output_byte_for_byte():
    """kprof.rank_results against `kprof rank` on the same files, in every format: ties, clear
    losers, sizes counted exactly and past 2^100 orderings (the normal approximation), too few
    repeats to decide, a failed job, a repeat of no time, names to quote, other options."""
    import random
    rng = random.Random(11)

    def repeats(n, scale, cv=0.01):
        return [scale * rng.lognormvariate(0, cv) for _ in range(n)]

    with tempfile.TemporaryDirectory() as d:
        batch = os.path.join(d, "batch.jsonl")
        with open(batch, "w") as f:
            for name, values in (("fast", repeats(30, 1e-3)), ('tie "q",x', repeats(30, 1.002e-3)),
                                 ("close", repeats(12, 1.01e-3)), ("slow", repeats(10, 1.2e-3)),
                                 ("few", repeats(3, 1.0e-3)), ("zero", [0.0, 1e-3, 1e-3]),
                                 ("schnell-ü", repeats(150, 1.001e-3, 0.005)),
                                 ("wide", repeats(150, 1.3e-3, 0.2))):
                f.write(json.dumps({"id": name, "status": "OK", "results": values},
                                   ensure_ascii=False) + "\n")
            f.write(json.dumps({"id": "broken", "status": "NOT_FOUND", "error": "no function"})
                    + "\n")
            f.write(json.dumps({"ranking": {"fastest": "fast"}}) + "\n")  # a race's last line
        single = os.path.join(d, "single.json")
        with open(single, "w") as f:
            json.dump({"results": repeats(70, 0.99e-3)}, f)  # 70 against 150: past 2^100
        for options in ([], ["--threshold", "0"], ["--threshold", "2.5", "--confidence", "0.8"]):
            threshold = float(options[options.index("--threshold") + 1]) if options else 1.0
            confidence = float(options[options.index("--confidence") + 1]) \
                if "--confidence" in options else 0.95
            ranking = kprof.rank_results(batch, single, confidence=confidence,
                                         threshold=threshold)
            for fmt, text in (("table", ranking.as_table()), ("json", ranking.as_json()),
                              ("csv", ranking.as_csv())):
                cli = subprocess.run([KPROF, "rank", batch, single, "--format", fmt, *options],
                                     capture_output=True, text=True)
                assert cli.returncode == 0, cli.stderr
                assert text == cli.stdout, (fmt, options)
        states = {c.name: c.state for c in kprof.rank_results(batch, single).candidates}
        assert states["single.json"] == "fastest"
        assert states["slow"] == "slower" and states["wide"] == "slower"
        assert states["zero"] == "failed" and states["broken"] == "failed"
        assert states["few"] == "undecided"
        with pytest.raises(ValueError, match="the measurement 'single.json' is twice in"):
            kprof.rank_results(single, single)


def _race_on(costs, seed, **options):
    """A Race over simulated kernels (log-normal, 1% spread, 2% of repeats 3x): (Ranking,
    repeats it measured)."""
    import random
    rng = random.Random(seed)

    def draw(cost, n):
        return [cost * rng.lognormvariate(0, 0.01) * (3 if rng.random() < 0.02 else 1)
                for _ in range(n)]

    race = kprof.Race([f"k{i}" for i in range(len(costs))], **options)
    measured = 0
    while True:
        planned = race.next_round()
        if not planned:
            return race.current(), measured
        for i, add in planned:
            race.add(i, draw(costs[i], add))
            measured += add


def test_a_race_finds_the_tie_set_in_under_half_a_fixed_plans_repeats():
    """20 candidates, 3 within 0.5% of each other, the rest 5% and more slower: the race names
    exactly the 3, decided, and a fixed plan given twice the race's repeats is right less
    often than the confidence promises (as core's RaceTest, on fewer runs)."""
    import random
    costs = [100e-6, 100.3e-6, 100.5e-6] + [100e-6 * (1.05 + 0.02 * i) for i in range(17)]
    runs, right, total = 8, 0, 0
    for seed in range(runs):
        ranking, measured = _race_on(costs, seed)
        total += measured
        right += ranking.decided and sorted(ranking.ties) == ["k0", "k1", "k2"]
        assert all(c.repeats <= 23 for c in ranking.candidates if c.state == "slower")
    assert right == runs
    each = math.ceil(2 * total / runs / len(costs))
    fixed_right = 0
    for seed in range(runs):
        rng = random.Random(100 + seed)
        ranking = kprof.rank_repeats({f"k{i}": [c * rng.lognormvariate(0, 0.01) *
                                                (3 if rng.random() < 0.02 else 1)
                                                for _ in range(each)]
                                      for i, c in enumerate(costs)})
        fixed_right += ranking.decided and sorted(ranking.ties) == ["k0", "k1", "k2"]
    assert fixed_right < runs * 0.95, (each, fixed_right)


def test_client_and_farm_rank_modules_that_share_an_entry_point(client, three_daemons):
    """A race through a Client and through a Farm of three daemons: candidate_1 under two ids
    ties with itself, candidate_2 and candidate_3 (twice and three times its cost) stop after
    the first round; each result holds all its candidate's repeats."""
    jobs = [{"id": name, "module": os.path.join(MODULES, module + ".so"), "function": "gemm"}
            for name, module in (("one", "candidate_1"), ("two", "candidate_2"),
                                 ("again", "candidate_1"), ("three", "candidate_3"))]
    farm = kprof.farm(",".join(target for _, target in three_daemons))
    with farm:
        for runner in (client, farm):
            ranking = runner.rank(jobs, threshold=5, max_repeats=40)
            assert sorted(ranking.ties) == ["again", "one"], ranking.as_table()
            by_name = {c.name: c for c in ranking.candidates}
            for loser, change in (("two", 1.0), ("three", 2.0)):
                assert by_name[loser].state == "slower"
                assert by_name[loser].repeats <= 15
                assert by_name[loser].change == pytest.approx(change, abs=0.3)
            for name, c in by_name.items():
                assert len(ranking.results[name].results) == c.repeats
                assert ranking.results[name].median == pytest.approx(c.median)
            assert ranking.repeats == sum(c.repeats for c in ranking.candidates)
            assert ranking.seconds > 0
            line = json.loads(ranking.as_line())
            assert line["ranking"]["fastest"] in ("one", "again")


def test_a_race_whose_fastest_fails_late_keeps_the_slower_slower():
    race = kprof.Race(["fast", "slow"])
    race.next_round()
    race.add(0, [1e-3 * (1 + 0.001 * i) for i in range(10)])
    race.add(1, [2e-3 * (1 + 0.001 * i) for i in range(10)])
    assert race.next_round() == []
    race.fail(0, "UNAVAILABLE: the daemon went away")
    ranking = race.current()
    assert ranking.fastest is None and ranking.ties == []
    assert [(c.name, c.state) for c in ranking.candidates] == [("slow", "slower"),
                                                                ("fast", "failed")]
    assert "fastest: none left (every candidate failed, or was found slower" in ranking.as_table()


def test_rank_refuses_what_it_cannot_race(client):
    good = {"id": "a", "module": "builtin", "function": "nop"}
    with pytest.raises(ValueError, match="leave out 'repeat'"):
        client.rank([good, dict(good, id="b", repeat=3)])
    with pytest.raises(ValueError, match="used twice"):
        client.rank([good, good])
    with pytest.raises(ValueError, match="budget"):
        client.rank([good], budget=-1)
    with pytest.raises(ValueError, match="initial 1"):
        client.rank([good], initial=1)
    with pytest.raises(ValueError, match="confidence"):
        kprof.rank_repeats({"a": [1.0]}, confidence=1)
    ranking = client.rank([good, {"id": "gone", "module": "builtin", "function": "no_such"}])
    states = {c.name: c for c in ranking.candidates}
    assert states["gone"].state == "failed" and "NOT_FOUND" in states["gone"].error
    assert states["a"].state == "fastest"


def test_python_plots_are_the_clis_byte_for_byte(daemon, client):
    """BenchmarkResult.as_svg, kprof.pictures.repeats_svg and Comparisons.as_svg draw what
    `kprof time --plot` and `kprof compare --plot` draw, to the byte: one comparison (with both
    sides' repeats beneath) and several (a batch), names to escape."""
    from kprof.pictures import repeats_svg
    with tempfile.TemporaryDirectory() as scratch:
        times = {}
        for name, us in (("base", 60), ("new", 75)):
            out, svg = os.path.join(scratch, name + ".json"), os.path.join(scratch, name + ".svg")
            with open(out, "w") as f:
                subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                                f"float64:{us}", "--repeat", "15", "--format", "json", "--plot",
                                svg], check=True, stdout=f)
            with open(out) as f:
                results = json.load(f)["results"]
            with open(svg) as f:
                assert repeats_svg(f"spin_us float64:{us}", results) == f.read()
            times[name] = out
        plot = os.path.join(scratch, "compare.svg")
        subprocess.run([KPROF, "compare", times["base"], times["new"], "--plot", plot],
                       check=True, capture_output=True)
        with open(plot) as f:
            assert kprof.compare(times["base"], times["new"]).as_svg() == f.read()
        batches = []
        for k, scale in enumerate((1.0, 1.1)):
            path = os.path.join(scratch, f"b{k}.jsonl")
            with open(path, "w") as f:
                for j, name in enumerate(('a<&>"', "b", "c")):
                    f.write(json.dumps({"id": name, "status": "OK", "results": [
                        1e-4 * scale * (1 + 0.01 * ((i * 7 + j) % 5)) for i in range(12)]}) + "\n")
            batches.append(path)
        subprocess.run([KPROF, "compare", *batches, "--plot", plot], check=True,
                       capture_output=True)
        with open(plot) as f:
            assert kprof.compare(*batches).as_svg() == f.read()
    live = client.time_evaluate("builtin", "spin_us", args=["float64:20"], repeat=6)
    assert live.as_svg("spin_us float64:20") == repeats_svg("spin_us float64:20", live.results)
    assert repeats_svg("none", []).count("no repeats") == 1


def test_python_gbench_is_the_clis_document_and_compare_py_reads_it(daemon, client):
    """BenchmarkResult.as_gbench and kprof.gbench write the document `kprof time --format
    gbench` and `kprof batch --format gbench` write: byte for byte on the same answers (but the
    date), and against the CLI's own runs the same members, names and run types; exact
    aggregates as Google Benchmark computes them; and Google Benchmark's compare.py reads it."""
    from collections import OrderedDict
    from kprof.gbench import gbench_runs
    from kprof.v1 import kprof_pb2

    def shape(doc):
        if isinstance(doc, dict):
            return [(k, shape(v)) for k, v in doc.items() if k not in ("kprof_environment",)]
        if isinstance(doc, list):
            return [shape(v) for v in doc]
        return type(doc).__name__ if not isinstance(doc, bool) else "bool"

    def load(text):
        return json.loads(text, object_pairs_hook=OrderedDict)

    cli = load(subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                               "float64:40", "--repeat", "5", "--format", "gbench"],
                              check=True, capture_output=True, text=True).stdout)
    mine = load(client.time_evaluate("builtin", "spin_us", args=["float64:40"], repeat=5)
                .as_gbench("spin_us/float64:40"))
    assert shape(mine) == shape(cli)
    assert [r["name"] for r in mine["benchmarks"]] == [r["name"] for r in cli["benchmarks"]]
    assert sorted(mine["context"]["kprof_environment"]) == \
        sorted(cli["context"]["kprof_environment"])
    assert mine["context"]["host_name"] == cli["context"]["host_name"]
    assert mine["context"]["date"][:10] == cli["context"]["date"][:10]

    # Byte for byte on the same answers: the CLI's rendering of each (its code, in a test tool),
    # but for how a double is spelled. Python writes the shortest digits that read back as the
    # same double; nlohmann's Grisu2 now and then one digit more (5046.0843749999995 for
    # 5046.084374999999): each number is compared as the double it reads as.
    import re
    undated = re.compile(r'"date": "[^"]*"')
    fraction = re.compile(r'(?<=[\s\[:,])-?\d+\.\d+(?:[eE][-+]?\d+)?(?=[\s,\]}])')

    def canonical(text):
        return fraction.sub(lambda m: repr(float(m.group(0))), undated.sub("", text))

    assert canonical('"x": 5046.0843749999995,') == canonical('"x": 5046.084374999999,')
    assert canonical('"x": 1.5,') != canonical('"x": 1.25,')
    for job in ({"args": ["float64:25"], "repeat": 7}, {"args": ["float64:5"], "number": 3,
                                                        "repeat": 2, "min_repeat_ms": 1}):
        result = client.time_evaluate("builtin", "spin_us", **job)
        for name in ("spin_us/" + job["args"][0], "k ü/\"quoted\""):
            rendered = subprocess.run([os.environ["KPROF_TEST_RENDER_GBENCH"], name],
                                      input=result.raw.SerializeToString(), check=True,
                                      capture_output=True).stdout.decode()
            assert canonical(result.as_gbench(name)) == canonical(rendered), name

    jobs = [{"id": "k0", "module": "builtin", "function": "spin_us", "args": ["float64:30"],
             "repeat": 4},
            {"id": "gone", "module": "builtin", "function": "no_such_function"}]
    with tempfile.TemporaryDirectory() as scratch:
        lines = os.path.join(scratch, "jobs.jsonl")
        with open(lines, "w") as f:
            f.write("".join(json.dumps(j) + "\n" for j in jobs))
        run = subprocess.run([KPROF, "--target", daemon, "batch", lines, "--format", "gbench"],
                             capture_output=True, text=True)
        assert run.returncode == 3, run.stderr
        cli = load(run.stdout)
        mine = load(kprof.gbench(client.batch(jobs)))
        assert shape(mine) == shape(cli)
        errors = {r["name"]: r["error_message"] for r in cli["benchmarks"] if "error_message" in r}
        assert errors == {r["name"]: r["error_message"] for r in mine["benchmarks"]
                          if "error_message" in r}
        assert errors["gone"].startswith("NOT_FOUND: ")
        assert "k0/spin_us/float64:30" in [r["name"] for r in mine["benchmarks"]]

        # compare.py on two of ours: the slower one is found slower.
        docs = []
        for us in (100, 130):
            path = os.path.join(scratch, f"{us}.json")
            with open(path, "w") as f:
                f.write(client.time_evaluate("builtin", "spin_us", args=[f"float64:{us}"],
                                             repeat=10).as_gbench("spin"))
            docs.append(path)
        dump = os.path.join(scratch, "out.json")
        subprocess.run(["/usr/bin/python3", "/usr/share/benchmark/compare.py", "--no-color", "-d",
                        dump, "benchmarks", *docs], check=True, capture_output=True)
        with open(dump) as f:
            report = json.load(f)
        medians = [e for e in report if e["name"] == "spin_median"]
        assert medians and medians[0]["measurements"][0]["time"] > 0.15, report

    response = kprof_pb2.TimeEvaluateResponse(seconds_per_call=[1e-6, 2e-6, 3e-6],
                                              numbers=[10, 10, 10])
    runs = {r["name"]: r for r in gbench_runs("x", response)}
    assert runs["x_mean"]["real_time"] == pytest.approx(2000)
    assert runs["x_median"]["real_time"] == pytest.approx(2000)
    assert runs["x_stddev"]["real_time"] == pytest.approx(1000)  # of a sample: n - 1
    assert runs["x_cv"]["real_time"] == pytest.approx(0.5)
    assert runs["x_cv"]["aggregate_unit"] == "percentage" and "time_unit" not in runs["x_cv"]
    assert [r["iterations"] for r in gbench_runs("x", response)][:3] == [10, 10, 10]
