"""A connection to one kprofd, over its gRPC service (kprof/v1/kprof.proto)."""

import collections
import hashlib
import os
import queue
import re
import threading

import grpc

from kprof.check import answer_check, batch_check, verdict_of
from kprof.interleave import interleave as _interleave
from kprof.lease import hold as _hold
from kprof.ranking import race as _race
from kprof.requests import (_time_request, batch_job_or_failure, profile_function_request,
                            profile_request)
from kprof.results import BatchResult, BenchmarkResult, KprofError, _call, _error
from kprof.targets import check_target
from kprof.report import Report
from kprof.v1 import kprof_pb2, kprof_pb2_grpc

_MODULE_ID = re.compile(r"^[0-9a-f]{64}$")

# The C++ client's defaults (ClientOptions): modules up to this size are uploaded without asking
# whether the daemon holds them; the bytes of at most this much are kept for uploading again.
UPLOAD_WITHOUT_ASKING_BYTES = 256 << 10
MAX_REMEMBERED_BYTES = 256 << 20
_CHUNK = 1 << 20


def _module_bytes(module, name=None):
    """A module's bytes, name and id (the SHA-256 of its bytes), from a path or the bytes."""
    if isinstance(module, (bytes, bytearray)):
        data, name = bytes(module), name or "module"
    else:
        # Refused as the C++ client refuses it, in the same words.
        if os.path.isdir(module):
            raise KprofError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"cannot read module file '{module}': it is a directory, not a file")
        try:
            with open(module, "rb") as f:
                data = f.read()
        except OSError as error:
            raise KprofError(grpc.StatusCode.NOT_FOUND,
                             f"cannot read module file '{module}': {error.strerror}") from None
        name = name or os.path.basename(module)
    return data, name, hashlib.sha256(data).hexdigest()


def _batch_result(update, job=None):
    """The BatchResult of a DONE or FAILED update (of `job`, a BatchJob, when known)."""
    call = job.time_evaluate.call if job is not None else None
    named = {"function": call.function, "args": call.args} if call is not None else {}
    if update.state == kprof_pb2.BatchUpdate.DONE:
        return BatchResult(update.id, True, BenchmarkResult(update.time_evaluate), **named)
    return BatchResult(update.id, False, code=_CODES.get(update.code, grpc.StatusCode.UNKNOWN),
                       message=update.message, verdict=verdict_of(update.details), **named)


