"""The wire contract split into parts (common, check, measure, modules, info, batch, lease) is the
contract it was: every message written by the definitions before the split (data/wire_golden.json,
each field set) decodes to the same fields, and encodes to the same bytes, with today's."""
import json
import os

from google.protobuf import text_format

from kprof.v1 import kprof_pb2

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wire_golden.json")


def golden():
    with open(GOLDEN) as f:
        return json.load(f)


def message_class(full_name):
    # Every message is reachable through kprof_pb2, as before the split.
    return getattr(kprof_pb2, full_name.split(".")[-1])


def test_the_golden_file_covers_the_whole_contract():
    messages = golden()
    assert len(messages) >= 50
    for name in ("kprof.v1.TimeEvaluateRequest", "kprof.v1.TimeEvaluateResponse",
                 "kprof.v1.BatchRequest", "kprof.v1.BatchUpdate", "kprof.v1.GetInfoResponse",
                 "kprof.v1.LeaseRequest", "kprof.v1.LoadModuleRequest", "kprof.v1.CheckVerdict"):
        assert name in messages
    # Every message of today's contract was there before the split: no part lost or added one.
    today = set()
    for module_name in ("common", "check", "measure", "modules", "info", "batch", "lease"):
        module = __import__("kprof.v1.%s_pb2" % module_name, fromlist=["DESCRIPTOR"])
        today.update("kprof.v1." + n for n in module.DESCRIPTOR.message_types_by_name)
    assert today == set(messages)


def test_messages_written_before_the_split_read_the_same():
    for full_name, written in golden().items():
        message = message_class(full_name)()
        message.ParseFromString(bytes.fromhex(written["bytes"]))
        assert text_format.MessageToString(message) == written["text"], full_name
        assert message.SerializeToString(deterministic=True).hex() == written["bytes"], full_name


def test_the_parts_are_one_package_and_the_service_is_in_kprof_proto():
    assert kprof_pb2.DESCRIPTOR.package == "kprof.v1"
    assert "Profiler" in kprof_pb2.DESCRIPTOR.services_by_name
    for part in kprof_pb2.DESCRIPTOR.public_dependencies:
        assert part.package == "kprof.v1"
        assert part.name.startswith("kprof/v1/")
