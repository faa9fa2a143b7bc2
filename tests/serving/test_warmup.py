"""Warm-up of a version before it is served: every time bucket a request
can reach, and TF Serving's ``assets.extra/tf_serving_warmup_requests``
replayed (a bad file fails that version; the served one stays)."""

import json
import os
import shutil

import numpy as np
import pytest
from serving_client import copy_base
from serving_client import http
from serving_client import polling_server
from serving_client import rest_url
from serving_client import wait_until

MAX_SENTENCE_TOKENS = 200


def _manager(base, events, **kwargs):
    from keras_rnnlm.serving import Limits
    from keras_rnnlm.serving.servables import ModelManager

    limits = Limits(max_sentence_tokens=MAX_SENTENCE_TOKENS)
    return ModelManager(
        "tiny_lm",
        base,
        poll_seconds=0,
        on_event=events.append,
        limits=limits,
        **kwargs,
    )


def _write_warmup(version_dir, logs):
    """A TF Serving warm-up file: one serialized PredictionLog a record."""
    import tensorflow as tf

    extra = os.path.join(version_dir, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    path = os.path.join(extra, "tf_serving_warmup_requests")
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


def _predict_log(signature, **inputs):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "any_name"  # ignored at warm-up, as TF Serving
    request.model_spec.signature_name = signature
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )


