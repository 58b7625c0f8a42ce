"""One scenario suite run against both clients: the kprof CLI (the C++ client library under it)
and the Python client. For each scenario a user sees the same thing from either: the same status
code and the same message, the same environment variables honoured, the same upload policy."""
import os
import subprocess
import tempfile

import pytest

import kprof
from conftest import KPROF, MODULES, start_daemon

MISSING_ID = "e" * 64

# (name, CLI arguments after the target, the Python client's call, the code both give)
SCENARIOS = [
    ("unknown function", ["time", "builtin", "no_such_function"],
     lambda c: c.time_evaluate("builtin", "no_such_function"), "NOT_FOUND"),
    ("bad argument spec", ["time", "builtin", "spin_us", "--arg", "float33:1"],
     lambda c: c.time_evaluate("builtin", "spin_us", args=["float33:1"]), "INVALID_ARGUMENT"),
    ("repeat out of range", ["time", "builtin", "spin_us", "--arg", "float64:1", "--repeat", "0"],
     lambda c: c.time_evaluate("builtin", "spin_us", args=["float64:1"], repeat=0),
     "INVALID_ARGUMENT"),
    ("unknown outlier filter",
     ["time", "builtin", "spin_us", "--arg", "float64:1", "--outliers", "tukey"],
     lambda c: c.time_evaluate("builtin", "spin_us", args=["float64:1"], outlier_filter="tukey"),
     "INVALID_ARGUMENT"),
    ("a module the daemon does not hold", ["time", MISSING_ID, "f"],
     lambda c: c.time_evaluate(MISSING_ID, "f"), "NOT_FOUND"),
    ("a device this host lacks", ["time", "builtin", "nop", "--device", "cuda:7"],
     lambda c: c.time_evaluate("builtin", "nop", device="cuda:7"), "FAILED_PRECONDITION"),
    ("a malformed device", ["time", "builtin", "nop", "--device", "gpu:0"],
     lambda c: c.time_evaluate("builtin", "nop", device="gpu:0"), "INVALID_ARGUMENT"),
    ("a module file that is not there", ["time", "/nonexistent/k.so", "f"],
     lambda c: c.time_evaluate("/nonexistent/k.so", "f"), "NOT_FOUND"),
    ("a module file that is a directory", ["time", MODULES, "f"],
     lambda c: c.time_evaluate(MODULES, "f"), "INVALID_ARGUMENT"),
    ("a file that is no module", ["load", os.path.abspath(__file__)],
     lambda c: c.load_module(os.path.abspath(__file__)), "INVALID_ARGUMENT"),
    ("a function whose arguments do not fit", ["time", "builtin", "spin_us"],
     lambda c: c.time_evaluate("builtin", "spin_us"), "INVALID_ARGUMENT"),
]


def cli(target, *args, env=None):
    return subprocess.run([KPROF, "--target", target, *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("name,args,call,code", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_both_clients_give_the_same_error(daemon, name, args, call, code):
    ran = cli(daemon, *args)
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout == ""
    with kprof.connect(daemon) as client:
        with pytest.raises(kprof.KprofError) as error:
            call(client)
    assert ran.stderr == f"kprof: {code}: {error.value.message}\n"
    assert error.value.code.name == code


def test_both_clients_take_the_token_from_the_same_variables(monkeypatch):
    with tempfile.TemporaryDirectory() as scratch:
        tokens = os.path.join(scratch, "tokens")
        with open(tokens, "w") as out:
            out.write("# the lab's tokens\nsecret-one alice\n")
        process, target = start_daemon(scratch, "--token-file", tokens)
        try:
            for variables, works in [({}, False),
                                     ({"KPROF_TOKEN": "secret-one"}, True),
                                     ({"KPROF_TOKEN": "wrong"}, False),
                                     ({"KPROF_TOKEN_FILE": tokens}, True),
                                     # $KPROF_TOKEN comes first, in both
                                     ({"KPROF_TOKEN": "wrong", "KPROF_TOKEN_FILE": tokens}, False)]:
                env = {k: v for k, v in os.environ.items()
                       if k not in ("KPROF_TOKEN", "KPROF_TOKEN_FILE")}
                env.update(variables)
                ran = cli(target, "info", "--format", "json", env=env)
                for key in ("KPROF_TOKEN", "KPROF_TOKEN_FILE"):
                    monkeypatch.delenv(key, raising=False)
                for key, value in variables.items():
                    monkeypatch.setenv(key, value)
                with kprof.connect(target) as client:
                    try:
                        client.info()
                        python_error = None
                    except kprof.KprofError as error:
                        python_error = error
                assert (ran.returncode == 0) == works, (variables, ran.stderr)
                assert (python_error is None) == works, variables
                if not works:
                    assert ran.stderr == \
                        f"kprof: UNAUTHENTICATED: {python_error.message}\n", variables
        finally:
            process.terminate()
            process.wait(timeout=20)


@pytest.mark.parametrize("path", ["/nonexistent/tokens", "/tmp"])
def test_a_token_file_that_cannot_be_read_is_refused_alike(daemon, path):
    ran = cli(daemon, "--token-file", path, "info")
    with pytest.raises(kprof.KprofError) as error:
        kprof.connect(daemon, token_file=path)
    assert ran.stderr == f"kprof: {error.value.code.name}: {error.value.message}\n"


def test_both_clients_upload_small_modules_without_asking(daemon):
    """The C++ client's policy (ClientOptions::upload_without_asking_bytes): a module of up to
    256 KiB is sent without a HasModule first; a larger one is asked about."""
    with kprof.connect(daemon) as client:
        asked = []
        has_module = client._stub.HasModule

        def counting(request, **kwargs):
            asked.append(request.id)
            return has_module(request, **kwargs)
        client._stub.HasModule = counting
        small = client.load_module(os.path.join(MODULES, "vector_add.so"))
        assert asked == []
        large = bytes(open(os.path.join(MODULES, "vector_add.so"), "rb").read()) + \
            b"\0" * (300 << 10)
        try:
            client.load_module(large, name="padded.so")
        except kprof.KprofError:
            pass  # stored or refused, it was asked about first
        assert len(asked) == 1
        assert small in [m.id for m in client.info().modules]


def test_the_python_client_keeps_the_newest_modules_as_the_cpp_one_does(daemon):
    with kprof.connect(daemon, max_remembered_bytes=1) as client:
        first = client.load_module(os.path.join(MODULES, "vector_add.so"))
        second = client.load_module(os.path.join(MODULES, "many_exports.so"))
        assert list(client._modules) == [second]  # the newest is always kept
        assert first != second
