"""Many kprofd daemons as one, for an autotuner's batches (the C++ client's kprof::client::Farm).

    farm = kprof.farm("gpu1:9177,gpu2:9177")           # or "dns:///kprofd.lab:9177"
    for r in farm.batch(jobs):                          # each job answered once
        print(r.id, r.result.median if r.ok else r.message)

Each job goes only to a daemon that has its device, at most `window` at a time per daemon, on
one MeasureBatch stream per daemon. A module given as a path or bytes is uploaded to a daemon
the first time one of its jobs goes there. A daemon lost mid-batch (its stream fails, or it
shuts down) has its unfinished jobs sent to the others; no job is lost or answered twice.
"""

import contextlib
import itertools
import queue
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import grpc

from kprof.client import (_MAX_RESENDS, _MODULE_ID, BatchResult, Client, KprofError,
                          _batch_result, _module_bytes, _unknown_module,
                          default_target, default_token)
from kprof.check import batch_check
from kprof.farm_daemon import _FINAL, _Daemon, _device_spec, _escaped
from kprof.requests import batch_job_or_failure
from kprof.targets import resolve_target
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
class Farm:
    """The daemons `target` names (see resolve_target), each with a Client made with `token`
    and the other keyword arguments of Client."""

    def __init__(self, target, token=None, window=32, **kwargs):
        self.addresses = resolve_target(target)
        self._clients = [Client(a, token=token, **kwargs) for a in self.addresses]
        self._window = max(1, int(window))
        self._modules = {}  # id -> (bytes, name): uploaded to a daemon when a job needs them

    def close(self):
        for client in self._clients:
            client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        """Each daemon's GetInfo, by address; a KprofError in place of one that did not
        answer."""
        answers = {}
        for address, client in zip(self.addresses, self._clients):
            try:
                answers[address] = client.info()
            except KprofError as error:
                answers[address] = error
        return answers

    def load_module(self, module, name=None):
        """Keeps a module (a path, or its bytes) to upload where its jobs go; returns its id."""
        data, name, module_id = _module_bytes(module, name)
        self._modules[module_id] = (data, name)
        return module_id

    def _module_id(self, module):
        if isinstance(module, str) and (module == "builtin" or _MODULE_ID.match(module)):
            return module
        return self.load_module(module)

    def time_evaluate(self, module, function, args=(), device="cpu:0", **options):
        """One TimeEvaluate on whichever daemon has `device`; a BenchmarkResult, or KprofError.
        Options are TimeEvaluateRequest's fields by name; each daemon's --job-timeout bounds
        the job."""
        job = dict(options, id="time_evaluate", module=module, function=function, args=args,
                   device=device)
        with contextlib.closing(self.batch([job])) as results:
            for result in results:
                if not result.ok:
                    raise KprofError(result.code, result.message)
                return result.result
        raise KprofError(grpc.StatusCode.INTERNAL, "the batch gave no answer")

    def rank(self, jobs, confidence=0.95, threshold=1.0, initial=10, max_repeats=300,
             budget=None):
        """Races the jobs (candidates) as `kprof batch --rank` does: the Ranking names the
        fastest and the candidates within `threshold` percent of it, measuring more repeats
        only of those in doubt, each round a batch (see kprof.ranking)."""
        from kprof.ranking import race
        return race(self.batch, jobs, confidence, threshold, initial, max_repeats, budget)

    def interleave(self, jobs, seed):
        """Client.interleave, on a farm of one daemon: a candidate's repeats on several
        machines would measure the machines. ValueError for more."""
        if len(self.addresses) != 1:
            raise ValueError(f"interleaving compares candidates on one machine, and the farm "
                             f"has {len(self.addresses)} daemons: give one")
        from kprof.interleave import interleave
        return interleave(self.batch, jobs, seed)

    def batch(self, jobs, progress=None, **check):
        """Runs TimeEvaluate jobs (dicts, as for Client.batch) over the daemons and yields a
        BatchResult per job as each finishes. `progress`, when given, is called after each
        with a BatchProgress of the whole farm (queued, done, failed); reference=, expect=,
        rtol=, atol=, outputs= check the jobs that name no check of their own, checks= and
        bitwise= the rest too. KprofError UNAVAILABLE when no daemon answers GetInfo."""
        jobs, check = batch_check(list(jobs), check)
        if check:
            jobs = [job if "reference" in job or "expect" in job else {**check, **job}
                    for job in jobs]
        daemons, unreachable = [], []
        for address, client in zip(self.addresses, self._clients):
            try:
                info = client.info()
            except KprofError as error:
                unreachable.append(f"{address}: {error.message}")
                continue
            daemons.append(_Daemon(address, client, {d.device for d in info.devices},
                                   info.limits.job_timeout_seconds, self._window))
        if not daemons:
            raise KprofError(grpc.StatusCode.UNAVAILABLE,
                             "no daemon answered: " + "; ".join(unreachable))

        prepared, ready, seen, paths = [], deque(), set(), {}

        def module_id(module):  # a path is read and hashed once per batch
            if isinstance(module, str) and module in paths:
                return paths[module]
            found = self._module_id(module)
            if isinstance(module, str):
                paths[module] = found
            return found

        total = 0
        for job in jobs:
            total += 1
            job_id = str(job.get("id", ""))
            if not job_id or len(job_id.encode()) > 256 or job_id in seen:
                ready.append(BatchResult(job_id, False, code=grpc.StatusCode.INVALID_ARGUMENT,
                                         message=f"job id '{job_id[:300]}' is empty, over 256 "
                                                 "bytes, or used twice (ids must be unique)"))
                continue
            seen.add(job_id)
            request, failure = batch_job_or_failure(job, module_id)
            if failure is not None:
                ready.append(failure)  # a job that is no job fails alone; the others run
            else:
                prepared.append(request)
        finished, counts = set(), {"done": 0, "failed": 0}  # counts: as yielded
        index_of = {job.id: j for j, job in enumerate(prepared)}
        device_of = [_device_spec(job.time_evaluate.device) for job in prepared]

        def deliver(result):
            if result.id not in finished:
                finished.add(result.id)
                ready.append(result)

        def lose(daemon, why):
            if not daemon.alive:
                return
            daemon.alive = False
            if daemon.stream is not None:
                daemon.stream.cancel()
            daemon.close()
            for j in daemon.holding:
                running.pop(j, None)
                if prepared[j].id not in finished:
                    pending.appendleft(j)
            daemon.holding.clear()
            unreachable.append(f"{daemon.address}: {why}")

        # Uploads started ahead of their jobs' placement, by (daemon index, module): while one
        # module uploads, the next ones do too (on two CPUs three at once stored small modules
        # about 1.5 times as fast as one).
        uploads = {}
        uploaders = ThreadPoolExecutor(max_workers=_UPLOADS_AHEAD + 1,
                                       thread_name_prefix="kprof-upload")

        def able(j):
            """The live daemons, not draining, with job j's device."""
            device = device_of[j]
            return [d for d in daemons if d.alive and not d.draining and device in d.devices]

        def likely_daemon(j):
            """The daemon job j would go to were it placed now, room or not (None: none)."""
            candidates = able(j)
            return min(candidates, key=lambda d: len(d.holding)) if candidates else None

        def upload_ahead():
            """Starts the uploads the next pending jobs need, up to _UPLOADS_AHEAD at once,
            looking at most _LOOK_AHEAD jobs ahead."""
            for j in itertools.islice(pending, _LOOK_AHEAD):
                if len(uploads) >= _UPLOADS_AHEAD:
                    return
                module = prepared[j].time_evaluate.call.module_id
                daemon = likely_daemon(j)
                if module not in self._modules or daemon is None:
                    continue
                key = (daemons.index(daemon), module)
                if module in daemon.uploaded or module in daemon.refused or key in uploads:
                    continue
                data, name = self._modules[module]
                if len(data) <= _INLINE_MODULE_BYTES:
                    continue  # it goes with its job
                uploads[key] = uploaders.submit(daemon.client.load_module, data, name=name)

        def upload(daemon, module, data, name):
            """The upload of `module` to `daemon`: the one started ahead, or one now."""
            future = uploads.pop((daemons.index(daemon), module), None)
            if future is None:
                daemon.client.load_module(data, name=name)
            else:
                future.result()  # its KprofError, if it failed

        def finished_uploads():
            """Takes in the uploads ahead that ended: a module a daemon now holds is not sent
            again, one it refused is refused for each of its jobs there."""
            for key, future in list(uploads.items()):
                if not future.done():
                    continue
                del uploads[key]
                daemon, error = daemons[key[0]], future.exception()
                if error is None:
                    daemon.uploaded.add(key[1])
                elif isinstance(error, KprofError) and error.code not in (
                        grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    daemon.refused[key[1]] = error

        # The jobs placed and not sent yet, and the modules that go with them, by daemon:
        # each daemon's go in one message.
        outgoing = {}

        def flush():
            for daemon, (jobs_out, modules_out) in outgoing.items():
                # An entry left empty (its job's upload was refused) sends nothing.
                if daemon.alive and jobs_out:
                    daemon.send(jobs_out, modules_out)
            outgoing.clear()

        def place(j):
            """Places job j on the least loaded live daemon with its device; False when every
            such daemon is full."""
            job = prepared[j]
            device = device_of[j]
            candidates = able(j)
            if not candidates:
                have = sorted({x for d in daemons if d.alive for x in d.devices})
                deliver(BatchResult(job.id, False, code=grpc.StatusCode.UNAVAILABLE,
                                    message=f"no live daemon has {device} (they have: "
                                            f"{', '.join(have)}; lost: "
                                            f"{'; '.join(unreachable) or 'none'})"))
                return True
            room = [d for d in candidates if len(d.holding) < d.window]
            if not room:
                return False
            daemon = min(room, key=lambda d: len(d.holding))
            jobs_out, inline = outgoing.setdefault(daemon, ([], []))
            # The job's module, and the reference its check runs.
            for module in (job.time_evaluate.call.module_id,
                           job.time_evaluate.check.reference.module_id):
                if (module in self._modules and module not in daemon.uploaded
                        and module not in daemon.refused
                        and len(self._modules[module][0]) <= _INLINE_MODULE_BYTES):
                    # With the job, on the stream: stored before the job is taken; one the daemon
                    # refuses fails the job with the reason.
                    data, name = self._modules[module]
                    if sum(len(m.bytes) for m in inline) + len(data) > _INLINE_BYTES_PER_MESSAGE:
                        flush()
                        jobs_out, inline = outgoing.setdefault(daemon, ([], []))
                    header = kprof_pb2.ModuleHeader(name=name, format="auto",
                                                    size_bytes=len(data), sha256=module)
                    inline.append(kprof_pb2.InlineModule(header=header, bytes=data))
                    daemon.uploaded.add(module)
                elif module in self._modules and module not in daemon.uploaded:
                    data, name = self._modules[module]
                    refused = daemon.refused.get(module)
                    flush()  # the jobs placed so far are measured while this module uploads
                    jobs_out, inline = outgoing.setdefault(daemon, ([], []))
                    try:
                        if refused is not None:
                            raise refused
                        upload_ahead()
                        upload(daemon, module, data, name)
                    except KprofError as error:
                        if error.code in (grpc.StatusCode.UNAVAILABLE,
                                          grpc.StatusCode.DEADLINE_EXCEEDED):
                            pending.appendleft(j)
                            lose(daemon, error.message)
                        else:  # the module itself is refused: so are its other jobs here
                            daemon.refused[module] = error
                            deliver(BatchResult(job.id, False, code=error.code,
                                                message=error.message))
                        return True
                    daemon.uploaded.add(module)
            if daemon.stream is None:
                daemon.open(daemons.index(daemon), events)
            daemon.holding.add(j)
            if daemon.first_sent is None:
                daemon.first_sent = time.monotonic()
            jobs_out.append(job)
            return True

        def place_pending():
            """Places what fits, in order. Once every device of the live daemons is full the
            rest wait, unread: a batch of many thousand jobs costs each update the jobs it lets
            go out, not a pass over all those still waiting."""
            live = [d for d in daemons if d.alive and not d.draining]
            devices = {x for d in live for x in d.devices}
            full, unplaced = set(), deque()

            def room():  # some device left to try, on a daemon below its window
                return not devices or (len(full) < len(devices) and
                                       any(len(d.holding) < d.window for d in live))
            while pending and room():
                j = pending.popleft()
                if prepared[j].id in finished:
                    continue
                if device_of[j] in full:
                    unplaced.append(j)
                elif not place(j):
                    full.add(device_of[j])  # every daemon with it is full
                    unplaced.append(j)
            pending.extendleft(reversed(unplaced))  # first again, before those not looked at
            flush()

        def handle(index, update, error):
            """Takes in one update (None: daemon `index`'s stream ended, for `error`)."""
            daemon = daemons[index]
            if update is None:
                lose(daemon, error)
                return
            j = index_of.get(update.id)
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
                    running[j] = (daemon, time.monotonic())
                return
            daemon.holding.discard(j)
            running.pop(j, None)
            if update.state == kprof_pb2.BatchUpdate.FAILED:
                if not held:
                    return  # from a daemon already given up on: the job went elsewhere
                # A daemon shutting down refuses what it has not started: another one runs
                # it, and this one gets no more.
                if update.code == grpc.StatusCode.UNAVAILABLE.value[0]:
                    daemon.draining = True
                    pending.append(j)
                    return
                # A module the daemon evicted since it was uploaded there: upload it again
                # and send the job again (the daemon takes its id again then).
                module = _unknown_module(update)
                if module in self._modules and reuploads.get(j, 0) < _MAX_RESENDS:
                    reuploads[j] = reuploads.get(j, 0) + 1
                    daemon.uploaded.discard(module)
                    pending.append(j)
                    return
            result = _batch_result(update, prepared[j] if j is not None else None)
            if len(daemons) > 1:
                result.daemon = daemon.address  # of several, the one that answered
            deliver(result)

        def handle_all(index, updates, error):
            """Takes in the updates of one message of daemon `index` (None: its stream ended,
            for `error`)."""
            if updates is None:
                handle(index, None, error)
                return
            for update in updates:
                handle(index, update, None)
            daemons[index].answered(sum(u.state in _FINAL for u in updates), time.monotonic())

        def deadline(j):
            """When job j, which its daemon said runs, must have its answer: the daemon's limit
            for a job six times over (a strict job's references run after it) and 2 s."""
            daemon, since = running[j]
            return since + 6 * daemon.job_timeout + 2 if daemon.job_timeout > 0 else None

        def lose_the_silent():
            """Loses each daemon with a running job past its deadline: its jobs go elsewhere."""
            now = time.monotonic()
            for j in list(running):
                if j not in running or deadline(j) is None or deadline(j) > now:
                    continue
                daemon, since = running[j]
                lose(daemon, f"it said job '{_escaped(prepared[j].id)}' was running "
                             f"{now - since:.1f} s ago and has not answered since (its jobs may "
                             f"run {daemon.job_timeout:.1f} s)")

        def next_event():
            """The next event, or None once a running job's deadline passes first."""
            due = [d for d in map(deadline, running) if d is not None]
            try:
                return events.get(timeout=max(0.0, min(due) - time.monotonic()) if due else None)
            except queue.Empty:
                return None

        events = queue.Queue()
        running = {}  # job -> (daemon, when it said the job runs)
        pending = deque(range(len(prepared)))
        reuploads = {}  # job -> times sent again after its daemon lost its module
        try:
            while True:
                finished_uploads()
                place_pending()
                while ready:
                    result = ready.popleft()
                    counts["done" if result.ok else "failed"] += 1
                    if progress is not None:
                        progress(kprof_pb2.BatchProgress(
                            queued=total - counts["done"] - counts["failed"],
                            done=counts["done"], failed=counts["failed"]))
                    yield result
                if len(finished) >= len(prepared):
                    return
                event = next_event()
                if event is not None:
                    handle_all(*event)
                while True:  # and the others that have come meanwhile, before placing more
                    try:
                        handle_all(*events.get_nowait())
                    except queue.Empty:
                        break
                lose_the_silent()
        finally:
            # Uploads not begun are not wanted; one under way ends on its own, without this
            # generator waiting for it.
            uploaders.shutdown(wait=False, cancel_futures=True)
            for daemon in daemons:
                if daemon.stream is not None and (not daemon.alive or len(finished) <
                                                  len(prepared)):
                    daemon.stream.cancel()  # abandoned early: nothing more is wanted
                daemon.close()
            for daemon in daemons:
                if daemon.reader is not None:
                    daemon.reader.join(timeout=10)


def farm(target=None, token=None, token_file=None, **kwargs):
    """A Farm of the daemons `target` names (default $KPROF_TARGET, else 127.0.0.1:9177), with
    the token given, read from `token_file`, or from $KPROF_TOKEN or $KPROF_TOKEN_FILE."""
    return Farm(default_target(target), token=default_token(token, token_file), **kwargs)
