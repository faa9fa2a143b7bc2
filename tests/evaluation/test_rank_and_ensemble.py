import math

import numpy as np

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


def test_ensemble_of_identical_models_equals_member(tmp_path):
    ids = np.random.default_rng(1).integers(0, 30, 300)
    cfg = _cfg("tied")
    paths = []
    for seed in (0, 1):
        m = build_language_model(cfg, 30, 2, seed=seed)
        paths.append(str(tmp_path / f"m{seed}.weights.h5"))
        m.save_weights(paths[-1])
    same = ensemble_evaluate([(cfg, paths[0])] * 2, 30, ids, 2, 10)
    assert math.isclose(same["ppl"], same["member_ppl"][0], rel_tol=1e-6)
    mixed = ensemble_evaluate([(cfg, p) for p in paths], 30, ids, 2, 10)
    # Jensen: the mixture's NLL is at most the mean of the members' NLLs.
    mean_nll = np.mean([math.log(p) for p in mixed["member_ppl"]])
    assert mixed["nll"] <= mean_nll + 1e-9
    assert mixed["tokens"] == same["tokens"]


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
