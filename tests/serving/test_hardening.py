"""TF Serving clients work unchanged, and no request can crash, wedge or
swell the server: a ``keras-rnnlm serve`` child process, driven with
tensorflow-serving-api's own stubs and plain HTTP."""

import os
import shutil
import socket
import time

import numpy as np
import pytest
from serving_client import ServerProcess
from serving_client import grpc_channel
from serving_client import http
from serving_client import post_raw


def _url(srv, suffix=""):
    return f"http://127.0.0.1:{srv.rest_port}/v1/models/tiny_lm{suffix}"


def _stub(channel):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _request(signature="score_text", label=None, version=None, **inputs):
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2
    from tensorflow_serving.apis import predict_pb2

    r = predict_pb2.PredictRequest()
    r.model_spec.name = "tiny_lm"
    if signature:
        r.model_spec.signature_name = signature
    if label is not None:
        r.model_spec.version_label = label
    if version is not None:
        r.model_spec.version.value = version
    for k, v in inputs.items():
        if not isinstance(v, tensor_pb2.TensorProto):
            v = tf.make_tensor_proto(v)
        r.inputs[k].CopyFrom(v)
    return r


def _rss_mb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _still_serves(srv):
    status, out = http("POST", _url(srv, ":predict"), {"instances": ["a"]})
    assert status == 200 and out["predictions"][0]["num_tokens"] == 2, out


# 1 ---------------------------------------------------------------------
def test_grpc_outputs_are_typed_proto_fields(labelled_server):
    """The usual client pattern, ``outputs[k].float_val``, reads every
    value: nothing is left in ``tensor_content``."""
    with grpc_channel(labelled_server) as channel:
        r = _stub(channel).Predict(
            _request("", sentences=["the cat"]), timeout=60
        )
    out = r.outputs
    assert len(out["log10_prob"].float_val) == 1
    assert out["log10_prob"].float_val[0] < 0
    tl = out["token_logprobs"]
    shape = [d.size for d in tl.tensor_shape.dim]
    assert shape == [1, 3] and len(tl.float_val) == 3
    assert [t for t in out["tokens"].string_val] == [b"the", b"cat", b"<eos>"]
    assert list(out["num_tokens"].int_val) == [3]
    assert len(out["token_is_oov"].bool_val) == 3
    assert all(not v.tensor_content for v in out.values())


