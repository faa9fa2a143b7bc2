"""Dynamic evaluation (keras_rnnlm.evaluation.dynamic)."""

import dataclasses
import functools
import json
import math
import os
import shutil

import keras
import numpy as np
import pytest
from keras import ops

from keras_rnnlm.cli import main
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.evaluation.dynamic import PRESETS
from keras_rnnlm.evaluation.dynamic import DynamicEvaluator
from keras_rnnlm.evaluation.dynamic import gradient_statistics
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import copy_weights

V = 11
TINY = ModelConfig(
    embedding_dim=4, hidden_sizes=[6, 4], head="tied", init_range=0.3
)
# The reference gradients use Keras's generic LSTM loop and autodiff (same
# weights), not the package's fused loop with its hand-written backward.
# (Eager GradientTape through the fused loop of a *stateful* model gave
# wrong gradients on TensorFlow; inside tf.function it is right.)
TINY_GENERIC = dataclasses.replace(TINY, cell_kwargs={"fused": False})


def _nll_sum(logits, y):
    logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    picked = ops.take_along_axis(logp, ops.expand_dims(y, -1), axis=-1)
    return -ops.sum(picked)


@functools.lru_cache(maxsize=4)
def _jax_value_and_grad(model):
    """JAX: the jitted value and gradient of ``model``'s mean token NLL
    (one compilation per model and window shape, not an op-by-op pass per
    window)."""
    import jax

    def f(tv, ntv, x, y):
        logits, new_ntv = model.stateless_call(tv, ntv, x, training=False)
        s = _nll_sum(logits, y)
        return s / float(np.prod(y.shape)), (s, new_ntv)

    return jax.jit(jax.value_and_grad(f, has_aux=True))


def _reference_grad(model, x, y):
    """(sum of token NLLs, gradients of their mean) of one window of a
    stateful model (the state is carried), computed with the backend's
    autodiff directly and log_softmax, independently of the evaluator."""
    n = float(np.size(y))
    if keras.backend.backend() == "jax":
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]
        (_, (s, new_ntv)), grads = _jax_value_and_grad(model)(tv, ntv, x, y)
        for v, value in zip(model.non_trainable_variables, new_ntv):
            v.assign(value)
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            s = _nll_sum(model(x, training=False), y)
            loss = s / n
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.convert_to_tensor(g) for g in grads]
    return float(s), [np.asarray(g, np.float64) for g in grads]


def _weights(model):
    return [
        np.asarray(ops.convert_to_numpy(v.value), np.float64)
        for v in model.trainable_variables
    ]


def _set(model, weights):
    for v, w in zip(model.trainable_variables, weights):
        v.assign(np.asarray(w, np.float32))


