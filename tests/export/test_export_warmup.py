"""The TF Serving warm-up file written at export
(``assets.extra/tf_serving_warmup_requests``): PredictionLog records that
cover every signature and the time buckets up to the export's token
budget, each of which the loaded SavedModel runs."""

import json
import os

import numpy as np
import pytest

from keras_rnnlm.export.warmup import MAX_RECORDS
from keras_rnnlm.export.warmup import warmup_lengths
from keras_rnnlm.scoring.scorer import TIME_BUCKETS
from keras_rnnlm.scoring.scorer import bucket_length

COARSE = ((64, 8), (128, 16), (None, 64))


@pytest.mark.parametrize("buckets", [TIME_BUCKETS, COARSE])
@pytest.mark.parametrize("limit", [8192, 1000, 640, 256, 100, 4])
def test_warmup_lengths_cover_the_buckets_up_to_the_limit(buckets, limit):
    got = warmup_lengths(buckets, limit)
    ends = sorted({bucket_length(t, buckets) for t in range(1, limit + 1)})
    ends = [e for e in ends if e <= limit]
    assert got == sorted(set(got)) and set(got) <= set(ends)
    assert got[-1:] == ends[-1:]  # the longest a one-row call can have
    assert [e for e in ends if e <= 256] == [e for e in got if e <= 256]
    # Beyond 256: at most doubling from one to the next.
    assert all(b <= 2 * a for a, b in zip(got, got[1:]))
    assert warmup_lengths(buckets, 3) == []


def _small_scorer():
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    vocab = build_vocabulary([["the", "cat", "sees", "a", "ball", "."]])
    cfg = ModelConfig(
        embedding_dim=6,
        hidden_sizes=[6],
        context={"weighting": "uniform", "window": 3, "dim": 4},
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    return Scorer(model, vocab)


def _records(path):
    """The raw records, parsed as the protos TF Serving reads."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    logs = [
        prediction_log_pb2.PredictionLog.FromString(r)
        for r in tf.data.TFRecordDataset(path).as_numpy_iterator()
    ]
    assert all(log.WhichOneof("log_type") == "predict_log" for log in logs)
    return [log.predict_log.request for log in logs]


def _replay(export_dir, requests):
    """Runs each request on the loaded SavedModel's signature; returns
    ``{signature: [(inputs, outputs), ...]}``."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    model = tf.saved_model.load(export_dir)
    out = {}
    for request in requests:
        fn = model.signatures[request.model_spec.signature_name]
        inputs = {
            k: tf.constant(tf.make_ndarray(v))
            for k, v in request.inputs.items()
        }
        result = {k: v.numpy() for k, v in fn(**inputs).items()}
        out.setdefault(request.model_spec.signature_name, []).append(
            (inputs, result)
        )
    return out


def _check(export_dir, max_length, rows):
    from keras_rnnlm.export import ENDPOINTS
    from keras_rnnlm.export.warmup import read_warmup_file

    path = os.path.join(
        export_dir, "assets.extra", "tf_serving_warmup_requests"
    )
    requests = _records(path)
    assert 0 < len(requests) <= MAX_RECORDS
    with open(os.path.join(export_dir, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    assert meta["warmup"]["records"] == len(requests)
    assert len(read_warmup_file(path)) == len(requests)
    ran = _replay(export_dir, requests)
    assert set(ran) == set(ENDPOINTS)
    want = warmup_lengths(TIME_BUCKETS, max_length)
    assert meta["warmup"]["lengths"] == want
    for sig in ("score_text", "score_ids"):
        # One row at every warm-up length, padded to exactly that length.
        one = sorted(
            int(r["num_tokens"][0])
            for i, r in ran[sig]
            if len(r["lengths"]) == 1
        )
        assert one == want
        batched = {len(r["lengths"]) for _, r in ran[sig]}
        assert batched == {1, rows}
    for _, r in ran["next_token_logprobs"]:
        assert np.isfinite(r["log_probs"]).all()
    steps = sorted(i["token_ids"].shape[1] for i, _ in ran["step"])
    assert steps[0] == 1 and steps[-1] == max_length
    # generate: every sampler, one row and the multi-row batch
    samplers = {i["sampler"].numpy().decode() for i, _ in ran["generate"]}
    assert samplers == {"greedy", "random", "top_k", "top_p"}
    assert {len(r["text"]) for _, r in ran["generate"]} == {1, rows}
    return requests


# The records beyond 256 steps are written and replayed by the code that
# test_default_warmup_stops_at_256_steps runs in the default run; their
# lengths are test_warmup_lengths_cover_the_buckets_up_to_the_limit's.
@pytest.mark.slow
def test_export_writes_a_warmup_file_that_replays(tmp_path):
    from keras_rnnlm.export import export_saved_model

    scorer = _small_scorer()
    path = export_saved_model(
        scorer,
        str(tmp_path / "lm" / "1"),
        max_batch_size=8,
        max_tokens=640,
        warmup_max_length=10_000,
    )
    # Bucket ends to 256, then 512 and 640 (the longest within 640 tokens).
    _check(path, 640, rows=8)


@pytest.mark.slow
def test_default_warmup_stops_at_256_steps(tmp_path):
    """By default the file reaches 256 steps, not the token budget, so
    that a version loads in seconds."""
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.export.warmup import DEFAULT_WARMUP_MAX_LENGTH

    assert DEFAULT_WARMUP_MAX_LENGTH == 256
    path = export_saved_model(
        _small_scorer(), str(tmp_path / "lm" / "1"), max_batch_size=8
    )
    _check(path, 256, rows=8)


@pytest.mark.slow
def test_default_limits_warmup_replays(tmp_path):
    """The file of the default limits reaching the whole token budget
    (8192 tokens, 32-row batches): every request succeeds on the loaded
    model."""
    from keras_rnnlm.export import export_saved_model

    path = export_saved_model(
        _small_scorer(), str(tmp_path / "lm" / "1"), warmup_max_length=8192
    )
    requests = _check(path, 8192, rows=32)
    assert len(requests) < MAX_RECORDS


@pytest.mark.slow
def test_cli_export_without_warmup_file(tiny_run, tmp_path):
    from keras_rnnlm.cli import main

    out = tmp_path / "m" / "1"
    assert main(["export", tiny_run, str(out), "--no-warmup-file"]) == 0
    assert not (out / "assets.extra").exists()
    with open(out / "assets" / "keras_rnnlm.json") as f:
        assert json.load(f)["warmup"] is None
    out = tmp_path / "m" / "2"
    args = ["export", tiny_run, str(out), "--warmup-max-length", "100"]
    assert main(args) == 0
    with open(out / "assets" / "keras_rnnlm.json") as f:
        assert json.load(f)["warmup"]["lengths"][-1] == 96
