"""Device leases from Python: a device held alone for a while (kprofd's Lease RPC), as
`kprof lease` holds one for a command.

    with client.lease("cuda:0", seconds=600, lock_clocks=True) as lease:
        print(lease.holder, lease.ends, lease.clocks_locked, lease.clocks)
        client.time_evaluate(...)        # runs under the lease: no other client's job between
    print(lease.end_reason, lease.clocks_restored)

While it is held, the client's calls carry its id; the daemon runs them under it and refuses
them once it has ended, so a measurement never runs unleased unseen."""
import datetime
import queue
import threading

import grpc

from kprof.results import KprofError
from kprof.v1 import kprof_pb2

_ENDED = kprof_pb2.LeaseUpdate.ENDED
_GRANTED = kprof_pb2.LeaseUpdate.GRANTED


class Lease:
    """A lease held: its id, device, holder, end, and what it did to the clocks (`clocks`: a list
    of (name, before, during), during "" where it changed nothing). Released by release() or on
    leaving a `with` block; then `end_reason` and `clocks_restored` say how it ended."""

    def __init__(self, client, stream, requests, info):
        self._client = client
        self._stream = stream
        self._requests = requests
        self.id = info.lease_id
        self.device = info.device
        self.holder = info.holder
        self.ends = datetime.datetime.fromtimestamp(info.ends_unix_ms / 1000,
                                                    tz=datetime.timezone.utc)
        self.clocks_locked = info.clocks_locked
        self.clocks_note = info.clocks_note
        self.clocks = [(c.name, c.before, c.during) for c in info.clocks]
        self.end_reason = None
        self.clocks_restored = None
        self._lock = threading.Lock()

    def release(self, timeout=30.0):
        """Ends the lease (if it has not ended) and waits, up to `timeout` seconds, for the daemon
        to say so; the clocks it changed are back then. A daemon that does not answer by then
        has the call cancelled, which ends the lease as a holder's disconnection does."""
        with self._lock:
            if self.end_reason is not None:
                return
            self._requests.put(kprof_pb2.LeaseRequest(release=True))
            self._requests.put(None)
            watchdog = threading.Timer(timeout, self._stream.cancel)
            watchdog.start()
            try:
                for update in self._stream:
                    if update.state == _ENDED:
                        self.end_reason = update.end_reason
                        self.clocks_restored = update.clocks_restored
            except grpc.RpcError as error:
                self.end_reason = f"the lease stream failed: {error.details()}"
            finally:
                watchdog.cancel()
                self._client._lease_ended(self.id)
            if self.end_reason is None:
                self.end_reason = "the lease stream ended"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"Lease({self.id}, {self.device}, holder={self.holder}, ends={self.ends})"


def hold(client, device, seconds, lock_clocks=False, clock_mhz=0):
    """Asks for `device` for `seconds` and waits until the daemon grants it (behind another
    lease, if one holds the device); a Lease. KprofError when it is refused (who may lease,
    --max-lease, a clock frequency the device does not take)."""
    requests = queue.Queue()

    def messages():
        while True:
            item = requests.get()
            if item is None:
                return
            yield item

    requests.put(kprof_pb2.LeaseRequest(device=device, seconds=seconds, lock_clocks=lock_clocks,
                                        clock_mhz=clock_mhz))
    stream = client._stub.Lease(messages(), metadata=client._plain_metadata)
    granted = False
    try:
        for update in stream:
            if update.state == _GRANTED:
                lease = Lease(client, stream, requests, update.lease)
                client._lease_granted(lease.id)
                granted = True
                return lease
            if update.state == _ENDED:
                raise KprofError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"the lease was not granted: {update.end_reason}")
        raise KprofError(grpc.StatusCode.UNAVAILABLE, "the lease stream ended before a grant")
    except grpc.RpcError as error:
        raise KprofError(error.code(), error.details()) from None
    finally:
        if not granted:  # refused, failed, or interrupted (Ctrl-C while waiting): nothing held
            stream.cancel()
            requests.put(None)