# 2 ---------------------------------------------------------------------
def test_version_labels_and_policy_over_grpc(labelled_server):
    import grpc
    from tensorflow_serving.apis import get_model_metadata_pb2
    from tensorflow_serving.apis import get_model_status_pb2
    from tensorflow_serving.apis import model_service_pb2_grpc

    s = ["the cat"]
    with grpc_channel(labelled_server) as channel:
        stub = _stub(channel)
        # No version: the highest the policy serves.
        assert stub.Predict(_request(sentences=s)).model_spec.version.value == 2
        for label, version in (("stable", 1), ("canary", 2)):
            r = stub.Predict(_request(label=label, sentences=s), timeout=60)
            assert r.model_spec.version.value == version
        r = stub.Predict(_request(version=1, sentences=s), timeout=60)
        assert r.model_spec.version.value == 1
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(_request(label="nope", sentences=s), timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "Unrecognized servable version label: nope" in e.value.details()

        meta = get_model_metadata_pb2.GetModelMetadataRequest()
        meta.model_spec.name = "tiny_lm"
        meta.model_spec.version_label = "stable"
        meta.metadata_field.append("signature_def")
        assert stub.GetModelMetadata(meta).model_spec.version.value == 1
        meta.model_spec.version_label = "nope"
        with pytest.raises(grpc.RpcError) as e:
            stub.GetModelMetadata(meta)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        models = model_service_pb2_grpc.ModelServiceStub(channel)
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "tiny_lm"
        got = models.GetModelStatus(req).model_version_status
        available = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        assert [(v.version, v.state) for v in got] == [
            (2, available),
            (1, available),
        ]
        req.model_spec.version_label = "stable"
        (v,) = models.GetModelStatus(req).model_version_status
        assert v.version == 1
        req.model_spec.version_label = "nope"
        with pytest.raises(grpc.RpcError) as e:
            models.GetModelStatus(req)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_version_labels_over_rest(labelled_server):
    status, out = http("GET", _url(labelled_server, "/labels/stable"))
    assert status == 200, out
    assert [v["version"] for v in out["model_version_status"]] == ["1"]
    status, out = http("GET", _url(labelled_server, "/labels/canary/metadata"))
    assert status == 200 and out["model_spec"]["version"] == "2"
    body = {"instances": ["the cat"]}
    status, out = http(
        "POST", _url(labelled_server, "/labels/stable:predict"), body
    )
    assert status == 200 and out["predictions"][0]["num_tokens"] == 3
    status, out = http(
        "POST", _url(labelled_server, "/labels/nope:predict"), body
    )
    assert status == 400
    assert out["error"] == "Unrecognized servable version label: nope"


def test_version_policy_aspires_as_tf_serving():
    from keras_rnnlm.serving.servables import VersionPolicy

    found = {1, 2, 5, 7}
    assert VersionPolicy().aspired(found) == {7}
    assert VersionPolicy("latest", 2).aspired(found) == {5, 7}
    assert VersionPolicy("all").aspired(found) == found
    assert VersionPolicy("specific", versions=[2, 3]).aspired(found) == {2}


def test_model_config_file_is_checked(tmp_path):
    from keras_rnnlm.serving.model_config import read_model_config

    path = tmp_path / "models.config"
    path.write_text(
        'model_config_list { config { name: "m" base_path: "m" '
        "model_version_policy { specific { versions: 1 } } "
        'version_labels { key: "canary" value: 2 } } }'
    )
    with pytest.raises(ValueError, match="does not serve"):
        read_model_config(str(path))
    path.write_text(
        'model_config_list { config { name: "m" base_path: "/m" } '
        'config { name: "n" base_path: "/n" } }'
    )
    with pytest.raises(ValueError, match="one model"):
        read_model_config(str(path))
    path.write_text(
        'model_config_list { config { name: "m" base_path: "/m" '
        "model_version_policy { latest { num_versions: 2 } } } }"
    )
    config = read_model_config(str(path))
    assert (config.name, config.base_path, config.labels) == ("m", "/m", {})
    assert config.policy.aspired({1, 2, 3}) == {2, 3}


# 3, and 9's empty version directory -------------------------------------
def test_removing_the_newest_version_rolls_back(served_base, tmp_path):
    import grpc  # noqa: F401

    base = tmp_path / "tiny_lm"
    for v in ("1", "2"):
        shutil.copytree(os.path.join(served_base[1], "1"), base / v)
    srv = ServerProcess(
        [
            str(base),
            "--model-name",
            "tiny_lm",
            "--no-warmup",
            "--poll-seconds",
            "0.2",
        ]
    )
    try:

        def versions():
            _, out = http("GET", _url(srv))
            return {
                int(v["version"]): v["state"]
                for v in out["model_version_status"]
            }

        assert versions() == {2: "AVAILABLE"}
        os.makedirs(base / "3")  # empty: logged, not loaded
        os.rename(base / "2", tmp_path / "old2")
        deadline = time.monotonic() + 60
        while versions() != {1: "AVAILABLE", 2: "END"}:
            assert time.monotonic() < deadline, versions()
            time.sleep(0.2)
        with grpc_channel(srv) as channel:
            r = _stub(channel).Predict(_request(sentences=["a"]), timeout=60)
        assert r.model_spec.version.value == 1
        status, out = http("GET", _url(srv, "/versions/2"))
        assert (
            status == 200 and out["model_version_status"][0]["state"] == "END"
        )
        assert "version directory 3 has no saved_model.pb" in srv.log()
    finally:
        srv.stop()


# 4 ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        b'{"instances": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"instances": ' + b"[" * 30000 + b"]" * 30000 + b"}",
        b'{"instances": ["the ' + b"\\ud800" + b' cat"]}',
        b'{"instances": ["' + b"\\udc00" + b'"]}',
        b'{"signature_name": "\\ud800", "instances": ["a"]}',
        b'{"instances": ["\xff\xfe"]}',
    ],
)
def test_rest_deep_or_invalid_json_is_a_400(labelled_server, body):
    status, out = post_raw(
        labelled_server.rest_port, "/v1/models/tiny_lm:predict", body
    )
    assert status == 400 and set(out) == {"error"}, out
    _still_serves(labelled_server)


# 5 ---------------------------------------------------------------------
def _proto(dtype, dims, **fields):
    from tensorflow.core.framework import tensor_pb2
    from tensorflow.core.framework import tensor_shape_pb2

    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
    )
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **fields)