@pytest.mark.parametrize("variant", ["rms", "sgd"])
def test_update_rule_matches_hand_computed_steps(variant):
    """Statistics and two dynamic steps against NumPy + plain autodiff."""
    rng = np.random.default_rng(0)
    train = rng.integers(0, V, 60)
    ids = rng.integers(0, V, 7)  # two segments of 3 predicted tokens
    bptt, lr, lamb, eps = 3, 0.05, 0.5, 1e-3
    src = build_language_model(TINY, V, 1, seed=3)
    theta0 = _weights(src)

    ev = DynamicEvaluator(
        TINY,
        V,
        variant=variant,
        lr=lr,
        lamb=lamb,
        epsilon=eps,
        bptt=bptt,
        grad_batch_size=2,
        grad_batches=4,
    )
    ev.set_weights_from(src)

    # (1) RMS statistics: MS = sqrt(mean_n g_n^2), decrate = MS / mean of
    # the tensors' mean MS, clipped at 1 / lambda.
    if variant == "rms":
        info = ev.compute_statistics(train)
        assert info["batches"] == 4 and info["tokens"] == 4 * 2 * bptt
        m2 = build_language_model(TINY_GENERIC, V, 2)
        copy_weights(src, m2)
        reset_states(m2)
        streams = train.reshape(2, 30).astype("int32")
        sq = [np.zeros_like(t) for t in theta0]
        for i in range(4):
            s = slice(bptt * i, bptt * (i + 1))
            t = slice(bptt * i + 1, bptt * (i + 1) + 1)
            _, g = _reference_grad(m2, streams[:, s], streams[:, t])
            sq = [a + gi**2 for a, gi in zip(sq, g)]
        ms = [np.sqrt(a / 4) for a in sq]
        norm = np.mean([m.mean() for m in ms])
        decrate = [np.minimum(m / norm, 1 / lamb) for m in ms]
        assert any((m / norm > 1 / lamb).any() for m in ms)  # clip is hit
        for got, want in zip(ev.ms, ms):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-8)

    # (2) Two segments: score, gradient, update; the state is carried.
    m1 = build_language_model(TINY_GENERIC, V, 1)
    copy_weights(src, m1)
    reset_states(m1)
    x = ids.astype("int32")[None]
    l0, g0 = _reference_grad(m1, x[:, 0:3], x[:, 1:4])

    def step(theta, g):
        if variant == "rms":
            return [
                t + lamb * d * (t0 - t) - lr * gi / (m + eps)
                for t, t0, gi, m, d in zip(theta, theta0, g, ms, decrate)
            ]
        return [
            t - lr * gi + lamb * (t0 - t) for t, t0, gi in zip(theta, theta0, g)
        ]

    theta1 = step(theta0, g0)
    _set(m1, theta1)
    l1, g1 = _reference_grad(m1, x[:, 3:6], x[:, 4:7])
    theta2 = step(theta1, g1)
    # The decay term is live in the second step.
    assert max(np.abs(t1 - t0).max() for t1, t0 in zip(theta1, theta0)) > 0

    result = ev.evaluate(ids, restore=False)
    assert result["tokens"] == 6 and result["segments"] == 2
    assert result["nll"] == pytest.approx((l0 + l1) / 6, rel=1e-5)
    for got, want in zip(ev.get_weights(), theta2):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_gradient_statistics_conventions():
    sums = [np.array([4.0, 16.0]), np.array([[1.0, 9.0], [25.0, 49.0]])]
    ms, dr = gradient_statistics(sums, 4, "mean")
    np.testing.assert_allclose(ms[0], [1.0, 2.0])
    np.testing.assert_allclose(ms[1], [[0.5, 1.5], [2.5, 3.5]])
    # tensor means 1.5 and 2.0 -> normaliser 1.75
    np.testing.assert_allclose(dr[0], np.array([1.0, 2.0]) / 1.75, rtol=1e-6)
    ms, dr = gradient_statistics(sums, 4, "sum")
    np.testing.assert_allclose(ms[0], [2.0, 4.0])
    # MoS code: sqrt(sum), normaliser = sum of tensor means (3 + 4)
    np.testing.assert_allclose(dr[1], np.array([[1, 3], [5, 7]]) / 7.0)


AWD = dict(
    locked_dropout=True,
    dropout=0.4,
    dropouth=0.25,
    dropouti=0.4,
    dropoute=0.1,
    weight_dropout=0.5,
)