class Client:
    """A client of the kprofd at `target` ("host:port"). TLS when `tls_ca` (PEM bytes or a
    path) is given; a bearer token on every call when `token` is; `keepalive` seconds between
    pings of an open call that carries nothing (0: none), which find a frozen daemon."""

    def __init__(self, target, token=None, tls_ca=None, tls_cert=None, tls_key=None,
                 timeout=60.0, upload_without_asking_bytes=UPLOAD_WITHOUT_ASKING_BYTES,
                 max_remembered_bytes=MAX_REMEMBERED_BYTES, keepalive=20.0):
        def pem(value):
            if value is None or isinstance(value, bytes):
                return value
            with open(value, "rb") as f:
                return f.read()
        check_target(target)
        options = [("grpc.max_receive_message_length", 64 << 20),
                   ("grpc.max_send_message_length", 16 << 20)]
        if keepalive:
            # While a call is open, a ping after `keepalive` seconds without traffic, and the
            # channel given up when its answer takes as long again: a frozen daemon fails the
            # calls it holds as UNAVAILABLE instead of leaving them waiting.
            options += [("grpc.keepalive_time_ms", int(keepalive * 1000)),
                        ("grpc.keepalive_timeout_ms", int(keepalive * 1000)),
                        ("grpc.http2.max_pings_without_data", 0)]
        if tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(pem(tls_ca), pem(tls_key), pem(tls_cert))
            self._channel = grpc.secure_channel(target, credentials, options)
        else:
            self._channel = grpc.insecure_channel(target, options)
        self._stub = kprof_pb2_grpc.ProfilerStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        # Calls made under a lease (kprof lease sets $KPROF_LEASE and $KPROF_LEASE_TARGET for the
        # command it runs) carry its id to that daemon: it refuses them once the lease has ended.
        lease = os.environ.get("KPROF_LEASE")
        if lease and _address(target) == _address(os.environ.get("KPROF_LEASE_TARGET", "")):
            self._metadata += (("kprof-lease", lease),)
        self._plain_metadata = self._metadata
        self._lease_lock = threading.Lock()
        self._lease_id = None  # the lease this client's calls are made under (Client.lease)
        self._timeout = timeout
        # id -> (bytes, name, format), for uploading again after an eviction: the newest last,
        # at most max_remembered_bytes of them (and always the newest), as the C++ client keeps.
        self._modules = collections.OrderedDict()
        self._modules_lock = threading.Lock()  # a farm loads modules from several threads
        self._remembered_bytes = 0  # of the bytes in _modules, kept as they come and go
        self._upload_without_asking_bytes = upload_without_asking_bytes
        self._max_remembered_bytes = max_remembered_bytes

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def lease(self, device, seconds, lock_clocks=False, clock_mhz=0):
        """Holds `device` alone for up to `seconds` (kprof.lease.Lease, a context manager): this
        client's calls run under it until it is released or ends. One lease per client at a
        time (a second device wants a second client)."""
        with self._lease_lock:
            if self._lease_id is not None:
                raise KprofError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"this client holds lease {self._lease_id} already: release "
                                 "it first, or lease the other device with another client")
            self._lease_id = ""  # being asked for
        try:
            return _hold(self, device, seconds, lock_clocks, clock_mhz)
        except BaseException:
            with self._lease_lock:
                self._lease_id = None
            raise

    def _lease_granted(self, lease_id):
        with self._lease_lock:
            self._lease_id = lease_id
            # Its id alone: a lease from the environment (kprof lease) is not this one.
            self._metadata = tuple(m for m in self._plain_metadata if m[0] != "kprof-lease") + (
                ("kprof-lease", lease_id),)

    def _lease_ended(self, lease_id):
        with self._lease_lock:
            if self._lease_id == lease_id:
                self._lease_id = None
                self._metadata = self._plain_metadata

    def info(self):
        """GetInfo: version, devices and their collectors, limits, the modules held."""
        return _call(self._stub.GetInfo, kprof_pb2.GetInfoRequest(), timeout=self._timeout,
                     metadata=self._metadata)

    def load_module(self, module, name=None, format="auto"):
        """Uploads a module (a path, or its bytes) unless the daemon holds it; returns its id.
        As the C++ client does, a module of at most upload_without_asking_bytes is sent without
        asking HasModule first (the question costs as much as the upload)."""
        data, name, module_id = _module_bytes(module, name)
        present = False
        if len(data) > self._upload_without_asking_bytes:
            present = _call(self._stub.HasModule, kprof_pb2.HasModuleRequest(id=module_id),
                            timeout=self._timeout, metadata=self._metadata).present
        if not present:
            self._upload(data, module_id, name, format)
        self._remember(module_id, data, name, format)
        return module_id

    def _remember(self, module_id, data, name, format):
        with self._modules_lock:
            if module_id in self._modules:
                self._modules.move_to_end(module_id)
                return
            self._modules[module_id] = (data, name, format)
            self._remembered_bytes += len(data)
            while self._remembered_bytes > self._max_remembered_bytes and len(self._modules) > 1:
                _, (oldest, _, _) = self._modules.popitem(last=False)
                self._remembered_bytes -= len(oldest)

    def _remembered(self, module_id):
        """The (bytes, name, format) kept for uploading `module_id` again, or None."""
        with self._modules_lock:
            return self._modules.get(module_id)

    def _upload(self, data, module_id, name, format):
        def chunks():
            yield kprof_pb2.LoadModuleRequest(header=kprof_pb2.ModuleHeader(
                name=name, format=format, size_bytes=len(data), sha256=module_id))
            for offset in range(0, len(data), _CHUNK):
                yield kprof_pb2.LoadModuleRequest(chunk=data[offset:offset + _CHUNK])
        return _call(self._stub.LoadModule, chunks(), timeout=self._timeout,
                     metadata=self._metadata)

    def _module_id(self, module):
        if isinstance(module, (bytes, bytearray)):
            return self.load_module(module)
        if module == "builtin" or _MODULE_ID.match(module):
            return module
        return self.load_module(module)

    def _with_reupload(self, method, request, timeout):
        try:
            return method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            module = _missing_module_of_error(error)
            kept = self._remembered(module) if module is not None else None
            if kept is None:
                raise _error(error) from None
            data, name, format = kept
            self._upload(data, module, name, format)
            return _call(method, request, timeout=timeout, metadata=self._metadata)

    def _time_request(self, module, function, args, device, number, repeat, launch, options):
        return _time_request(self._module_id(module), function, args, device, number, repeat,
                             launch, options, self._module_id)

    def time_evaluate(self, module, function, args=(), device="cpu:0", number=None, repeat=None,
                      launch=None, timeout=None, **options):
        """Times `function` of `module` (a path, bytes, an id or "builtin"). Options are
        TimeEvaluateRequest's fields by name: min_repeat_ms, max_relative_stddev, checksums,
        cache_flush_bytes, outlier_filter, seed... Without `number` and `repeat` it times
        until the repeats agree (within 1%, at least 10 repeats of 1 ms, 1 s at most; the
        options given keep their values); with either, exactly that (1 for the other). reference=
        ("MODULE:FUNCTION") or expect= (NumPy arrays or .npy paths, one per output), with rtol=,
        atol=, outputs= and checks= ("strict" for candidates no one reviewed), check the
        answer: a wrong one raises KprofError (its `verdict` says why), a right one's result
        has `check`."""
        request = self._time_request(module, function, args, device, number, repeat, launch,
                                     options)
        return BenchmarkResult(self._with_reupload(self._stub.TimeEvaluate, request,
                                                   timeout or self._timeout))

    def profile_function(self, module, function, args=(), device="cpu:0", warmup=0, number=1,
                         collectors=(), launch=None, timeout=None, seed=0, **check):
        """Profiles `number` calls under `collectors` ("rusage", "perf:task-clock", ...); `seed`
        chooses the random argument data, as in time_evaluate. reference=, expect=, rtol=,
        atol= and outputs= check the answer as time_evaluate's do: a wrong one raises
        KprofError; a right one's report has `checks` (its verdict)."""
        request = profile_function_request(self._module_id, module, function, args, device,
                                           warmup, number, collectors, launch, seed, check)
        response = self._with_reupload(self._stub.ProfileFunction, request,
                                       timeout or self._timeout)
        report = Report.from_proto(response.report)
        report.checks = [response.check] if response.HasField("check") else []
        return report

    def profile(self, calls, device="cpu:0", repeat=1, warmup=0, collectors=(), timeout=None,
                seed=0):
        """Profiles a sequence of calls, each (module, function, args) or a dict with those keys
        and optionally "launch" and a check of its own ("reference", "expect", "rtol", "atol",
        "outputs", as time_evaluate's keywords); call i's random data comes from `seed` + i. A
        wrong call raises KprofError naming it; the report's `checks` are the passed verdicts,
        each naming its call."""
        request = profile_request(self._module_id, calls, device, repeat, warmup, collectors,
                                  seed)
        response = self._with_reupload(self._stub.Profile, request, timeout or self._timeout)
        report = Report.from_proto(response.report)
        report.checks = list(response.checks)
        return report

    def rank(self, jobs, confidence=0.95, threshold=1.0, initial=10, max_repeats=300,
             budget=None):
        """Races the jobs (candidates) as `kprof batch --rank` does: the Ranking names the
        fastest and the candidates within `threshold` percent of it, measuring more repeats
        only of those in doubt, each round a batch (see kprof.ranking)."""
        return _race(self.batch, jobs, confidence, threshold, initial, max_repeats, budget)

    def interleave(self, jobs, seed):
        """Runs the jobs' repeats as jobs of one repeat each, in a random order across them
        drawn from `seed`, and yields each job's merged BatchResult (see kprof.interleave)."""
        return _interleave(self.batch, jobs, seed)

    def batch(self, jobs, progress=None, **check):
        """Runs many TimeEvaluate jobs on one MeasureBatch stream and yields a BatchResult per
        job as each finishes. A job is a dict like a `kprof batch` line: "id", "module",
        "function", "args", "launch", and TimeEvaluateRequest fields by name. `progress`, when
        given, is called with each update's BatchProgress. A job whose module the daemon
        evicted before the job arrived is sent again after the module is, up to three times.
        reference=, expect=, rtol=, atol=, outputs= and checks= check every job that names no
        check of its own (the stream's check: the reference runs once for them all, but for
        strict checks, whose inputs each job draws); checks= and bitwise= hold for the jobs'
        own references too."""
        jobs, check = batch_check(list(jobs), check)
        requests = []
        for job in jobs:
            request, failure = batch_job_or_failure(job, self._module_id)
            if failure is not None:
                yield failure  # a job that is no job fails alone, before the others run
            else:
                requests.append(request)
        by_id = {request.id: request for request in requests}
        outbox = queue.Queue()
        stream_check = answer_check(self._module_id, **check)
        for i in range(0, len(requests), 64):
            message = kprof_pb2.BatchRequest(jobs=requests[i:i + 64],
                                             updates_per_message=UPDATES_PER_MESSAGE)
            if i == 0 and stream_check is not None:
                message.check.CopyFrom(stream_check)
            outbox.put(message)
        unanswered = len(by_id)
        if not unanswered:
            outbox.put(None)

        def messages():  # open until every job has its answer, so that one can be sent again
            while True:
                message = outbox.get()
                if message is None:
                    return
                yield message

        resent = {}
        stream = self._stub.MeasureBatch(messages(), metadata=self._metadata)
        try:
            for update in _updates(stream):
                if progress is not None:
                    progress(update.progress)
                if update.state not in (kprof_pb2.BatchUpdate.DONE, kprof_pb2.BatchUpdate.FAILED):
                    continue
                module = _unknown_module(update)
                kept = self._remembered(module) if module is not None else None
                if kept is not None and update.id in by_id and \
                        resent.get(update.id, 0) < _MAX_RESENDS:
                    resent[update.id] = resent.get(update.id, 0) + 1
                    data, name, format = kept
                    try:
                        self._upload(data, module, name, format)
                        outbox.put(kprof_pb2.BatchRequest(jobs=[by_id[update.id]]))
                        continue
                    except KprofError:
                        pass  # refused again (a full cache): the job's answer stands
                unanswered -= 1
                if unanswered == 0:
                    outbox.put(None)
                yield _batch_result(update, by_id.get(update.id))
        except grpc.RpcError as error:
            raise KprofError(error.code(), error.details()) from None
        finally:
            if unanswered:
                stream.cancel()  # abandoned early: nothing more is wanted
            outbox.put(None)


