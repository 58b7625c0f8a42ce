"""Checked measurements: the reference a job's outputs are compared with (kprof/v1/check.proto),
and the verdict that comes back. Imports nothing of the package but the generated messages."""

import sys

from kprof.v1 import check_pb2, kprof_pb2

CHECK_KEYS = ("reference", "expect", "rtol", "atol", "outputs", "checks", "bitwise")
_LEVELS = {"basic": check_pb2.AnswerCheck.BASIC, "strict": check_pb2.AnswerCheck.STRICT}
VERDICT_TYPE = "type.googleapis.com/kprof.v1.CheckVerdict"

# NumPy's type names as argument specs name them (their kinds and widths).
_NUMPY_TYPES = {"b1": "bool", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
                "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
                "f2": "float16", "f4": "float32", "f8": "float64"}


def _expected(item):
    """An ExpectedOutput from a NumPy array, or a .npy file's path."""
    import numpy  # only where expected data are given
    array = numpy.load(item) if isinstance(item, str) else numpy.asarray(item)
    key = f"{array.dtype.kind}{array.dtype.itemsize}"
    if key not in _NUMPY_TYPES:
        raise ValueError(f"expected data of type {array.dtype} (accepted: bool, int8 to int64, "
                         "uint8 to uint64, float16, float32, float64)")
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return check_pb2.ExpectedOutput(dtype=_NUMPY_TYPES[key], shape=list(array.shape),
                                    data=numpy.ascontiguousarray(array).tobytes())


def _reference(reference, module_id):
    """A ReferenceCall from "MODULE:FUNCTION", (module, function) or {"module", "function"}."""
    if isinstance(reference, str):
        module, colon, function = reference.rpartition(":")
        if not colon or not module or not function:
            raise ValueError(f"reference {reference!r} is not MODULE:FUNCTION "
                             "(e.g. builtin:add, kernels.so:my_add)")
    elif isinstance(reference, dict):
        module, function = reference["module"], reference["function"]
    else:
        module, function = reference
    return check_pb2.ReferenceCall(module_id=module_id(module), function=function)


def answer_check(module_id, reference=None, expect=None, rtol=None, atol=None, outputs=None,
                 checks=None, bitwise=None):
    """The AnswerCheck these name, or None without a reference or expected data. `module_id`
    turns a module (a path, bytes, an id, "builtin") into the id the daemon knows. `checks`:
    "basic" (the default) or "strict" (for candidates no one reviewed: secret inputs, checks
    among the timed repeats; with a reference); bitwise=True with it: checked calls on the same
    inputs must agree bit for bit."""
    if reference is None and expect is None:
        if any(v is not None for v in (rtol, atol, outputs, checks, bitwise)):
            raise ValueError("rtol, atol, outputs, checks and bitwise shape a check: give "
                             "reference= or expect= with them")
        return None
    check = check_pb2.AnswerCheck()
    if checks is not None:
        if checks not in _LEVELS:
            raise ValueError(f"checks={checks!r} is not a level of checking (accepted: "
                             "'basic', 'strict')")
        check.level = _LEVELS[checks]
    if bitwise is not None:
        check.bitwise = bool(bitwise)
    if reference is not None:
        check.reference.CopyFrom(_reference(reference, module_id))
    if expect is not None:
        items = expect if isinstance(expect, (list, tuple)) else [expect]
        check.expected.extend(_expected(item) for item in items)
    if rtol is not None:
        check.rtol = rtol
    if atol is not None:
        check.atol = atol
    if outputs is not None:
        check.outputs.extend(outputs)
    return check


def batch_check(jobs, check):
    """A batch's check keywords (reference=, checks=, ...) split between the jobs and the
    stream: returns the jobs, each that names a reference or expected data of its own given the
    batch's checks= and bitwise= where it names none, and the keywords left for the jobs that
    name no check (none when the batch names no reference: then every job must name one, or
    ValueError)."""
    levels = {k: check[k] for k in ("checks", "bitwise") if k in check}
    own = list(jobs)
    if levels:
        own = [{**levels, **job} if "reference" in job or "expect" in job else job for job in jobs]
    if "reference" in check or "expect" in check or not levels:
        return own, check
    for job in own:
        if "reference" not in job and "expect" not in job:
            raise ValueError(f"job {job.get('id')!r} names no reference: the batch's checks= "
                             "and bitwise= are for jobs with a 'reference' of their own, or give "
                             "the batch reference=")
    return own, {}


def take_check(options, module_id):
    """Takes the check's keys (CHECK_KEYS) out of `options`, a dict, and returns its check."""
    return answer_check(module_id, **{k: options.pop(k) for k in CHECK_KEYS if k in options})


def verdict_of(details):
    """The CheckVerdict among `details` (google.protobuf.Any), or None."""
    for detail in details:
        if detail.type_url == VERDICT_TYPE:
            verdict = check_pb2.CheckVerdict()
            verdict.ParseFromString(detail.value)
            return verdict
    return None


def verdict_of_trailers(trailing_metadata):
    """The CheckVerdict of a failed call's rich status (grpc-status-details-bin), or None."""
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            rich = kprof_pb2.RichStatus()
            rich.ParseFromString(value)
            return verdict_of(rich.details)
    return None
