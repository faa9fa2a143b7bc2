"""Clients of the test servers: HTTP with the standard library, gRPC with
tensorflow-serving-api's own stubs."""

import contextlib
import json
import os
import shutil
import time
import urllib.error
import urllib.request

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def copy_base(served_base, tmp_path):
    """A private MODEL_BASE_DIR (tests that add versions)."""
    base = tmp_path / "tiny_lm"
    shutil.copytree(served_base[1], base)
    return str(base)


@contextlib.contextmanager
def polling_server(base, **settings):
    """A REST-only :class:`~keras_rnnlm.serving.Server` of the tiny model
    at MODEL_BASE_DIR ``base``, looking for new versions every 0.2 s and
    stopped on exit; ``settings`` add to its keyword arguments (warm-up)."""
    from keras_rnnlm.serving import Server

    srv = Server(
        "tiny_lm",
        base,
        rest_port=0,
        grpc_port=None,
        poll_seconds=0.2,
        drain_seconds=5,
        **settings,
    ).start()
    try:
        yield srv
    finally:
        srv.stop()


def wait_until(condition, srv, timeout=60):
    """Waits until ``condition()`` holds, polling every 0.1 s; fails with
    ``srv``'s version status after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, srv.models.status()
        time.sleep(0.1)


def http(method, url, body=None, timeout=60):
    """(status, parsed JSON) of one request."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def rest_url(srv, suffix=""):
    return f"http://127.0.0.1:{srv.rest_port}/v1/models/tiny_lm{suffix}"


def rest_initial_state(url):
    """``(states, bos_ids)`` of the ``initial_state`` signature for one
    stream, over REST at the ``:predict`` ``url``; the signature takes a
    scalar, so the request is columnar (no batch dimension)."""
    status, out = http(
        "POST",
        url,
        {"signature_name": "initial_state", "inputs": {"batch_size": 1}},
    )
    assert status == 200, out
    state = out["outputs"]
    return state, state.pop("bos_ids")


def grpc_predict(srv, signature, inputs, version=None, timeout=60):
    """A PredictionService/Predict call with tensorflow-serving-api's stub;
    returns ``{name: ndarray}``."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "tiny_lm"
        request.model_spec.signature_name = signature
        if version is not None:
            request.model_spec.version.value = version
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        response = stub.Predict(request, timeout=timeout)
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}


class ServerProcess:
    """``keras-rnnlm serve`` in a child process on free loopback ports;
    its stderr (events and access lines) is kept in ``lines``."""

    def __init__(self, args, timeout=180):
        import re
        import subprocess
        import sys
        import threading
        import time

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "keras_rnnlm.cli", "serve", *args]
            + ["--rest-port", "0", "--grpc-port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        self.lines = []
        self.rest_port = self.grpc_port = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(
                    r"REST on [\d.]+:(\d+), gRPC on [\d.]+:(\d+)", line
                )
                if m:
                    self.rest_port, self.grpc_port = int(m[1]), int(m[2])
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.5):
            if time.monotonic() > deadline:
                break
        if self.rest_port is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + self.log()[-3000:])

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        return "".join(self.lines)

    def stop(self):
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def grpc_channel(srv):
    import grpc

    return grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")


def raw_http(port, data, timeout=30):
    """Sends raw bytes; returns (status, parsed JSON body) of the answer."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            length = [
                int(h.split(b":")[1])
                for h in head.split(b"\r\n")
                if h.lower().startswith(b"content-length:")
            ]
            if length and len(body) >= length[0]:
                break
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def post_raw(port, path, body, timeout=30):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return raw_http(port, head.encode() + body, timeout)