@pytest.mark.parametrize(
    "cfg",
    [
        TINY,
        ModelConfig(
            embedding_dim=4,
            hidden_sizes=[6, 4],
            head="tied",
            ar_alpha=2.0,
            tar_beta=1.0,
            **AWD,
        ),
        ModelConfig(
            embedding_dim=4,
            hidden_sizes=[6, 4],
            head="mos",
            mixture_components=3,
            dropoutl=0.3,
            **AWD,
        ),
        ModelConfig(
            embedding_dim=4,
            hidden_sizes=[6, 4],
            head="doc",
            mixture_components=[1, 2, 3],
            cv_penalty=0.01,
        ),
        ModelConfig(
            embedding_dim=5, hidden_sizes=[6], cell="mlstm", dropout=0.5
        ),
    ],
    ids=["tied_lstm", "awd_lstm", "mos", "doc", "mlstm_softmax"],
)
def test_zero_lr_and_lambda_reproduce_static_evaluation(cfg):
    """eta = lambda = 0: the same NLL as the static Evaluator at batch 1
    with the same segment length (dropout off, state carried)."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, V, 58)  # 57 targets: a short last segment
    src = build_language_model(cfg, V, 2, seed=5)
    static = Evaluator(cfg, V, 1, 5).evaluate(ids, weights_from=src)
    ev = DynamicEvaluator(
        cfg, V, lr=0.0, lamb=0.0, epsilon=1e-3, bptt=5, grad_batch_size=2
    )
    ev.set_weights_from(src)
    before = ev.get_weights()
    r = ev.evaluate(ids, train_ids=rng.integers(0, V, 40))
    assert r["tokens"] == static["tokens"] == 57
    assert r["nll"] == pytest.approx(static["nll"], rel=1e-6, abs=1e-6)
    # A real update runs on this model and the weights are restored.
    ev.lr, ev.lamb = 0.01, 0.02
    r = ev.evaluate(ids)
    assert math.isfinite(r["nll"]) and r["nll"] != static["nll"]
    for a, b in zip(ev.get_weights(), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_dynamic_evaluation_adapts_to_a_repetitive_split(tiny_run):
    """A trained model on a text repeating one sentence: adapting to it
    lowers the NLL well below the static NLL (both variants)."""
    from keras_rnnlm.runs import open_run

    config, corpus = open_run(tiny_run)
    sentence = "the bird finds a ball . my friend eats the tree ."
    ids = np.asarray(corpus.vocab.encode(sentence.split() * 25), np.int32)
    weights = os.path.join(tiny_run, "best.weights.h5")
    static = Evaluator(config.model, len(corpus.vocab), 1, 5)
    static.load_weights(weights)
    s = static.evaluate(ids)["nll"]
    rms = DynamicEvaluator(
        config.model,
        len(corpus.vocab),
        lr=1e-3,
        lamb=0.01,
        epsilon=1e-4,
        bptt=5,
        grad_batch_size=8,
        grad_batches=20,
    )
    rms.load_weights(weights)
    r = rms.evaluate(ids, train_ids=corpus.train)
    assert r["tokens"] == len(ids) - 1
    assert r["nll"] < s - 0.2, (r["nll"], s)
    sgd = DynamicEvaluator(
        config.model,
        len(corpus.vocab),
        variant="sgd",
        lr=0.5,
        lamb=0.01,
        bptt=5,
    )
    sgd.load_weights(weights)
    assert sgd.evaluate(ids)["nll"] < s - 0.2


def test_presets_hold_table_v():
    ptb, wt2 = PRESETS["mmlstm_ptb"], PRESETS["mmlstm_wt2"]
    assert (ptb["lr"], ptb["epsilon"], ptb["lamb"]) == (0.0024, 0.0025, 0.07)
    assert (ptb["grad_batch_size"], ptb["bptt"]) == (150, 7)
    assert (wt2["lr"], wt2["epsilon"], wt2["lamb"]) == (0.00198, 0.0023, 0.0245)
    assert (wt2["grad_batch_size"], wt2["bptt"]) == (130, 7)
    ev = DynamicEvaluator.from_preset("mos_ptb", TINY, V, bptt=3, lr=None)
    assert (ev.lamb, ev.bptt, ev.lr, ev.statistics) == (0.075, 3, 0.002, "sum")
    with pytest.raises(KeyError):
        DynamicEvaluator.from_preset("nope", TINY, V)


@pytest.mark.slow
def test_cli_dynamic_eval(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "vocab.json", "best.weights.h5"):
        shutil.copy(os.path.join(tiny_run, name), run / name)
    run = str(run)
    out = os.path.join(run, "dyn.json")
    args = ["dynamic-eval", run, "--split", "test", "--hparams", "mos_ptb"]
    args += ["--lr", "0.01", "--grad-batches", "3", "--max-tokens", "40"]
    assert main(args + ["--static", "--output", out]) == 0
    assert "dynamic-eval test: ppl" in capsys.readouterr().out
    with open(out) as f:
        result = json.load(f)
    assert result["tokens"] == 40 and result["static"]["tokens"] == 40
    assert result["preset"] == "mos_ptb" and result["lr"] == 0.01
    assert result["statistics"] == "sum"
    assert result["gradient_statistics"]["batches"] == 3

    args = ["dynamic-eval", run, "--variant", "sgd", "--lr", "0.1"]
    args += ["--lambda", "0.02", "--bptt", "4", "--max-tokens", "20"]
    assert main(args + ["--split", "valid"]) == 0
    with open(os.path.join(run, "dynamic_eval_valid.json")) as f:
        result = json.load(f)
    assert result["variant"] == "sgd" and result["bptt"] == 4
    assert result["lambda"] == 0.02 and result["tokens"] == 20
