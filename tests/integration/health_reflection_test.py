#!/usr/bin/python3
"""An independent gRPC client (Python's grpcio) against a real kprofd: the health service
answers SERVING for "" and kprof.v1.Profiler, and server reflection lists the service.
With --token, the daemon requires a bearer token: health still answers without one (load
balancers probe it), the Profiler service and reflection do not.

Messages are encoded by hand, so the test shares no generated code with the daemon."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc


def string_field(number, text):
    data = text.encode()
    return bytes([number << 3 | 2, len(data)]) + data


def main():
    kprofd = sys.argv[1]
    with_token = "--token" in sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        command = [kprofd, "--listen", "127.0.0.1:0", "--port-file", port_file,
                   "--cache-dir", os.path.join(tmp, "cache")]
        if with_token:
            with open(os.path.join(tmp, "tokens"), "w") as tokens:
                tokens.write("python-test-token\n")
            command += ["--token-file", os.path.join(tmp, "tokens")]
        daemon = subprocess.Popen(command)
        try:
            for _ in range(1000):
                if os.path.exists(port_file):
                    break
                time.sleep(0.01)
            port = open(port_file).read().strip()
            channel = grpc.insecure_channel("127.0.0.1:" + port)
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            for service in ["", "kprof.v1.Profiler"]:
                reply = check(string_field(1, service) if service else b"", timeout=10)
                assert reply == b"\x08\x01", f"health of {service!r}: {reply!r} is not SERVING"
            try:
                check(string_field(1, "no.such.Service"), timeout=10)
                raise AssertionError("an unknown service must be NOT_FOUND")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.NOT_FOUND, error

            info = channel.unary_unary("/kprof.v1.Profiler/GetInfo")
            if with_token:
                try:
                    info(b"", timeout=10)
                    raise AssertionError("GetInfo without a token must be UNAUTHENTICATED")
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
                reply = info(b"", timeout=10,
                             metadata=[("authorization", "Bearer python-test-token")])
            else:
                reply = info(b"", timeout=10)
            assert b"cpu:0" in reply, reply

            # Bytes that are no protobuf message: INVALID_ARGUMENT naming the method, not the
            # UNIMPLEMENTED grpc++ would answer, as if the method did not exist.
            try:
                info(b"\xff\xff\xff\xff", timeout=10,
                     metadata=[("authorization", "Bearer python-test-token")] if with_token else [])
                raise AssertionError("a malformed GetInfoRequest must be refused")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
                assert "/kprof.v1.Profiler/GetInfo is not a valid protobuf" in error.details(), error

            # TimeEvaluate, whose request the service parses itself: the same answer; without a
            # token, UNAUTHENTICATED before anything is parsed.
            time_evaluate = channel.unary_unary("/kprof.v1.Profiler/TimeEvaluate")
            try:
                time_evaluate(b"\xff\xff\xff\xff", timeout=10,
                              metadata=[("authorization", "Bearer python-test-token")]
                              if with_token else [])
                raise AssertionError("a malformed TimeEvaluateRequest must be refused")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
                assert "/kprof.v1.Profiler/TimeEvaluate is not a valid protobuf" in \
                    error.details(), error
            if with_token:
                try:
                    time_evaluate(b"\xff\xff\xff\xff", timeout=10)
                    raise AssertionError("TimeEvaluate without a token must be UNAUTHENTICATED")
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error

            # The same on a batch stream: a BatchRequest that does not parse ends the stream
            # INVALID_ARGUMENT, where grpc++ alone would take it for the end of the requests
            # and end the stream OK, with nothing answered.
            batch = channel.stream_stream("/kprof.v1.Profiler/MeasureBatch")
            try:
                for _ in batch(iter([b"\xff\xff\xff\xff"]), timeout=10,
                               metadata=[("authorization", "Bearer python-test-token")]
                               if with_token else []):
                    pass
                raise AssertionError("a malformed BatchRequest must end the stream")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
                assert "a BatchRequest that does not parse" in error.details(), error

            reflect = channel.stream_stream(
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
            token = [("authorization", "Bearer python-test-token")] if with_token else []
            if with_token:
                # Reflection is gRPC's own service: it needs the token all the same, and says
                # nothing without it.
                for metadata in ([], [("authorization", "Bearer wrong-token")]):
                    try:
                        replies = list(reflect(iter([string_field(7, "")]), timeout=10,
                                               metadata=metadata))
                        raise AssertionError(f"reflection answered {replies!r} without a token")
                    except grpc.RpcError as error:
                        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
            replies = list(reflect(iter([string_field(7, "")]), timeout=10, metadata=token))
            assert any(b"kprof.v1.Profiler" in r for r in replies), replies
            channel.close()
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=20)
        assert code == 0, f"kprofd exited with {code} after SIGTERM"
    print("health, reflection" + (" and tokens" if with_token else "") + ": 1 passed, 0 failed")


if __name__ == "__main__":
    main()
