"""One daemon of a Farm's batch (kprof.farm): its MeasureBatch stream, the jobs it holds and the
thread reading its updates; and the names the farm prints of what daemons send."""

import queue
import threading

import grpc

from kprof.client import UPDATES_PER_MESSAGE
from kprof.v1 import kprof_pb2

_FINAL = (kprof_pb2.BatchUpdate.DONE, kprof_pb2.BatchUpdate.FAILED)
# The updates the farm acts on: answers, and that a job runs (from then on its answer is due).
_WATCHED = _FINAL + (kprof_pb2.BatchUpdate.RUNNING,)


def _escaped(text):
    """The first 64 characters of `text`, control characters escaped (\\x1b)."""
    return text[:64].encode("unicode_escape").decode("ascii")


def _device_spec(device):
    """"cpu:0" for "cpu", as the daemons name devices ("cuda" is "cuda:0")."""
    kind, _, index = (device or "cpu:0").partition(":")
    try:
        return f"{kind}:{int(index) if index else 0}"
    except ValueError:
        return device  # not a device name: the daemon says so


# How far ahead a daemon is kept busy: as many jobs as it answers in this long, by its pace so
# far in the batch, up to _MAX_WINDOW (client/farm_batch.h has the same).
_AHEAD_SECONDS = 0.05
_MAX_WINDOW = 1024


class _Daemon:
    """One daemon during a batch: its stream, the jobs it holds and the thread reading it."""

    def __init__(self, address, client, devices, job_timeout=0.0, window=32):
        self.address = address
        self.client = client
        self.devices = devices
        self.job_timeout = job_timeout  # seconds its jobs may run (GetInfo); 0: not said
        self.strays = 0        # updates it sent for ids that are no job of the batch
        self.uploaded = set()  # module ids it holds (asked, or uploaded, in this batch)
        self.refused = {}      # module id -> the KprofError of its refused upload
        self.holding = set()   # indices of jobs sent, not yet answered
        # The most jobs it may hold: the farm's window, more where its jobs are short (pace).
        self.base_window = self.window = window
        self.first_sent = None  # when its first job of the batch went out
        self.answers = 0        # its final updates of the batch so far
        self.alive = True
        self.draining = False  # it refused a job as shutting down: no new ones
        self.requests = None
        self.stream = None
        self.reader = None

    def open(self, index, events):
        self.requests = queue.Queue()

        def messages():
            while True:
                message = self.requests.get()
                if message is None:
                    return
                yield message

        self.stream = self.client._stub.MeasureBatch(messages(), metadata=self.client._metadata)

        def read():
            error = None
            try:
                # A message's updates go over together: one hand-off to the batch's thread
                # for as many updates as the daemon sent at once.
                for message in self.stream:
                    more = list(message.more)
                    message.ClearField("more")
                    watched = [u for u in [message] + more if u.state in _WATCHED]
                    if watched:
                        events.put((index, watched, None))
            except grpc.RpcError as failed:
                error = failed.details() or failed.code().name
            except Exception as failed:  # pylint: disable=broad-except
                error = repr(failed)
            finally:  # always an end, or the batch would wait for it forever
                events.put((index, None, error or "its stream ended"))

        self.reader = threading.Thread(target=read, name=f"kprof-farm-{index}", daemon=True)
        self.reader.start()

    def answered(self, count, now):
        """Counts `count` answers come at `now`, and sets the window from the pace of them all:
        short jobs then go out, and their answers come back, many to a message."""
        self.answers += count
        if self.first_sent is not None and self.answers >= 8:
            pace = self.answers / max(now - self.first_sent, 1e-6)
            self.window = min(_MAX_WINDOW, max(self.base_window, int(pace * _AHEAD_SECONDS)))

    def send(self, jobs, modules=()):
        self.requests.put(kprof_pb2.BatchRequest(jobs=jobs, modules=modules,
                                                 updates_per_message=UPDATES_PER_MESSAGE))

    def close(self):
        if self.requests is not None:
            self.requests.put(None)  # half-close: the daemon answers what it holds, then ends
