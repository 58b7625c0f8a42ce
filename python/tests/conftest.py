"""What the Python tests share: the binaries under test and a real kprofd on 127.0.0.1:0."""
import os
import subprocess
import tempfile
import time

import pytest

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
        process, target = start_daemon(scratch)
        yield target
        process.terminate()
        assert process.wait(timeout=20) == 0
