"""REST and gRPC answers equal the Scorer (and the in-process signature),
for every signature, in the row and the columnar format."""

import numpy as np
import pytest
from serving_client import grpc_predict
from serving_client import http
from serving_client import rest_initial_state
from serving_client import rest_url

from keras_rnnlm.scoring import Scorer

TOL = 1e-4
SENTENCES = ["the cat sees a ball .", "a zebra likes the okapi .", "", "the"]
PREFIXES = ["the cat", "", "zebra"]


@pytest.fixture(scope="module")
def scorer(served_base):
    return Scorer.from_run(served_base[0])


def _check_scores(got, scorer, sentences, text=True):
    """got: one dict per sentence (row format, lists); ``text``: the
    tokens are the words as written (score_ids shows ``<unk>``)."""
    for g, ref in zip(got, scorer.score_sentences(sentences), strict=True):
        n = int(g["lengths"])
        assert n == ref.num_tokens == int(g["num_tokens"])
        assert int(g["num_oov"]) == ref.num_oov
        np.testing.assert_allclose(
            g["token_logprobs"][:n], ref.ln_probs, atol=TOL
        )
        assert float(g["ln_prob"]) == pytest.approx(ref.ln_prob, abs=1e-3)
        if text:
            tokens = [
                t.decode() if isinstance(t, bytes) else t for t in g["tokens"]
            ]
            assert tokens[:n] == ref.tokens
        assert [bool(x) for x in g["token_is_oov"][:n]] == ref.oov


def _rows(columns):
    n = len(next(iter(columns.values())))
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


def _ids(scorer, sentences):
    rows = [scorer.encode(s)[1].tolist() for s in sentences]
    width = max(len(r) for r in rows)
    return [r + [0] * (width - len(r)) for r in rows], [len(r) for r in rows]


def _next_token_reference(scorer, prefix):
    tokens = scorer.vocab.tokens
    rs = scorer.score_sentences([f"{prefix} {t}" for t in tokens], eos=False)
    return np.array([r.ln_probs[-1] for r in rs])


@pytest.mark.parametrize("fmt", ["row", "columnar"])
def test_rest_scoring_signatures(server, scorer, fmt):
    url = rest_url(server, ":predict")
    ids, lengths = _ids(scorer, SENTENCES)
    for signature, inputs in (
        ("score_text", {"sentences": SENTENCES}),
        ("serving_default", {"sentences": SENTENCES}),
        ("score_ids", {"token_ids": ids, "lengths": lengths}),
    ):
        if fmt == "row":
            body = {"signature_name": signature, "instances": _rows(inputs)}
            status, out = http("POST", url, body)
            assert status == 200, out
            got = out["predictions"]
        else:
            body = {"signature_name": signature, "inputs": inputs}
            status, out = http("POST", url, body)
            assert status == 200, out
            got = _rows(out["outputs"])
        _check_scores(got, scorer, SENTENCES, signature != "score_ids")
    # A single-input signature takes bare values too.
    status, out = http("POST", url, {"instances": SENTENCES[:2]})
    assert status == 200
    _check_scores(out["predictions"], scorer, SENTENCES[:2])


@pytest.mark.parametrize("fmt", ["row", "columnar"])
def test_rest_next_token_and_streaming(server, scorer, fmt):
    url = rest_url(server, ":predict")

    def predict(signature, inputs):
        if fmt == "row":
            body = {"signature_name": signature, "instances": _rows(inputs)}
            status, out = http("POST", url, body)
            assert status == 200, out
            rows = out["predictions"]
            return {k: [r[k] for r in rows] for k in rows[0]}
        body = {"signature_name": signature, "inputs": inputs}
        status, out = http("POST", url, body)
        assert status == 200, out
        return out["outputs"]

    out = predict("next_token_logprobs", {"prefixes": PREFIXES})
    for i, prefix in enumerate(PREFIXES):
        want = _next_token_reference(scorer, prefix)
        np.testing.assert_allclose(out["log_probs"][i], want, atol=TOL)
        assert out["top_k_ids"][i][0] == int(np.argmax(want))
        assert out["top_k_tokens"][i][0] == scorer.vocab.tokens[np.argmax(want)]
    state, bos = rest_initial_state(url)
    text = "a dog likes the tree ."
    ids = scorer.vocab.encode(text.split()).tolist()
    feed = [bos + ids[:-1]]
    out = predict("step", {"token_ids": feed, **state})
    logp = np.array(out["log_probs"])[0]
    got = logp[np.arange(len(ids)), ids]
    _, seg = scorer.continue_(scorer.begin(), text)
    np.testing.assert_allclose(got, seg.ln_probs, atol=TOL)


def test_grpc_every_signature(server, scorer):
    sents = np.array([s.encode() for s in SENTENCES], dtype=object)
    for signature in ("score_text", "serving_default"):
        out = grpc_predict(server, signature, {"sentences": sents})
        _check_scores(_rows(out), scorer, SENTENCES)
    ids, lengths = _ids(scorer, SENTENCES)
    out = grpc_predict(
        server,
        "score_ids",
        {
            "token_ids": np.array(ids, np.int32),
            "lengths": np.array(lengths, np.int32),
        },
    )
    _check_scores(_rows(out), scorer, SENTENCES, text=False)
    prefixes = np.array([p.encode() for p in PREFIXES], dtype=object)
    out = grpc_predict(server, "next_token_logprobs", {"prefixes": prefixes})
    for i, prefix in enumerate(PREFIXES):
        want = _next_token_reference(scorer, prefix)
        np.testing.assert_allclose(out["log_probs"][i], want, atol=TOL)
    state = grpc_predict(
        server, "initial_state", {"batch_size": np.array(1, np.int32)}
    )
    bos = state.pop("bos_ids")
    text = "a dog likes the tree ."
    ids = scorer.vocab.encode(text.split()).tolist()
    feed = np.array([[int(bos[0]), *ids[:-1]]], np.int32)
    out = grpc_predict(server, "step", {"token_ids": feed, **state})
    got = out["log_probs"][0][np.arange(len(ids)), ids]
    _, seg = scorer.continue_(scorer.begin(), text)
    np.testing.assert_allclose(got, seg.ln_probs, atol=TOL)


def test_status_and_metadata_rest_and_grpc(server):
    import grpc
    from tensorflow_serving.apis import get_model_metadata_pb2
    from tensorflow_serving.apis import get_model_status_pb2
    from tensorflow_serving.apis import model_service_pb2_grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    status, out = http("GET", rest_url(server))
    assert status == 200
    assert out["model_version_status"] == [
        {
            "version": "1",
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }
    ]
    status, out = http("GET", rest_url(server, "/versions/1"))
    assert status == 200
    status, out = http("GET", rest_url(server, "/metadata"))
    assert status == 200
    sigs = out["metadata"]["signature_def"]["signature_def"]
    assert set(sigs) >= {"serving_default", "score_text", "step"}
    text = sigs["score_text"]["inputs"]["sentences"]
    assert text["dtype"] == "DT_STRING"
    assert out["model_spec"] == {
        "name": "tiny_lm",
        "signature_name": "",
        "version": "1",
    }
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        models = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "tiny_lm"
        r = models.GetModelStatus(request, timeout=30)
        (v,) = r.model_version_status
        assert v.version == 1 and v.state == v.AVAILABLE
        predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        request.model_spec.name = "tiny_lm"
        request.metadata_field.append("signature_def")
        r = predictions.GetModelMetadata(request, timeout=30)
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        r.metadata["signature_def"].Unpack(sig_map)
        assert set(sig_map.signature_def) == set(sigs)