def _expected_buckets(version_dir):
    """Padded lengths of one sentence of up to MAX_SENTENCE_TOKENS tokens
    (+ <eos>), from the export's own metadata."""
    from keras_rnnlm.scoring.scorer import bucket_length

    with open(os.path.join(version_dir, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    buckets = [tuple(b) for b in meta["time_buckets"]]
    limit = meta["limits"]["max_tokens"]
    lengths = {
        bucket_length(t, buckets) for t in range(1, MAX_SENTENCE_TOKENS + 2)
    }
    return sorted(p for p in lengths if p <= limit)


def _base_without_warmup_file(served_base, tmp_path):
    base = copy_base(served_base, tmp_path)
    shutil.rmtree(os.path.join(base, "1", "assets.extra"), ignore_errors=True)
    return base


def test_warm_up_reaches_every_time_bucket(served_base, tmp_path):
    base = _base_without_warmup_file(served_base, tmp_path)
    events = []
    mgr = _manager(base, events)
    assert mgr.load_latest()
    records, report = mgr.warmups[1]
    expected = _expected_buckets(os.path.join(base, "1"))
    # Every bucket from the shortest to the one of the longest sentence.
    assert expected[0] == 4 and expected[-1] >= MAX_SENTENCE_TOKENS + 1
    assert report.complete and report.planned == expected
    # score_text's lengths come from the tokens the graph scored.
    assert report.reached["score_text"] == expected
    assert report.reached["next_token_logprobs"] == expected
    assert report.calls["score_text"] == len(expected)
    assert report.calls["score_ids"] == report.calls["step"] == 1
    assert records is None  # this export has no warm-up file
    line = [e for e in events if "warm-up" in e]
    assert len(line) == 1
    assert f"time buckets 4..{expected[-1]} ({len(expected)} of" in line[0]
    assert "no warm-up file" in line[0]


def test_warm_up_time_budget_is_bounded_and_logged(served_base, tmp_path):
    events = []
    base = _base_without_warmup_file(served_base, tmp_path)
    mgr = _manager(base, events, warmup_seconds=0)
    assert mgr.load_latest()  # served all the same
    _, report = mgr.warmups[1]
    assert not report.complete
    assert len(report.reached.get("score_text", [])) < len(report.planned)
    assert any("not warmed up" in e for e in events)


def test_warmup_file_is_replayed(served_base, tmp_path):
    base = copy_base(served_base, tmp_path)
    logs = [
        _predict_log("score_text", sentences=["the cat sees a ball ."]),
        _predict_log("", sentences=["a dog", ""]),  # serving_default
        _predict_log("next_token_logprobs", prefixes=["the"]),
        _predict_log(
            "score_ids",
            token_ids=np.array([[1, 2, 3]], np.int32),
            lengths=np.array([3], np.int32),
        ),
    ]
    _write_warmup(os.path.join(base, "1"), logs)
    events = []
    mgr = _manager(base, events, warmup_seconds=0)
    assert mgr.load_latest()
    records, _ = mgr.warmups[1]
    assert records == len(logs)
    assert any(
        f"{len(logs)} warm-up file records replayed" in e for e in events
    )


@pytest.mark.slow
def test_export_warmup_file_is_replayed(served_base):
    """The file ``keras-rnnlm export`` writes is replayed whole, even its
    requests longer than the server's --max-sentence-tokens."""
    import tensorflow as tf

    path = os.path.join(
        served_base[1], "1", "assets.extra", "tf_serving_warmup_requests"
    )
    count = sum(1 for _ in tf.data.TFRecordDataset(path))
    mgr = _manager(served_base[1], [], warmup_seconds=0)
    assert mgr.load_latest()
    assert mgr.warmups[1][0] == count > 0


def test_warmup_requests_really_run(served_base, tmp_path):
    """A record whose request fails in the graph (an id outside the
    vocabulary) fails the version: the requests are run, not just read."""
    base = copy_base(served_base, tmp_path)
    logs = [
        _predict_log("score_text", sentences=["the cat"]),
        _predict_log(
            "score_ids",
            token_ids=np.array([[10**6]], np.int32),
            lengths=np.array([1], np.int32),
        ),
    ]
    _write_warmup(os.path.join(base, "1"), logs)
    mgr = _manager(base, [], warmup_seconds=0)
    assert not mgr.load_latest()
    ((version, state, code, message),) = mgr.status()
    assert (version, state) == (1, "END") and code != "OK"
    assert "record 2" in message and "vocabulary" in message


@pytest.mark.parametrize(
    "content, message",
    [
        (b"this is not a TFRecord file at all", "not a valid TFRecord"),
        # Slow: a server start each (~10-15 s on 2 cores).
        pytest.param(
            "classify", "only predict_log records", marks=pytest.mark.slow
        ),
        pytest.param(
            "not_a_proto",
            "is not a tensorflow.serving.PredictionLog",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "no_signature", "no signature 'nope'", marks=pytest.mark.slow
        ),
    ],
)
def test_bad_warmup_file_fails_only_that_version(
    served_base, tmp_path, content, message
):
    """The new version with a bad file is reported (state END with the
    reason) and the previous version keeps serving."""
    import tensorflow as tf
    from tensorflow_serving.apis import classification_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    base = _base_without_warmup_file(served_base, tmp_path)
    new = os.path.join(tmp_path, "v2")
    shutil.copytree(os.path.join(base, "1"), new)
    path = _write_warmup(new, [_predict_log("score_text", sentences=["a"])])
    if isinstance(content, bytes):
        with open(path, "wb") as f:
            f.write(content)
    elif content == "classify":
        log = prediction_log_pb2.PredictionLog(
            classify_log=prediction_log_pb2.ClassifyLog(
                request=classification_pb2.ClassificationRequest()
            )
        )
        _write_warmup(new, [_predict_log("score_text", sentences=["a"]), log])
    elif content == "not_a_proto":
        with tf.io.TFRecordWriter(path) as writer:
            writer.write(b"\xff\xff\xff\xff")
    else:
        _write_warmup(new, [_predict_log("nope", sentences=["a"])])
    # No bucket warm-up (see the first test).
    with polling_server(base, warmup_seconds=0) as srv:
        os.rename(new, os.path.join(base, "2"))

        def loaded():  # version 2 seen and its load over
            states = [s for v, s, *_ in srv.models.status() if v == 2]
            return states and "LOADING" not in states

        wait_until(loaded, srv)
        status = {v: (s, c, m) for v, s, c, m in srv.models.status()}
        state, code, reason = status[2]
        assert state == "END" and code != "OK"
        assert "tf_serving_warmup_requests" in reason and message in reason
        assert status[1] == ("AVAILABLE", "OK", "")
        assert srv.models.servable().version == 1
        # The REST status shows the failure; predictions still answer.
        code, body = http("GET", rest_url(srv))
        assert code == 200
        failed = [
            s for s in body["model_version_status"] if s["version"] == "2"
        ]
        assert failed and failed[0]["state"] == "END"
        code, body = http(
            "POST", rest_url(srv, ":predict"), {"instances": ["the cat"]}
        )
        assert code == 200 and body["predictions"][0]["num_tokens"] == 3


def test_serve_refuses_a_negative_warmup_budget(tmp_path, capsys):
    from keras_rnnlm.cli import main

    code = main(
        ["serve", str(tmp_path), "--model-name", "x", "--warmup-seconds", "-1"]
    )
    assert code == 2
    assert "--warmup-seconds must be >= 0" in capsys.readouterr().err