@pytest.mark.parametrize(
    "signature, inputs, message",
    [
        (
            "score_text",
            {"sentences": _proto(0, [1], string_val=[b"a"])},
            "DT_INVALID",
        ),
        (
            "score_text",
            {"sentences": _proto(999, [1], string_val=[b"a"])},
            "DataType 999",
        ),
        ("score_text", {"sentences": _proto(7, [2])}, "no values"),
        (
            "score_text",
            {"sentences": _proto(7, [1], string_val=[b"a", b"b"])},
            "2 values",
        ),
        (
            "score_text",
            {"sentences": _proto(7, [-1], string_val=[b"a"])},
            "negative",
        ),
        (
            "score_ids",
            {
                "token_ids": _proto(3, [1, 2], tensor_content=b"\x01" * 5),
                "lengths": _proto(3, [1], int_val=[2]),
            },
            "tensor_content",
        ),
    ],
)
def test_grpc_malformed_tensors_are_invalid_argument(
    labelled_server, signature, inputs, message
):
    import grpc

    with grpc_channel(labelled_server) as channel:
        with pytest.raises(grpc.RpcError) as e:
            _stub(channel).Predict(_request(signature, **inputs), timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in e.value.details()


def test_grpc_fewer_values_repeat_the_last_as_tensorflow(labelled_server):
    """``Tensor::FromProto``: fewer typed values than elements repeat the
    last one (``tf.make_tensor_proto("a b", shape=[3])``)."""
    p = _proto(7, [3], string_val=[b"the cat"])
    with grpc_channel(labelled_server) as channel:
        r = _stub(channel).Predict(_request(sentences=p), timeout=60)
    assert list(r.outputs["num_tokens"].int_val) == [3, 3, 3]


# 6 ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "signature, inputs",
    [
        (
            "score_text",
            {"sentences": _proto(7, [200_000_000], string_val=[b"a"])},
        ),
        (
            "score_ids",
            {
                "token_ids": _proto(3, [1, 200_000_000], int_val=[1]),
                "lengths": _proto(3, [1], int_val=[1]),
            },
        ),
        (
            "score_ids",
            {
                "token_ids": _proto(3, [2**40, 2**40], int_val=[1]),
                "lengths": _proto(3, [1], int_val=[1]),
            },
        ),
    ],
)
def test_declared_shape_is_checked_before_expanding(
    labelled_server, signature, inputs
):
    import grpc

    rss = _rss_mb(labelled_server.pid)
    with grpc_channel(labelled_server) as channel:
        t0 = time.perf_counter()
        with pytest.raises(grpc.RpcError) as e:
            _stub(channel).Predict(_request(signature, **inputs), timeout=60)
        seconds = time.perf_counter() - t0
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "--max-rows" in e.value.details() or "--max-sentence" in (
        e.value.details()
    )
    # Expanding the declared values first took 1.7 s at 20M; at 200M
    # it would take ~17 s, far above a refusal on a loaded machine.
    assert seconds < 3.0, seconds
    assert _rss_mb(labelled_server.pid) - rss < 50


# 7 ---------------------------------------------------------------------
def test_stalled_clients_are_closed_and_connections_capped(labelled_server):
    """Connections that never finish their headers or body are answered
    408 and closed after --read-timeout (2 s); past --max-connections
    (40) a connection is answered 503 at once; the server answers
    throughout."""
    port = labelled_server.rest_port
    stalled = []
    try:
        for i in range(30):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"POST /v1/models/tiny_lm:predict HTTP/1.1\r\nHo")
            else:
                s.sendall(
                    b"POST /v1/models/tiny_lm:predict HTTP/1.1\r\n"
                    b'Host: x\r\nContent-Length: 1000\r\n\r\n{"inst'
                )
            stalled.append(s)
        time.sleep(0.3)
        _still_serves(labelled_server)  # 31 connections: under the cap
        extra = [
            socket.create_connection(("127.0.0.1", port), timeout=10)
            for _ in range(15)
        ]
        refused = 0
        for s in extra:
            data = s.recv(4096)
            if data.startswith(b"HTTP/1.1 503"):
                assert b'{"error": "server overloaded' in data
                refused += 1
            s.close()
        assert refused >= 5
        t0 = time.monotonic()
        answers = []
        for s in stalled:
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            answers.append(data)
        assert time.monotonic() - t0 < 10
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2]
        assert all(b"--read-timeout" in a for a in answers)
    finally:
        for s in stalled:
            s.close()
    _still_serves(labelled_server)


