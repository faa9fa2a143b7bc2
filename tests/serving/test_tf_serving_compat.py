"""TF Serving's API contract, request by request: the requests that TF
Serving's REST API guide (tensorflow.org/tfx/serving/api_rest) and its
gRPC protos show, sent to ``keras-rnnlm serve`` (a child process), with
the shape, codes and fields of each answer checked as TF Serving gives
them (``http_rest_api_handler.cc``, ``http_server.cc``,
``get_model_status_impl.cc``, ``predict_util.cc``, ``server_core.cc``).
A change that breaks a TF Serving client fails here."""

import numpy as np
import pytest
from serving_client import grpc_channel
from serving_client import http

STATUS_KEYS = {"version", "state", "status"}


def _base(srv):
    return f"http://127.0.0.1:{srv.rest_port}/v1/models/tiny_lm"


# -- REST: model status ----------------------------------------------------
@pytest.mark.parametrize("suffix", ["", "/versions/1", "/labels/canary"])
def test_rest_model_status(labelled_server, suffix):
    status, out = http("GET", _base(labelled_server) + suffix)
    assert status == 200
    assert set(out) == {"model_version_status"}
    for v in out["model_version_status"]:
        assert set(v) == STATUS_KEYS
        assert isinstance(v["version"], str) and v["version"].isdigit()
        assert v["state"] in {
            "START",
            "LOADING",
            "AVAILABLE",
            "UNLOADING",
            "END",
        }
        assert v["status"] == {"error_code": "OK", "error_message": ""}


