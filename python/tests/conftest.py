"""What the Python tests share: the binaries under test, real kprofd daemons on 127.0.0.1:0 (one
for the module, three for a farm), a client of the one, and a deadline for work that could hang."""
import os
import subprocess
import tempfile
import threading
import time

import pytest

import kprof

KPROFD = os.environ["KPROF_TEST_KPROFD"]
KPROF = os.environ["KPROF_TEST_KPROF"]
MODULES = os.environ["KPROF_TEST_MODULE_DIR"]


def start_daemon(scratch, *extra):
    """A kprofd on 127.0.0.1:0 with its files under `scratch`: (process, "127.0.0.1:port")."""
    os.makedirs(scratch, exist_ok=True)
    port_file = os.path.join(scratch, "port")
    process = subprocess.Popen(
        [KPROFD, "--listen", "127.0.0.1:0", "--port-file", port_file, "--cache-dir",
         os.path.join(scratch, "cache"), *extra], stderr=subprocess.DEVNULL)
    for _ in range(1000):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        assert process.poll() is None, "kprofd exited"
        time.sleep(0.01)
    return process, "127.0.0.1:" + open(port_file).read().strip()


@pytest.fixture(scope="module")
def daemon():
    with tempfile.TemporaryDirectory() as scratch:
        process, target = start_daemon(scratch, "--lease-clients", "local")
        yield target
        process.terminate()
        assert process.wait(timeout=20) == 0


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