_MAX_RESENDS = 3  # times one batch job is sent again after its daemon evicted its module


# Updates one MeasureBatch message may carry (BatchRequest.updates_per_message): results that
# are ready together travel together.
UPDATES_PER_MESSAGE = 1024


def _updates(stream):
    """The updates of a MeasureBatch stream one by one: each message, then those in its
    `more`."""
    for message in stream:
        more = list(message.more)
        message.ClearField("more")
        yield message
        yield from more


_MISSING_MODULE_TYPE = "type.googleapis.com/kprof.v1.MissingModule"


def _missing_module(details):
    """The module id of a MissingModule among `details` (google.protobuf.Any), or None."""
    for detail in details:
        if detail.type_url == _MISSING_MODULE_TYPE:
            missing = kprof_pb2.MissingModule()
            missing.ParseFromString(detail.value)
            return missing.module_id or None
    return None


def _missing_module_of_error(error):
    """The module a failed call's rich status (its grpc-status-details-bin trailer, a
    google.rpc.Status) says the daemon does not hold, or None."""
    if error.code() != grpc.StatusCode.NOT_FOUND:
        return None
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            rich = kprof_pb2.RichStatus()
            rich.ParseFromString(value)
            return _missing_module(rich.details)
    return None


def _unknown_module(update):
    """The module id a FAILED update says the daemon does not hold (its MissingModule detail),
    or None."""
    if update.state != kprof_pb2.BatchUpdate.FAILED or \
            update.code != grpc.StatusCode.NOT_FOUND.value[0]:
        return None
    return _missing_module(update.details)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


