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

import grpc

from kprof.client import _MODULE_ID, Client, KprofError, _module_bytes, default_target, \
    default_token
from kprof.farm_batch import FarmBatch
from kprof.interleave import interleave as _interleave
from kprof.ranking import race as _race
from kprof.targets import resolve_target


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
        return _race(self.batch, jobs, confidence, threshold, initial, max_repeats, budget)

    def interleave(self, jobs, seed):
        """Client.interleave, on a farm of one daemon: a candidate's repeats on several
        machines would measure the machines. ValueError for more."""
        if len(self.addresses) != 1:
            raise ValueError(f"interleaving compares candidates on one machine, and the farm "
                             f"has {len(self.addresses)} daemons: give one")
        return _interleave(self.batch, jobs, seed)

    def batch(self, jobs, progress=None, **check):
        """Runs TimeEvaluate jobs (dicts, as for Client.batch) over the daemons and yields a
        BatchResult per job as each finishes. `progress`, when given, is called after each
        with a BatchProgress of the whole farm (queued, done, failed); reference=, expect=,
        rtol=, atol=, outputs= check the jobs that name no check of their own, checks= and
        bitwise= the rest too. KprofError UNAVAILABLE when no daemon answers GetInfo."""
        yield from FarmBatch(self, progress).run(jobs, check)


def farm(target=None, token=None, token_file=None, **kwargs):
    """A Farm of the daemons `target` names (default $KPROF_TARGET, else 127.0.0.1:9177), with
    the token given, read from `token_file`, or from $KPROF_TOKEN or $KPROF_TOKEN_FILE."""
    return Farm(default_target(target), token=default_token(token, token_file), **kwargs)
