"""`keras-rnnlm serve` serves a CBOW context model (arXiv:2106.08927): REST
scoring and streaming (the last K word ids carried as a ``step`` state,
through JSON) equal the in-Keras Scorer."""

import numpy as np
import pytest
from serving_client import http
from serving_client import rest_initial_state

TOL = 1e-4
WINDOW = 4


def _cbow_scorer():
    """An untrained CBOW-LSTM (wide weights: the context matters)."""
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import build_vocabulary
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    words = "the cat a dog my friend sees likes eats ball some food tree ."
    vocab = build_vocabulary([words.split()])
    cfg = ModelConfig(
        embedding_dim=8,
        hidden_sizes=[8],
        init_range=0.6,
        context={"weighting": "uniform", "window": WINDOW, "dim": 6},
    )
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=5)
    return Scorer(model, vocab)


@pytest.mark.slow  # an export and a server start: ~20 s on 2 cores
def test_rest_round_trip_of_a_cbow_export(tmp_path):
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.serving import Server

    scorer = _cbow_scorer()
    base = tmp_path / "cbow_lm"
    export_saved_model(scorer, str(base / "1"))
    srv = Server(
        "cbow_lm",
        str(base),
        rest_port=0,
        grpc_port=0,
        batch_timeout_s=0.0,
        poll_seconds=0,
        drain_seconds=1,
    )
    srv.start()
    try:
        url = f"http://127.0.0.1:{srv.rest_port}/v1/models/cbow_lm:predict"
        sents = ["the cat sees a ball . my friend eats some food .", "", "a"]
        status, out = http(
            "POST",
            url,
            {
                "signature_name": "score_text",
                "instances": [{"sentences": s} for s in sents],
            },
        )
        assert status == 200, out
        for got, ref in zip(
            out["predictions"], scorer.score_sentences(sents), strict=True
        ):
            n = got["lengths"]
            assert n == ref.num_tokens
            np.testing.assert_allclose(
                got["token_logprobs"][:n], ref.ln_probs, atol=TOL
            )
        # Streaming in three requests, the states (window ids included)
        # going back and forth as JSON.
        state, bos = rest_initial_state(url)
        assert state["state_0_0"] == [[-1.0] * WINDOW]
        text = "a dog likes the tree . the cat eats some food ."
        ids = scorer.vocab.encode(text.split()).tolist()
        feed = bos + ids[:-1]
        got = []
        for lo, hi in ((0, 3), (3, 4), (4, len(feed))):
            status, out = http(
                "POST",
                url,
                {
                    "signature_name": "step",
                    "inputs": {"token_ids": [feed[lo:hi]], **state},
                },
            )
            assert status == 200, out
            out = out["outputs"]
            logp = np.array(out.pop("log_probs"))[0]
            got.extend(logp[np.arange(hi - lo), ids[lo:hi]])
            state = out
            assert state["state_0_0"][0][-1] == feed[hi - 1]
        _, seg = scorer.continue_(scorer.begin(), text)
        np.testing.assert_allclose(got, seg.ln_probs, atol=TOL)
        # A window holding a non-id is a 400, and the server goes on.
        state["state_0_0"] = [[0.5] * WINDOW]
        status, out = http(
            "POST",
            url,
            {
                "signature_name": "step",
                "inputs": {"token_ids": [[1]], **state},
            },
        )
        assert status == 400 and "whole numbers" in out["error"], out
    finally:
        srv.stop()
