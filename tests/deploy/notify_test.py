#!/usr/bin/python3
"""kprofd under a stand-in for systemd: READY=1 once it serves, WATCHDOG=1 at half the
watchdog interval, STOPPING=1 when SIGTERM arrives, then exit 0."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def main():
    kprofd = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(20)
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
        daemon = subprocess.Popen([kprofd, "--listen", "127.0.0.1:0", "--cache-dir",
                                   os.path.join(tmp, "cache")], env=env)
        try:
            messages = []
            deadline = time.time() + 20
            while time.time() < deadline and sum("WATCHDOG=1" in m for m in messages) < 2:
                messages.append(sock.recv(4096).decode())
            assert any(m.startswith("READY=1") for m in messages), messages
            assert "STATUS=serving on 127.0.0.1:" in messages[0], messages
            assert sum("WATCHDOG=1" in m for m in messages) >= 2, messages
            daemon.send_signal(signal.SIGTERM)
            while True:
                message = sock.recv(4096).decode()
                if "STOPPING=1" in message:
                    break
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=20)
        assert code == 0, code
    print("sd_notify: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