DEFAULT_TARGET = "127.0.0.1:9177"


def _address(target):
    """A target as an address: "ipv4:10.0.0.1:9177" (a farm's spelling) is "10.0.0.1:9177"."""
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            return target[len(scheme):]
    return target


def default_target(target=None):
    """`target`, else $KPROF_TARGET, else 127.0.0.1:9177: as the kprof CLI chooses."""
    return target or os.environ.get("KPROF_TARGET") or DEFAULT_TARGET


def token_from_file(path):
    """The first token in a token file: the first word of its first line that is neither blank
    nor a # comment (a line of the daemon's token file is TOKEN [LABEL [WEIGHT]])."""
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                words = line.split()
                if words and not words[0].startswith("#"):
                    return words[0]
    except IsADirectoryError:
        raise KprofError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"cannot read token file '{path}': it is a directory, not a file") from None
    except OSError as error:
        raise KprofError(grpc.StatusCode.NOT_FOUND,
                         f"cannot read token file '{path}': {error.strerror}") from None
    raise KprofError(grpc.StatusCode.INVALID_ARGUMENT, f"the token file '{path}' holds no token")


def default_token(token=None, token_file=None):
    """`token`, else the first token in `token_file`, else $KPROF_TOKEN, else the first token in
    $KPROF_TOKEN_FILE (the CLI's variable); None when none is given."""
    if token:
        return token
    if token_file:
        return token_from_file(token_file)
    if os.environ.get("KPROF_TOKEN"):
        return os.environ["KPROF_TOKEN"]
    if os.environ.get("KPROF_TOKEN_FILE"):
        return token_from_file(os.environ["KPROF_TOKEN_FILE"])
    return None


def connect(target=None, token=None, token_file=None, **kwargs):
    """A Client of the daemon at `target` (default $KPROF_TARGET, else 127.0.0.1:9177), with the
    token given, read from `token_file`, or from $KPROF_TOKEN or $KPROF_TOKEN_FILE."""
    return Client(default_target(target), token=default_token(token, token_file), **kwargs)
