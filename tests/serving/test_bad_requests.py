"""Bad requests get a 4xx (gRPC: INVALID_ARGUMENT...) and the server goes
on answering."""

import numpy as np
import pytest
from serving_client import grpc_predict
from serving_client import http
from serving_client import rest_url

GOOD = {"instances": ["the cat sees a ball ."]}


def _still_serves(server):
    status, out = http("POST", rest_url(server, ":predict"), GOOD)
    assert status == 200 and out["predictions"][0]["num_tokens"] == 7


@pytest.mark.parametrize(
    "body, status, message",
    [
        (b"{bad json", 400, "JSON Parse error"),
        (b"[1, 2]", 400, "JSON object"),
        ({"signature_name": "nope", "instances": ["a"]}, 400, "not found"),
        ({"instances": [1, 2]}, 400, "expected a string"),
        (
            {
                "signature_name": "score_ids",
                "inputs": {"token_ids": [["a"]], "lengths": [1]},
            },
            400,
            "expected int values",
        ),
        (
            {
                "signature_name": "score_ids",
                "inputs": {"token_ids": [[1, 2]], "lengths": [2.5]},
            },
            400,
            "expected int values",
        ),
        (
            {
                "signature_name": "score_ids",
                "inputs": {"token_ids": [[1, 10**6]], "lengths": [2]},
            },
            400,
            "vocabulary size",
        ),
        (
            {
                "signature_name": "score_ids",
                "inputs": {"token_ids": [[1, 2]], "lengths": [3]},
            },
            400,
            "lengths exceed",
        ),
        ({"inputs": "the cat"}, 400, "must have rank 1"),  # rank 0
        ({"inputs": [["the cat"]]}, 400, "must have rank 1"),  # rank 2
        ({"inputs": {"sentences": []}}, 400, "empty batch"),
        ({"instances": []}, 400, "empty batch"),
        ({"instances": ["a"], "inputs": ["a"]}, 400, "exactly one of"),
        ({"inputs": [["a"], ["a", "b"]]}, 400, "sentences"),  # ragged
        (
            {"signature_name": "initial_state", "inputs": {"batch_size": 0}},
            400,
            "batch_size",
        ),
        ({"instances": ["a"] * 65}, 400, "too many rows"),
        ({"instances": ["a " * 201]}, 400, "max-sentence-tokens"),
        ({"instances": ["a" * 70000]}, 413, "max-body-bytes"),
        ({"instances": [{"b64": "!!"}]}, 400, "base64"),
    ],
)
def test_rest_bad_request(server, body, status, message):
    got, out = http("POST", rest_url(server, ":predict"), body)
    assert (got, set(out)) == (status, {"error"}), out
    assert message in out["error"]
    _still_serves(server)


def test_rest_not_found(server):
    assert http("GET", rest_url(server, "/versions/7"))[0] == 404
    url = f"http://127.0.0.1:{server.rest_port}/v1/models/other:predict"
    status, out = http("POST", url, GOOD)
    assert status == 404 and "Servable not found" in out["error"]
    status, out = http("POST", rest_url(server, "/versions/7:predict"), GOOD)
    assert status == 404
    status, out = http("POST", rest_url(server, ":classify"), GOOD)
    assert status == 501
    # b64 strings are decoded as TF Serving does.
    b64 = {"instances": [{"b64": "dGhlIGNhdA=="}]}  # "the cat"
    status, out = http("POST", rest_url(server, ":predict"), b64)
    assert status == 200 and out["predictions"][0]["num_tokens"] == 3
    status, out = http("POST", rest_url(server, "/versions/1:predict"), GOOD)
    assert status == 200


def test_grpc_bad_requests(server):
    import grpc

    cases = [
        ("score_text", {"sentences": np.array(b"the cat", dtype=object)}),
        ("score_text", {"sentences": np.array([[b"a"]], dtype=object)}),
        ("score_text", {"sentences": np.array([], dtype=object)}),
        ("score_text", {"sentences": np.array([1, 2], np.int32)}),
        ("score_text", {"prefixes": np.array([b"a"], dtype=object)}),
        (
            "score_ids",
            {
                "token_ids": np.array([[1, 2]], np.int32),
                "lengths": np.array([5], np.int32),
            },
        ),
    ]
    for signature, inputs in cases:
        with pytest.raises(grpc.RpcError) as e:
            grpc_predict(server, signature, inputs)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (
            signature,
            inputs,
            e.value.details(),
        )
    # An unknown signature: FAILED_PRECONDITION, as TF Serving answers.
    with pytest.raises(grpc.RpcError) as e:
        grpc_predict(server, "nope", {"sentences": np.array([b"a"], object)})
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == 'Serving signature key "nope" not found.'
    out = grpc_predict(
        server, "score_text", {"sentences": np.array([b"the cat"], object)}
    )
    assert out["num_tokens"].tolist() == [3]
    _still_serves(server)


def test_access_log_has_one_line_per_request(server, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="keras_rnnlm.serving.access"):
        grpc_predict(
            server, "score_text", {"sentences": np.array([b"a"], object)}
        )
    assert any("grpc Predict" in r.getMessage() for r in caplog.records)