# 8 ---------------------------------------------------------------------
def test_request_over_the_token_budget_is_split(labelled_server):
    """64 sentences of 150 tokens pad to 64 x 152 > 8,192 (the export's
    max_tokens): the server splits the call, and each row's answer is
    the one it gets alone."""
    words = "the cat sees a ball . a dog likes some food .".split()
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(words, 150 - i % 7)) for i in range(64)]
    status, out = http(
        "POST", _url(labelled_server, ":predict"), {"instances": sentences}
    )
    assert status == 200, out
    for i in (0, 1, 33, 63):
        status, one = http(
            "POST",
            _url(labelled_server, ":predict"),
            {"instances": [sentences[i]]},
        )
        assert status == 200
        got, want = out["predictions"][i], one["predictions"][0]
        assert got["tokens"][: want["lengths"]] == want["tokens"]
        np.testing.assert_allclose(
            got["token_logprobs"][: want["lengths"]],
            want["token_logprobs"],
            atol=1e-5,
        )
        assert got["ln_prob"] == pytest.approx(want["ln_prob"], abs=1e-3)


def test_budget_splits_in_order_and_names_the_limit():
    from keras_rnnlm.serving.engine import Budget
    from keras_rnnlm.serving.errors import ServingError

    budget = Budget(max_rows=4, max_tokens=64, buckets=((None, 8),))
    steps = np.array([3, 9, 16, 2, 2, 2, 2, 2])
    chunks = budget.chunks(steps)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(steps)
    for a, b in chunks:
        assert budget.fits(b - a, steps[a:b].max())
    with pytest.raises(ServingError, match="token budget of 64"):
        budget.chunks(np.array([3, 65]))


# 9 ---------------------------------------------------------------------
def test_status_codes_and_paths_as_tf_serving(labelled_server):
    from keras_rnnlm.serving.errors import HTTP_STATUS

    assert HTTP_STATUS["DEADLINE_EXCEEDED"] == 504
    assert HTTP_STATUS["RESOURCE_EXHAUSTED"] == 429
    assert HTTP_STATUS["UNAVAILABLE"] == 503
    root = f"http://127.0.0.1:{labelled_server.rest_port}"
    status, out = http("GET", root + "/v1/models")
    assert (status, out) == (400, {"error": "Missing model name in request."})
    status, out = http("GET", root + "/v1/models/")
    assert status == 400 and "Malformed request" in out["error"]
    status, out = http("GET", root + "/nothing/here")
    assert status == 404 and set(out) == {"error"}
    status, out = http("POST", root + "/v1/models/tiny_lm", {"instances": []})
    assert status == 400
    assert out["error"] == "Malformed request: POST /v1/models/tiny_lm"
    status, out = http("GET", root + "/V1/MODELS/tiny_lm")  # (?i)
    assert status == 200
    # A body over --max-body-bytes: RESOURCE_EXHAUSTED, 413 (documented).
    big = {"instances": ["a" * 70000]}
    status, out = http("POST", _url(labelled_server, ":predict"), big)
    assert status == 413 and "--max-body-bytes" in out["error"]
    # Unknown signature over REST: FAILED_PRECONDITION -> 400.
    body = {"signature_name": "nope", "instances": ["a"]}
    status, out = http("POST", _url(labelled_server, ":predict"), body)
    assert (status, out) == (
        400,
        {"error": 'Serving signature key "nope" not found.'},
    )


def test_every_call_is_logged_with_its_latency(labelled_server):
    import re

    import grpc
    from tensorflow_serving.apis import get_model_metadata_pb2
    from tensorflow_serving.apis import get_model_status_pb2
    from tensorflow_serving.apis import model_service_pb2_grpc

    http("GET", _url(labelled_server, "/versions/1"))
    with grpc_channel(labelled_server) as channel:
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "tiny_lm"
        model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(req)
        meta = get_model_metadata_pb2.GetModelMetadataRequest()
        meta.model_spec.name = "other"
        meta.metadata_field.append("signature_def")
        with pytest.raises(grpc.RpcError):
            _stub(channel).GetModelMetadata(meta)
    time.sleep(0.3)
    log = labelled_server.log()
    ms = r" \d+\.\dms"
    assert re.search(
        r"rest GET /v1/models/tiny_lm/versions/1 model=tiny_lm status=OK "
        r"http=200" + ms,
        log,
    ), log[-2000:]
    assert re.search(r"grpc GetModelStatus .*status=OK" + ms, log)
    assert re.search(r"grpc GetModelMetadata .*status=NOT_FOUND" + ms, log)
