"""One batch over a Farm's daemons (kprof.farm): its jobs prepared, placed on the daemons with
their devices (the least loaded first, each below its window), modules sent with them or
uploaded ahead, updates taken in, lost daemons' jobs sent elsewhere, results yielded once each.
The methods are the steps of Farm.batch; the C++ farm (client/farm_batch.cc) has the same."""

import itertools
import queue
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import grpc

from kprof.client import _MAX_RESENDS, BatchResult, KprofError, _batch_result, _unknown_module
from kprof.check import batch_check
from kprof.farm_daemon import _FINAL, _Daemon, _device_spec, _escaped
from kprof.requests import batch_job_or_failure
from kprof.v1 import kprof_pb2

# Uploads a farm starts ahead of the jobs that need them, beside the one a job waits for.
_UPLOADS_AHEAD = 2
# Modules up to this size travel on the batch stream with their first job there
# (BatchRequest.modules), without a call of their own.
_INLINE_MODULE_BYTES = 4 << 20
# The bytes of modules one message carries at most, as the C++ farm's.
_INLINE_BYTES_PER_MESSAGE = 8 << 20
# How far ahead of the next job to place the uploads ahead look.
_LOOK_AHEAD = 256
# The upload errors that say the daemon is gone, not that it refuses the module.
_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class FarmBatch:
    """A batch of `farm` (its clients, window and modules), reporting to `progress`."""

    def __init__(self, farm, progress=None):
        self._farm = farm
        self._progress = progress
        self.daemons, self.unreachable = [], []
        self.prepared, self.ready = [], deque()  # jobs to place; results to yield
        self.total = 0
        self.finished, self.counts = set(), {"done": 0, "failed": 0}  # counts: as yielded
        self.index_of, self.device_of = {}, []
        # Uploads started ahead of their jobs' placement, by (daemon index, module): while one
        # module uploads, the next ones do too (on two CPUs three at once stored small modules
        # about 1.5 times as fast as one).
        self.uploads = {}
        self.uploaders = None
        # The jobs placed and not sent yet, and the modules that go with them, by daemon: each
        # daemon's go in one message.
        self.outgoing = {}
        self.events = queue.Queue()
        self.running = {}  # job -> (daemon, when it said the job runs)
        self.pending = deque()
        self.reuploads = {}  # job -> times sent again after its daemon lost its module

    def run(self, jobs, check):
        """Yields a BatchResult per job as each finishes (see Farm.batch)."""
        jobs, check = batch_check(list(jobs), check)
        if check:
            jobs = [job if "reference" in job or "expect" in job else {**check, **job}
                    for job in jobs]
        self.connect()
        self.prepare(jobs)
        self.pending = deque(range(len(self.prepared)))
        self.uploaders = ThreadPoolExecutor(max_workers=_UPLOADS_AHEAD + 1,
                                            thread_name_prefix="kprof-upload")
        try:
            while True:
                self.finished_uploads()
                self.place_pending()
                yield from self.take_ready()
                if len(self.finished) >= len(self.prepared):
                    return
                event = self.next_event()
                if event is not None:
                    self.handle_all(*event)
                while True:  # and the others that have come meanwhile, before placing more
                    try:
                        self.handle_all(*self.events.get_nowait())
                    except queue.Empty:
                        break
                self.lose_the_silent()
        finally:
            self.end()

    # --- before: the daemons, the jobs ----------------------------------------------------

    def connect(self):
        """A _Daemon for each daemon that answers GetInfo; KprofError UNAVAILABLE for none."""
        for address, client in zip(self._farm.addresses, self._farm._clients):
            try:
                info = client.info()
            except KprofError as error:
                self.unreachable.append(f"{address}: {error.message}")
                continue
            self.daemons.append(_Daemon(address, client, {d.device for d in info.devices},
                                        info.limits.job_timeout_seconds, self._farm._window))
        if not self.daemons:
            raise KprofError(grpc.StatusCode.UNAVAILABLE,
                             "no daemon answered: " + "; ".join(self.unreachable))

    def prepare(self, jobs):
        """Each job as a BatchJob, or its failure ready (a job that is no job fails alone)."""
        seen, paths = set(), {}

        def module_id(module):  # a path is read and hashed once per batch
            if isinstance(module, str) and module in paths:
                return paths[module]
            found = self._farm._module_id(module)
            if isinstance(module, str):
                paths[module] = found
            return found

        for job in jobs:
            self.total += 1
            job_id = str(job.get("id", ""))
            if not job_id or len(job_id.encode()) > 256 or job_id in seen:
                self.ready.append(BatchResult(
                    job_id, False, code=grpc.StatusCode.INVALID_ARGUMENT,
                    message=f"job id '{job_id[:300]}' is empty, over 256 bytes, or used twice "
                            "(ids must be unique)"))
                continue
            seen.add(job_id)
            request, failure = batch_job_or_failure(job, module_id)
            if failure is not None:
                self.ready.append(failure)
            else:
                self.prepared.append(request)
        self.index_of = {job.id: j for j, job in enumerate(self.prepared)}
        self.device_of = [_device_spec(job.time_evaluate.device) for job in self.prepared]

    # --- results and lost daemons ---------------------------------------------------------

    def deliver(self, result):
        if result.id not in self.finished:
            self.finished.add(result.id)
            self.ready.append(result)

    def take_ready(self):
        """Yields the results ready, counting them for the progress."""
        while self.ready:
            result = self.ready.popleft()
            self.counts["done" if result.ok else "failed"] += 1
            if self._progress is not None:
                done, failed = self.counts["done"], self.counts["failed"]
                self._progress(kprof_pb2.BatchProgress(queued=self.total - done - failed,
                                                       done=done, failed=failed))
            yield result

    def lose(self, daemon, why):
        """Gives up on `daemon`: its unanswered jobs go back to be placed elsewhere."""
        if not daemon.alive:
            return
        daemon.alive = False
        if daemon.stream is not None:
            daemon.stream.cancel()
        daemon.close()
        for j in daemon.holding:
            self.running.pop(j, None)
            if self.prepared[j].id not in self.finished:
                self.pending.appendleft(j)
        daemon.holding.clear()
        self.unreachable.append(f"{daemon.address}: {why}")

    # --- modules --------------------------------------------------------------------------

    def serving(self, j):
        """The live daemons, not draining, with job j's device."""
        device = self.device_of[j]
        return [d for d in self.daemons if d.alive and not d.draining and device in d.devices]

    def likely_daemon(self, j):
        """The daemon job j would go to were it placed now, room or not (None: none)."""
        candidates = self.serving(j)
        return min(candidates, key=lambda d: len(d.holding)) if candidates else None

    def upload_ahead(self):
        """Starts the uploads the next pending jobs need, up to _UPLOADS_AHEAD at once, looking
        at most _LOOK_AHEAD jobs ahead."""
        modules = self._farm._modules
        for j in itertools.islice(self.pending, _LOOK_AHEAD):
            if len(self.uploads) >= _UPLOADS_AHEAD:
                return
            module = self.prepared[j].time_evaluate.call.module_id
            daemon = self.likely_daemon(j)
            if module not in modules or daemon is None:
                continue
            key = (self.daemons.index(daemon), module)
            if module in daemon.uploaded or module in daemon.refused or key in self.uploads:
                continue
            data, name = modules[module]
            if len(data) <= _INLINE_MODULE_BYTES:
                continue  # it goes with its job
            self.uploads[key] = self.uploaders.submit(daemon.client.load_module, data, name=name)

    def upload(self, daemon, module, data, name):
        """The upload of `module` to `daemon`: the one started ahead, or one now."""
        future = self.uploads.pop((self.daemons.index(daemon), module), None)
        if future is None:
            daemon.client.load_module(data, name=name)
        else:
            future.result()  # its KprofError, if it failed

    def finished_uploads(self):
        """Takes in the uploads ahead that ended: a module a daemon now holds is not sent again,
        one it refused is refused for each of its jobs there."""
        for key, future in list(self.uploads.items()):
            if not future.done():
                continue
            del self.uploads[key]
            daemon, error = self.daemons[key[0]], future.exception()
            if error is None:
                daemon.uploaded.add(key[1])
            elif isinstance(error, KprofError) and error.code not in _LOST:
                daemon.refused[key[1]] = error

    # --- placing --------------------------------------------------------------------------

    def flush(self):
        for daemon, (jobs_out, modules_out) in self.outgoing.items():
            # An entry left empty (its job's upload was refused) sends nothing.
            if daemon.alive and jobs_out:
                daemon.send(jobs_out, modules_out)
        self.outgoing.clear()

    def place(self, j):
        """Places job j on the least loaded live daemon with its device; False when every such
        daemon is full."""
        job = self.prepared[j]
        candidates = self.serving(j)
        if not candidates:
            have = sorted({x for d in self.daemons if d.alive for x in d.devices})
            self.deliver(BatchResult(job.id, False, code=grpc.StatusCode.UNAVAILABLE,
                                     message=f"no live daemon has {self.device_of[j]} (they "
                                             f"have: {', '.join(have)}; lost: "
                                             f"{'; '.join(self.unreachable) or 'none'})"))
            return True
        below_window = [d for d in candidates if len(d.holding) < d.window]
        if not below_window:
            return False
        daemon = min(below_window, key=lambda d: len(d.holding))
        # The job's module, and the reference its check runs.
        for module in (job.time_evaluate.call.module_id,
                       job.time_evaluate.check.reference.module_id):
            if not self.send_module(daemon, j, module):
                return True  # the job went back, or failed
        if daemon.stream is None:
            daemon.open(self.daemons.index(daemon), self.events)
        daemon.holding.add(j)
        if daemon.first_sent is None:
            daemon.first_sent = time.monotonic()
        self.outgoing.setdefault(daemon, ([], []))[0].append(job)
        return True

    def send_module(self, daemon, j, module):
        """Sees that `daemon` holds `module` (one the farm keeps) before job j goes there: with
        the job, on the stream, when small (stored before the job is taken; one the daemon
        refuses fails the job with the reason), else uploaded now. False when the job cannot go
        (its daemon lost: it goes back; the module refused: it fails)."""
        modules = self._farm._modules
        if module not in modules or module in daemon.uploaded:
            return True
        data, name = modules[module]
        if module not in daemon.refused and len(data) <= _INLINE_MODULE_BYTES:
            inline = self.outgoing.setdefault(daemon, ([], []))[1]
            if sum(len(m.bytes) for m in inline) + len(data) > _INLINE_BYTES_PER_MESSAGE:
                self.flush()
                inline = self.outgoing.setdefault(daemon, ([], []))[1]
            header = kprof_pb2.ModuleHeader(name=name, format="auto", size_bytes=len(data),
                                            sha256=module)
            inline.append(kprof_pb2.InlineModule(header=header, bytes=data))
            daemon.uploaded.add(module)
            return True
        refused = daemon.refused.get(module)
        self.flush()  # the jobs placed so far are measured while this module uploads
        self.outgoing.setdefault(daemon, ([], []))
        try:
            if refused is not None:
                raise refused
            self.upload_ahead()
            self.upload(daemon, module, data, name)
        except KprofError as error:
            if error.code in _LOST:
                self.pending.appendleft(j)
                self.lose(daemon, error.message)
            else:  # the module itself is refused: so are its other jobs here
                daemon.refused[module] = error
                self.deliver(BatchResult(self.prepared[j].id, False, code=error.code,
                                         message=error.message))
            return False
        daemon.uploaded.add(module)
        return True

    def place_pending(self):
        """Places what fits, in order. Once every device of the live daemons is full the rest
        wait, unread: a batch of many thousand jobs costs each update the jobs it lets go out,
        not a pass over all those still waiting."""
        live = [d for d in self.daemons if d.alive and not d.draining]
        devices = {x for d in live for x in d.devices}
        full, unplaced = set(), deque()

        def room_left():  # some device left to try, on a daemon below its window
            return not devices or (len(full) < len(devices) and
                                   any(len(d.holding) < d.window for d in live))
        while self.pending and room_left():
            j = self.pending.popleft()
            if self.prepared[j].id in self.finished:
                continue
            if self.device_of[j] in full:
                unplaced.append(j)
            elif not self.place(j):
                full.add(self.device_of[j])  # every daemon with it is full
                unplaced.append(j)
        self.pending.extendleft(reversed(unplaced))  # first again, before those not looked at
        self.flush()

    # --- updates --------------------------------------------------------------------------

    def handle(self, index, update, error):
        """Takes in one update (None: daemon `index`'s stream ended, for `error`)."""
        daemon = self.daemons[index]
        if update is None:
            self.lose(daemon, error)
            return
        j = self.index_of.get(update.id)
        if j is None:  # no job of this batch: never answered with, said once a daemon
            if daemon.strays == 0:
                print(f"kprof: {daemon.address} sent an update for '{_escaped(update.id)}', "
                      "which is no job of this batch: ignored (and any more like it)",
                      file=sys.stderr)
            daemon.strays += 1
            return
        held = j in daemon.holding
        if update.state == kprof_pb2.BatchUpdate.RUNNING:
            if held:
                self.running[j] = (daemon, time.monotonic())
            return
        daemon.holding.discard(j)
        self.running.pop(j, None)
        if update.state == kprof_pb2.BatchUpdate.FAILED and not self.failure_is_final(
                daemon, j, update, held):
            return
        result = _batch_result(update, self.prepared[j])
        if len(self.daemons) > 1:
            result.daemon = daemon.address  # of several, the one that answered
        self.deliver(result)

    def failure_is_final(self, daemon, j, update, held):
        """Whether job j's failure on `daemon` is its answer; not when the daemon was given up
        on (the job went elsewhere), shuts down (another runs it, and this one gets no more), or
        evicted the job's module since it was uploaded there (it is uploaded again and the job
        sent again)."""
        if not held:
            return False
        if update.code == grpc.StatusCode.UNAVAILABLE.value[0]:
            daemon.draining = True
            self.pending.append(j)
            return False
        module = _unknown_module(update)
        if module in self._farm._modules and self.reuploads.get(j, 0) < _MAX_RESENDS:
            self.reuploads[j] = self.reuploads.get(j, 0) + 1
            daemon.uploaded.discard(module)
            self.pending.append(j)
            return False
        return True

    def handle_all(self, index, updates, error):
        """Takes in the updates of one message of daemon `index` (None: its stream ended, for
        `error`)."""
        if updates is None:
            self.handle(index, None, error)
            return
        for update in updates:
            self.handle(index, update, None)
        self.daemons[index].answered(sum(u.state in _FINAL for u in updates), time.monotonic())

    def deadline(self, j):
        """When job j, which its daemon said runs, must have its answer: the daemon's limit for a
        job six times over (a strict job's references run after it) and 2 s."""
        daemon, since = self.running[j]
        return since + 6 * daemon.job_timeout + 2 if daemon.job_timeout > 0 else None

    def lose_the_silent(self):
        """Loses each daemon with a running job past its deadline: its jobs go elsewhere."""
        now = time.monotonic()
        for j in list(self.running):
            if j not in self.running or self.deadline(j) is None or self.deadline(j) > now:
                continue
            daemon, since = self.running[j]
            self.lose(daemon, f"it said job '{_escaped(self.prepared[j].id)}' was running "
                              f"{now - since:.1f} s ago and has not answered since (its jobs "
                              f"may run {daemon.job_timeout:.1f} s)")

    def next_event(self):
        """The next event, or None once a running job's deadline passes first."""
        due = [d for d in map(self.deadline, self.running) if d is not None]
        try:
            return self.events.get(
                timeout=max(0.0, min(due) - time.monotonic()) if due else None)
        except queue.Empty:
            return None

    def end(self):
        """Uploads not begun are not wanted; one under way ends on its own, without the batch
        waiting for it. A stream abandoned early is cancelled: nothing more is wanted."""
        if self.uploaders is not None:
            self.uploaders.shutdown(wait=False, cancel_futures=True)
        for daemon in self.daemons:
            if daemon.stream is not None and (not daemon.alive or
                                              len(self.finished) < len(self.prepared)):
                daemon.stream.cancel()
            daemon.close()
        for daemon in self.daemons:
            if daemon.reader is not None:
                daemon.reader.join(timeout=10)
