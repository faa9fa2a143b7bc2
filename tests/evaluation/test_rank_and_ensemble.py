import math
import os

import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.evaluation.ensemble import ensemble_evaluate
from keras_rnnlm.evaluation.rank import log_prob_matrix
from keras_rnnlm.evaluation.rank import numerical_rank
from keras_rnnlm.models import build_language_model


def test_rank_of_constructed_low_rank_log_softmax():
    rng = np.random.default_rng(0)
    n, v, d = 60, 40, 5
    h, e = rng.normal(size=(n, d)), rng.normal(size=(v, d))
    logits = h @ e.T
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    # h E^T has rank d; the row normaliser adds one direction.
    assert numerical_rank(logits) == d
    assert numerical_rank(logp) == d + 1
    assert numerical_rank(rng.normal(size=(n, v))) == v


def _cfg(head, comps=None, init_range=0.1):
    return ModelConfig(
        embedding_dim=4,
        hidden_sizes=[8, 4],
        head=head,
        mixture_components=comps,
        init_range=init_range,
    )


def test_softmax_bottleneck_tied_vs_mos():
    ids = np.random.default_rng(0).integers(0, 30, 400)
    ranks = {}
    for head, comps in (("tied", None), ("mos", 4)):
        # a wide init so that the untrained model's outputs vary
        cfg = _cfg(head, comps, init_range=2.0)
        model = build_language_model(cfg, 30, 2, seed=0)
        a = log_prob_matrix(model, ids, 100, bptt=10)
        assert a.shape == (100, 30)
        ranks[head] = numerical_rank(a)
    assert ranks["tied"] <= 4 + 2  # last layer 4 + bias + normaliser
    assert ranks["mos"] > 6


def _np_log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_ensemble_averages_probabilities(tmp_path):
    """Against an independent computation: each member run once over its
    whole streams (state carried inside one call, not across windows),
    its token log-probs mixed as log((p0 + p1) / 2). Averaging the
    log-probs instead would give the mean of the members' NLLs, which the
    mixture beats strictly (Jensen) when the members differ."""
    ids = np.random.default_rng(1).integers(0, 30, 301)
    cfg = _cfg("tied", init_range=1.0)  # members that differ visibly
    paths, token_lp = [], []
    streams = ids[:300].reshape(2, 150)
    x, y = streams[:, :-1], streams[:, 1:]
    for seed in (0, 1):
        m = build_language_model(cfg, 30, 2, seed=seed)
        paths.append(str(tmp_path / f"m{seed}.weights.h5"))
        m.save_weights(paths[-1])
        lp = _np_log_softmax(ops.convert_to_numpy(m(x, training=False)))
        token_lp.append(np.take_along_axis(lp, y[..., None], -1)[..., 0])
    member_nll = [-t.mean() for t in token_lp]
    expect = -(np.logaddexp(*token_lp) - math.log(2)).mean()

    mixed = ensemble_evaluate([(cfg, p) for p in paths], 30, ids, 2, 10)
    assert mixed["tokens"] == y.size
    np.testing.assert_allclose(mixed["nll"], expect, rtol=1e-5)
    np.testing.assert_allclose(
        [math.log(p) for p in mixed["member_ppl"]], member_nll, rtol=1e-5
    )
    assert mixed["nll"] < np.mean(member_nll) - 1e-3
    same = ensemble_evaluate([(cfg, paths[0])] * 2, 30, ids, 2, 10)
    np.testing.assert_allclose(same["nll"], member_nll[0], rtol=1e-5)


def test_log_prob_matrix_rows_are_the_contexts_log_softmax():
    """Each window's real (unpadded) positions, batch-major, in stream
    order; compared with the log-softmax of one whole-stream pass (state
    carried inside the call rather than across windows)."""
    ids = np.random.default_rng(2).integers(0, 30, 45)
    model = build_language_model(_cfg("tied", init_range=1.0), 30, 2, seed=0)
    got = log_prob_matrix(model, ids, 100, bptt=10)
    streams = ids[:44].reshape(2, 22)
    full = _np_log_softmax(
        ops.convert_to_numpy(model(streams[:, :-1], training=False))
    )
    expect = np.concatenate(
        [full[:, t : t + 10].reshape(-1, 30) for t in range(0, 21, 10)]
    )
    assert got.shape == (42, 30)
    np.testing.assert_allclose(got, expect, atol=1e-5)
    np.testing.assert_allclose(
        log_prob_matrix(model, ids, 15, bptt=10), expect[:15], atol=1e-5
    )


def test_rank_of_float32_log_softmax_with_a_large_mean_direction():
    """As a trained model's log-probabilities: float32 logits with a bias,
    entries around -10. The rank is d + bias + normaliser; a tolerance
    scaled by the largest singular value (the mean direction) undercounts
    it."""
    rng = np.random.default_rng(0)
    n, v, d = 1500, 600, 20
    h = rng.normal(size=(n, d)).astype(np.float32)
    # directions of decreasing strength, as in a trained model's spectrum
    scales = np.logspace(-0.5, -3.5, d)
    e = (scales * rng.normal(size=(v, d))).astype(np.float32)
    b = rng.normal(-3.0, 2.0, size=v).astype(np.float32)
    logits = (h @ e.T + b).astype(np.float64)  # float32 products
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert numerical_rank(logp) == d + 2
    s = np.linalg.svd(logp, compute_uv=False)
    old_tol = s[0] * max(n, v) * np.finfo(np.float32).eps
    assert (s > old_tol).sum() < d + 2  # what the old default reported


def test_ensemble_of_a_run_without_weights_is_a_clear_error(tiny_run, tmp_path):
    import shutil

    from keras_rnnlm.evaluation.ensemble import ensemble_evaluate_runs

    for name in ("config.json", "vocab.json"):
        shutil.copy(os.path.join(tiny_run, name), tmp_path / name)
    with pytest.raises(FileNotFoundError, match="not finished an epoch"):
        ensemble_evaluate_runs([tiny_run, str(tmp_path)])