# -- REST: model metadata --------------------------------------------------
@pytest.mark.parametrize(
    "suffix, version",
    [("", "2"), ("/versions/1", "1"), ("/labels/stable", "1")],
)
def test_rest_model_metadata(labelled_server, suffix, version):
    status, out = http("GET", _base(labelled_server) + suffix + "/metadata")
    assert status == 200
    assert set(out) == {"model_spec", "metadata"}
    assert out["model_spec"] == {
        "name": "tiny_lm",
        "signature_name": "",
        "version": version,
    }
    sigs = out["metadata"]["signature_def"]["signature_def"]
    default = sigs["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    sentences = default["inputs"]["sentences"]
    assert sentences["dtype"] == "DT_STRING"
    assert sentences["tensor_shape"]["dim"] == [{"size": "-1"}]
    assert "name" in sentences
    assert default["outputs"]["log10_prob"]["dtype"] == "DT_FLOAT"


# -- REST: predict, row and columnar ----------------------------------------
def test_rest_predict_row_format(labelled_server):
    url = _base(labelled_server) + ":predict"
    # Named inputs, one object per instance; several outputs: a list of
    # objects, one per instance.
    body = {
        "signature_name": "score_text",
        "instances": [{"sentences": "the cat"}, {"sentences": "a dog ."}],
    }
    status, out = http("POST", url, body)
    assert status == 200 and set(out) == {"predictions"}
    assert len(out["predictions"]) == 2
    row = out["predictions"][0]
    assert set(row) >= {"log10_prob", "ln_prob", "num_tokens", "tokens"}
    assert isinstance(row["log10_prob"], float)
    assert row["tokens"][:3] == ["the", "cat", "<eos>"]
    # One input: bare values; signature_name defaults to serving_default.
    status, out2 = http("POST", url, {"instances": ["the cat", "a dog ."]})
    assert status == 200 and out2 == out
    # Binary strings as {"b64": ...}.
    status, out3 = http("POST", url, {"instances": [{"b64": "dGhlIGNhdA=="}]})
    assert status == 200
    assert out3["predictions"][0]["tokens"] == ["the", "cat", "<eos>"]


def test_rest_predict_columnar_format(labelled_server):
    url = _base(labelled_server) + ":predict"
    body = {"inputs": {"sentences": ["the cat", "a dog ."]}}
    status, out = http("POST", url, body)
    assert status == 200 and set(out) == {"outputs"}
    outs = out["outputs"]
    assert len(outs["log10_prob"]) == 2
    assert outs["tokens"][0][:3] == ["the", "cat", "<eos>"]
    # A bare value for a one-input signature.
    status, bare = http("POST", url, {"inputs": ["the cat", "a dog ."]})
    assert status == 200 and bare == out
    # Row and columnar give the same numbers.
    _, rows = http("POST", url, {"instances": ["the cat", "a dog ."]})
    np.testing.assert_allclose(
        [p["log10_prob"] for p in rows["predictions"]], outs["log10_prob"]
    )


@pytest.mark.parametrize(
    "suffix", ["/versions/1:predict", "/labels/stable:predict"]
)
def test_rest_predict_by_version_and_label(labelled_server, suffix):
    status, out = http(
        "POST", _base(labelled_server) + suffix, {"instances": ["the cat"]}
    )
    assert status == 200 and out["predictions"][0]["num_tokens"] == 3


# -- REST: errors ------------------------------------------------------------
@pytest.mark.parametrize(
    "method, suffix, body, code, message",
    [
        ("POST", ":predict", b"{bad", 400, "JSON Parse error"),
        ("POST", ":predict", b"", 400, "JSON Parse error"),
        (
            "POST",
            ":predict",
            {"signature_name": "nope", "instances": ["a"]},
            400,
            'Serving signature key "nope" not found.',
        ),
        ("POST", "/versions/9:predict", {"instances": ["a"]}, 404, "Specific"),
        (
            "POST",
            "/labels/nope:predict",
            {"instances": ["a"]},
            400,
            "Unrecognized servable version label: nope",
        ),
        ("GET", "/versions/9", None, 404, "Could not find version 9"),
        ("GET", ":predict", None, 400, "Malformed request"),
        ("POST", "", {"instances": ["a"]}, 400, "Malformed request"),
        ("POST", ":classify", {"examples": []}, 501, "only :predict"),
    ],
)
def test_rest_errors(labelled_server, method, suffix, body, code, message):
    status, out = http(method, _base(labelled_server) + suffix, body)
    assert status == code and set(out) == {"error"}, out
    assert message in out["error"]


def test_rest_unknown_model(labelled_server):
    url = f"http://127.0.0.1:{labelled_server.rest_port}/v1/models/other"
    status, out = http("POST", url + ":predict", {"instances": ["a"]})
    assert status == 404
    assert out == {"error": "Servable not found for request: Latest(other)"}


# -- gRPC ---------------------------------------------------------------------
def test_grpc_predict_response(labelled_server):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny_lm"
    request.model_spec.signature_name = "score_text"
    request.inputs["sentences"].CopyFrom(
        tf.make_tensor_proto(["the cat", "a dog ."])
    )
    request.output_filter.extend(["log10_prob", "tokens"])
    with grpc_channel(labelled_server) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        r = stub.Predict(request, timeout=60)
    assert r.model_spec.name == "tiny_lm"
    assert r.model_spec.signature_name == "score_text"
    assert r.model_spec.version.value == 2
    assert set(r.outputs) == {"log10_prob", "tokens"}  # output_filter
    log10 = r.outputs["log10_prob"]
    assert log10.dtype == tf.float32.as_datatype_enum
    assert [d.size for d in log10.tensor_shape.dim] == [2]
    assert len(log10.float_val) == 2 and not log10.tensor_content
    np.testing.assert_array_equal(
        tf.make_ndarray(log10), np.array(log10.float_val, np.float32)
    )


def test_grpc_metadata_and_status(labelled_server):
    from tensorflow_serving.apis import get_model_metadata_pb2
    from tensorflow_serving.apis import get_model_status_pb2
    from tensorflow_serving.apis import model_service_pb2_grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc_channel(labelled_server) as channel:
        predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        request.model_spec.name = "tiny_lm"
        request.metadata_field.append("signature_def")
        r = predictions.GetModelMetadata(request, timeout=30)
        assert (r.model_spec.name, r.model_spec.version.value) == (
            "tiny_lm",
            2,
        )
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        assert r.metadata["signature_def"].Unpack(sig_map)
        assert "serving_default" in sig_map.signature_def
        models = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "tiny_lm"
        request.model_spec.version.value = 1
        (v,) = models.GetModelStatus(request, timeout=30).model_version_status
        assert (v.version, v.state, v.status.error_code) == (
            1,
            v.AVAILABLE,
            0,
        )


def _grpc_error(labelled_server, call):
    import grpc

    with grpc_channel(labelled_server) as channel:
        with pytest.raises(grpc.RpcError) as e:
            call(channel)
    return e.value.code().name, e.value.details()


def test_grpc_errors(labelled_server):
    import tensorflow as tf
    from tensorflow_serving.apis import get_model_metadata_pb2
    from tensorflow_serving.apis import get_model_status_pb2
    from tensorflow_serving.apis import model_service_pb2_grpc
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    def predict(**spec):
        def call(channel):
            r = predict_pb2.PredictRequest()
            for k, v in spec.items():
                if k == "version":
                    r.model_spec.version.value = v
                elif k == "output_filter":
                    r.output_filter.append(v)
                else:
                    setattr(r.model_spec, k, v)
            r.inputs["sentences"].CopyFrom(tf.make_tensor_proto(["a"]))
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            return stub.Predict(r, timeout=30)

        return call

    cases = [
        (predict(name="other"), "NOT_FOUND", "Latest(other)"),
        (predict(name=""), "INVALID_ARGUMENT", "no name"),
        (
            predict(name="tiny_lm", version=9),
            "NOT_FOUND",
            "Specific(tiny_lm, 9)",
        ),
        (
            predict(name="tiny_lm", version_label="nope"),
            "INVALID_ARGUMENT",
            "Unrecognized servable version label",
        ),
        (
            predict(name="tiny_lm", signature_name="nope"),
            "FAILED_PRECONDITION",
            'Serving signature key "nope" not found.',
        ),
        (
            predict(name="tiny_lm", output_filter="nope"),
            "INVALID_ARGUMENT",
            "output tensor alias not found in signature: nope",
        ),
    ]
    for call, code, message in cases:
        got_code, details = _grpc_error(labelled_server, call)
        assert got_code == code and message in details, (code, details)

    def metadata(field):
        def call(channel):
            r = get_model_metadata_pb2.GetModelMetadataRequest()
            r.model_spec.name = "tiny_lm"
            if field:
                r.metadata_field.append(field)
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            return stub.GetModelMetadata(r, timeout=30)

        return call

    assert _grpc_error(labelled_server, metadata(None)) == (
        "INVALID_ARGUMENT",
        "GetModelMetadataRequest must specify at least one metadata_field",
    )
    assert _grpc_error(labelled_server, metadata("x")) == (
        "INVALID_ARGUMENT",
        "Metadata field x is not supported",
    )

    def status(version):
        def call(channel):
            r = get_model_status_pb2.GetModelStatusRequest()
            r.model_spec.name = "tiny_lm"
            r.model_spec.version.value = version
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            return stub.GetModelStatus(r, timeout=30)

        return call

    assert _grpc_error(labelled_server, status(9)) == (
        "NOT_FOUND",
        "Could not find version 9 of model tiny_lm",
    )

    def classify(channel):
        from tensorflow_serving.apis import classification_pb2

        r = classification_pb2.ClassificationRequest()
        r.model_spec.name = "tiny_lm"
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        return stub.Classify(r, timeout=30)

    assert _grpc_error(labelled_server, classify)[0] == "UNIMPLEMENTED"
