"""Parity of an export with the in-Keras Scorer through the TensorFlow-only
client (``export/examples/tf_only_client.py --all``), run in a fresh
process that must not import keras_rnnlm.

Tests import it as ``from client_parity import assert_client_parity``
(pytest puts ``tests/export/`` on ``sys.path``).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLIENT = os.path.join(ROOT, "export", "examples", "tf_only_client.py")
TOL = 1e-4  # max abs difference per token, natural log


def run_client(path, spec, tmp_path):
    """The client's ``--all`` output (a dict) for the inputs ``spec`` on
    the export at ``path``; asserts that it ran without keras_rnnlm."""
    spec_path = tmp_path / "inputs.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, CLIENT, path, "--all", str(spec_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=str(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["keras_rnnlm_imported"] is False
    return out


def assert_client_parity(path, scorer, sents, prefixes, stream_text, tmp_path):
    """Every signature of the export at ``path``, run by the client, within
    ``TOL`` of ``scorer``: ``score_text`` and ``score_ids`` on ``sents``
    (token log-probs, totals, OOV counts), ``next_token_logprobs`` after
    each of ``prefixes`` (log-probs and the top id), and ``initial_state``
    + ``step`` over ``stream_text`` in two pieces. Returns ``(out, ref)``:
    the client's output and the Scorer's results on ``sents``."""
    ref = scorer.score_sentences(sents)
    ids_rows = [scorer.encode(s)[1].tolist() for s in sents]
    width = max(len(r) for r in ids_rows)
    spec = {
        "sentences": sents,
        "ids": [r + [0] * (width - len(r)) for r in ids_rows],
        "lengths": [len(r) for r in ids_rows],
        "prefixes": prefixes,
        "stream_ids": scorer.vocab.encode(stream_text.split()).tolist(),
    }
    out = run_client(path, spec, tmp_path)
    for name in ("score_text", "score_ids"):
        got = out[name]
        for i, r in enumerate(ref):
            n = got["lengths"][i]
            assert n == r.num_tokens
            np.testing.assert_allclose(
                got["token_logprobs"][i][:n], r.ln_probs, atol=TOL
            )
            assert got["ln_prob"][i] == pytest.approx(r.ln_prob, abs=1e-3)
            assert got["log10_prob"][i] == pytest.approx(r.log10_prob, abs=1e-3)
            assert got["num_oov"][i] == r.num_oov
    # next_token_logprobs == the scorer's distribution after the prefix.
    for i, prefix in enumerate(prefixes):
        candidates = [f"{prefix} {t}" for t in scorer.vocab.tokens]
        want = [
            r.ln_probs[-1]
            for r in scorer.score_sentences(candidates, eos=False)
        ]
        got = out["next_token_logprobs"]["log_probs"][i]
        np.testing.assert_allclose(got, want, atol=TOL)
        top = out["next_token_logprobs"]["top_k_ids"][i]
        assert top[0] == int(np.argmax(want))
    # initial_state + step in two pieces (the client) == Scorer.continue_.
    _, seg = scorer.continue_(scorer.begin(), stream_text)
    np.testing.assert_allclose(out["step"], seg.ln_probs, atol=TOL)
    return out, ref
