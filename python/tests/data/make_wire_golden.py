"""Writes wire_golden.json: every kprof.v1 message, each field set (a oneof's first member), as the
bytes and the text its definitions give. Run once with the definitions of December 2026 (all
messages in kprof.proto and check.proto); test_wire_compat.py decodes those bytes with today's.

    PYTHONPATH=build/release/python /usr/bin/python3 python/tests/data/make_wire_golden.py
"""
import json
import os
import sys

from google.protobuf import descriptor, text_format

from kprof.v1 import check_pb2, kprof_pb2  # kprof_pb2 holds every message (its parts' too)


def fill(message, depth=0):
    """Sets every field of `message` to a value of its own (nested messages to depth 3)."""
    seen_oneofs = set()
    for index, field in enumerate(message.DESCRIPTOR.fields):
        oneof = field.containing_oneof
        if oneof is not None:
            if oneof.name in seen_oneofs:
                continue
            seen_oneofs.add(oneof.name)
        value = index + 1 + depth * 100
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            key = "k%d" % value if key_field.type == descriptor.FieldDescriptor.TYPE_STRING else value
            target = getattr(message, field.name)
            if value_field.message_type is not None:
                if depth < 3:
                    fill(target[key], depth + 1)
            else:
                target[key] = scalar(value_field, value)
            continue
        if field.message_type is not None:
            if field.message_type.full_name == "google.protobuf.Any":
                getattr(message, field.name).Pack(check_pb2.CheckVerdict()) if field.label != field.LABEL_REPEATED else getattr(message, field.name).add().Pack(check_pb2.CheckVerdict())
                continue
            if depth >= 3:
                continue
            if field.label == field.LABEL_REPEATED:
                fill(getattr(message, field.name).add(), depth + 1)
            else:
                fill(getattr(message, field.name), depth + 1)
            continue
        if field.label == field.LABEL_REPEATED:
            getattr(message, field.name).append(scalar(field, value))
        else:
            setattr(message, field.name, scalar(field, value))


def scalar(field, value):
    t = field.type
    if t == field.TYPE_STRING:
        return "%s-%d" % (field.name, value)
    if t == field.TYPE_BYTES:
        return b"\x01\x02" + bytes([value % 256])
    if t == field.TYPE_BOOL:
        return True
    if t in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return value + 0.5
    if t == field.TYPE_ENUM:
        values = field.enum_type.values
        return values[min(1, len(values) - 1)].number
    return value


def main():
    golden = {}
    for module in (kprof_pb2, check_pb2):
        for name in sorted(module.DESCRIPTOR.message_types_by_name):
            message = getattr(module, name)()
            fill(message)
            golden[message.DESCRIPTOR.full_name] = {
                "bytes": message.SerializeToString(deterministic=True).hex(),
                "text": text_format.MessageToString(message),
            }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire_golden.json")
    with open(out, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    print("%d messages in %s" % (len(golden), out), file=sys.stderr)


if __name__ == "__main__":
    main()
