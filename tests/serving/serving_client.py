"""Clients of the test servers: HTTP with the standard library, gRPC with
tensorflow-serving-api's own stubs."""

import json
import os
import shutil
import urllib.error
import urllib.request

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def copy_base(served_base, tmp_path):
    """A private MODEL_BASE_DIR (tests that add versions)."""
    base = tmp_path / "tiny_lm"
    shutil.copytree(served_base[1], base)
    return str(base)


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
