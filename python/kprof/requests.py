"""The requests the client sends, built from its arguments and from job dicts (a `kprof batch`
line, a profile's call). Imports nothing of the package but the check's, the results' and the
generated messages."""

import difflib

import grpc
from google.protobuf import json_format

from kprof.check import answer_check, take_check
from kprof.results import BatchResult, KprofError
from kprof.v1 import kprof_pb2

_CALL_KEYS = "module, function, args, launch and a check's reference, expect, rtol, atol, outputs"


def _launch(call, launch):
    if launch is None:
        return
    if not isinstance(launch, dict) or "grid" not in launch or "block" not in launch:
        raise ValueError('launch is {"grid": [x, y, z], "block": [x, y, z], '
                         '"shared_bytes": n} (y, z and shared_bytes optional)')
    call.launch.grid.extend(launch["grid"])
    call.launch.block.extend(launch["block"])
    call.launch.shared_bytes = launch.get("shared_bytes", 0)


def _specs(args):
    """The argument specs of a call: a list of them, or one spec alone ("float32[16]"), which
    would otherwise be read a character at a time."""
    return [args] if isinstance(args, (str, bytes)) else list(args)


def _collectors(request, collectors):
    """Adds each "NAME[:EVENT,EVENT...]" to the request's collectors."""
    for spec in collectors:
        name, _, events = spec.partition(":")
        request.collectors.add(name=name, options=[e for e in events.split(",") if e])


# TimeEvaluateRequest's fields an option may name (the call, its check and device have their
# own parameters and keys).
_OPTIONS = sorted(f.name for f in kprof_pb2.TimeEvaluateRequest.DESCRIPTOR.fields
                  if f.name not in ("call", "check", "device"))
_OPTION_NAMES = set(_OPTIONS) | {f.json_name for f in kprof_pb2.TimeEvaluateRequest.DESCRIPTOR.fields
                                 if f.name in _OPTIONS}


def _known_options(options):
    """Refuses an option that is no field of the request, by its Python name, with the nearest
    one that is: protobuf's own error lists the camelCase names."""
    for key in options:
        if key not in _OPTION_NAMES:
            near = difflib.get_close_matches(str(key), _OPTIONS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"unknown option {key!r}{hint}; accepted: {', '.join(_OPTIONS)}")


def _time_request(module_id, function, args, device, number, repeat, launch, options,
                  resolve=None):
    """A TimeEvaluateRequest; `number` and `repeat` set only when given (not None). Neither
    given, the daemon times until the repeats agree (until_stable: repeats of 1 ms, at least 10,
    within 1% or for 1 s at most), as `kprof time` does; until_stable=False asks for the
    wire's one call. The check's keys (reference, expect, rtol, atol, outputs) make its check,
    modules named through `resolve`."""
    options = dict(options or {})
    check = take_check(options, resolve or (lambda module: module))
    request = kprof_pb2.TimeEvaluateRequest(device=device)
    if check is not None:
        request.check.CopyFrom(check)
    if number is not None:
        request.number = number
    if repeat is not None:
        request.repeat = repeat
    request.until_stable = number is None and repeat is None
    if options:
        _known_options(options)
        try:
            json_format.ParseDict(options, request)
        except json_format.ParseError as error:
            raise ValueError(f"TimeEvaluate options: {error}") from None
    request.call.module_id = module_id
    request.call.function = function
    request.call.args.extend(_specs(args))
    _launch(request.call, launch)
    return request


def batch_job_or_failure(job, module_id):
    """(the job's BatchJob, None), or (None, a failed BatchResult saying why it is no job): a
    bad job fails alone, as a bad line of `kprof batch` does, and the others run."""
    try:
        return _batch_job(job, module_id), None
    except KprofError as error:
        code, why = error.code, error.message
    except KeyError as error:
        code, why = grpc.StatusCode.INVALID_ARGUMENT, f"needs a {error.args[0]!r} key"
    except OSError as error:
        code, why = grpc.StatusCode.NOT_FOUND, str(error)
    except (ValueError, TypeError, AttributeError) as error:
        code, why = grpc.StatusCode.INVALID_ARGUMENT, str(error)
    job_id = job.get("id") if isinstance(job, dict) else None
    name = None if job_id is None else str(job_id)
    return None, BatchResult(name, False, code=code, message=f"job {name!r}: {why}",
                             function=job.get("function", "") if isinstance(job, dict) else "")


def _batch_job(job, module_id):
    """A BatchJob from a job dict (a `kprof batch` line), its module resolved by `module_id`."""
    job = dict(job)
    if not str(job.get("id", "")):
        raise ValueError(f"a batch job without an 'id': {job!r}")
    job_id = str(job.pop("id"))
    module, function = job.pop("module"), job.pop("function")
    args, launch = job.pop("args", ()), job.pop("launch", None)
    device = job.pop("device", "cpu:0")
    number, repeat = job.pop("number", None), job.pop("repeat", None)
    request = _time_request(module_id(module), function, args, device, number, repeat, launch,
                            job, module_id)
    return kprof_pb2.BatchJob(id=job_id, time_evaluate=request)


def profile_function_request(module_id, module, function, args, device, warmup, number,
                             collectors, launch, seed, check):
    """A ProfileFunctionRequest; `check` the keywords of its check (reference=, expect=, ...)."""
    request = kprof_pb2.ProfileFunctionRequest(device=device, warmup=warmup, number=number,
                                               seed=seed)
    request.call.module_id = module_id(module)
    request.call.function = function
    request.call.args.extend(_specs(args))
    _launch(request.call, launch)
    answer = answer_check(module_id, **check)
    if answer is not None:
        request.check.CopyFrom(answer)
    _collectors(request, collectors)
    return request


def profile_request(module_id, calls, device, repeat, warmup, collectors, seed):
    """A ProfileRequest of `calls`, each (module, function, args) or a dict with a check of its
    own: checks[i] checks calls[i], an empty one leaving its call unchecked."""
    request = kprof_pb2.ProfileRequest(device=device, repeat=repeat, warmup=warmup, seed=seed)
    for i, call in enumerate(calls):
        if isinstance(call, dict):
            call = dict(call)
            module, function = call.pop("module"), call.pop("function")
            args, launch = call.pop("args", ()), call.pop("launch", None)
            check = take_check(call, module_id)
            if call:
                raise ValueError(f"call {i} has unknown keys {sorted(call)} (a call has "
                                 f"{_CALL_KEYS})")
            if check is not None:
                while len(request.checks) < i:
                    request.checks.add()
                request.checks.append(check)
        else:
            (module, function, args), launch = call, None
        out = request.calls.add(module_id=module_id(module), function=function)
        out.args.extend(_specs(args))
        _launch(out, launch)
    _collectors(request, collectors)
    return request
