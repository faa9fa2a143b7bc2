import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import gradients
from layer_testing import run_layer_test

from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.multicell_lstm import STRATEGIES
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTMCell
from keras_rnnlm.layers.multicell_lstm import static_cell_weights
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import make_recurrent_layer
from keras_rnnlm.models import recurrent_layer_names

D, H, M, B, T = 5, 6, 4, 3, 7
THR = 0.55


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


# -- independent float64 reference, written from the paper's equations ----


def ref_multicell(x, w, strategy, c0, noise=None, static_w=None):
    """Eq. 1-4 (gates), 7 (cells), 9-14 (selection), 8 (output).

    x (B, T, D); w = kernel, recurrent_kernel, bias[, cell_weights];
    c0 (B, M, H) initial cells; noise (T, B, H) in [0, 1) for random.
    Returns outputs (B, T, H), final h, final cells (B, M, H).
    """
    k, u, b = w[:3]
    h = np.zeros((x.shape[0], H))
    cells = c0.copy()
    outs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ k + h @ u + b
        i, f = sig(z[:, :H]), sig(z[:, H : 2 * H])
        a, o = np.tanh(z[:, 2 * H : 3 * H]), sig(z[:, 3 * H :])
        cells = np.stack([i * a + f * cells[:, j] for j in range(M)], 1)
        if strategy == "mean":
            c_eff = cells.sum(1) / M
        elif strategy == "weighted":
            c_eff = sum(static_w[j] * cells[:, j] for j in range(M))
        elif strategy == "max":
            c_eff = cells.max(1)
        elif strategy == "min_max":
            c_eff = np.where(o < THR, cells.min(1), cells.max(1))
        elif strategy == "learnable_max":
            c_eff = (cells * w[3][None]).max(1)
        elif strategy == "random":
            idx = np.minimum(np.floor(noise[t] * M).astype(int), M - 1)
            c_eff = np.take_along_axis(cells, idx[:, None, :], 1)[:, 0]
        h = o * np.tanh(c_eff)
        outs.append(h)
    return np.stack(outs, 1), h, cells


def _layer(strategy, initial_cells="linspace", fused="auto", **kw):
    layer = MultiCellLSTM(
        H,
        num_cells=M,
        strategy=strategy,
        output_threshold=THR,
        initial_cells=initial_cells,
        initial_cells_scale=0.5,
        return_sequences=True,
        return_state=True,
        fused=fused,
        seed=7,
        **kw,
    )
    layer.build((B, T, D))
    rng = np.random.default_rng(42)
    for v in layer.trainable_variables:
        if "cell_weights" in v.path:
            v.assign(rng.uniform(0.5, 1.5, v.shape))
        else:
            v.assign(rng.uniform(-0.5, 0.5, v.shape))
    return layer


def _c0(layer):
    if layer.initial_cells == "zeros":
        return np.zeros((B, M, H))
    c0 = ops.convert_to_numpy(layer.cell.initial_cells_value).astype("f8")
    return np.broadcast_to(c0, (B, M, H)).copy()


def _fixed_noise(layer, seed=5):
    noise = np.random.default_rng(seed).uniform(size=(B, T, H))
    noise = noise.astype("float32")
    layer.cell.selection_noise = lambda shape, dtype: ops.convert_to_tensor(
        noise, dtype
    )
    return noise.transpose(1, 0, 2).astype("float64")


def _x(seed=0):
    return np.random.default_rng(seed).normal(size=(B, T, D)).astype("f4")


def _weights64(layer):
    return [
        ops.convert_to_numpy(v).astype("f8") for v in layer.trainable_weights
    ]


@pytest.mark.parametrize("initial_cells", ["zeros", "linspace"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fused_matches_numpy_reference(strategy, initial_cells):
    layer = _layer(strategy, initial_cells)
    noise = _fixed_noise(layer) if strategy == "random" else None
    x = _x()
    out, h, c = layer(x, training=True)
    ref_out, ref_h, ref_c = ref_multicell(
        x.astype("f8"),
        _weights64(layer),
        strategy,
        _c0(layer),
        noise,
        static_cell_weights(M, 0.5),
    )
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(h), ref_h, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(c).reshape(B, M, H), ref_c, atol=1e-5
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_naive_cell_in_keras_rnn_matches_reference(strategy):
    """The cell alone inside ``keras.layers.RNN`` (random at inference
    with ``random_inference="mean"`` is the mean)."""
    kw = {"random_inference": "mean"} if strategy == "random" else {}
    layer = _layer(strategy, fused=False, **kw)
    x = _x(1)
    out = layer(x, training=False)[0]
    ref_strategy = "mean" if strategy == "random" else strategy
    ref_out, _, _ = ref_multicell(
        x.astype("f8"),
        _weights64(layer),
        ref_strategy,
        _c0(layer),
        None,
        static_cell_weights(M, 0.5),
    )
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    rnn = keras.layers.RNN(MultiCellLSTMCell(H, num_cells=M, strategy="max"))
    assert rnn(x).shape == (B, H)


def _cell_weighted_loss(outputs):
    """Every output weighs in, each memory cell of ``c`` differently."""
    out, h, c = outputs
    weights = ops.arange(M * H, dtype=c.dtype) / 10.0
    return ops.sum(out**2) + ops.sum(h) + ops.sum(c * weights)


def _grads(layer, x):
    """Gradients (input, then weights) of :func:`_cell_weighted_loss` in
    training."""
    return gradients(layer, x, _cell_weighted_loss, training=True)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fused_gradients_match_autodiff_and_naive(strategy):
    """Hand-written backward loop == autodiff through the compiled loop
    (== Keras's per-step loop, except for random's per-step draws)."""
    x = _x(2)
    fused, auto = _layer(strategy), _layer(strategy, fused="autodiff")
    if strategy == "random":
        _fixed_noise(fused)
        _fixed_noise(auto)
    g_fused, g_auto = _grads(fused, x), _grads(auto, x)
    assert len(g_fused) == 1 + len(fused.trainable_variables)
    for a, b in zip(g_fused, g_auto):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
        assert np.abs(a).max() > 0
    if strategy != "random":
        for a, b in zip(g_fused, _grads(_layer(strategy, fused=False), x)):
            np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)


def test_tied_cells_gradient_is_split_like_autodiff():
    """Zero initial cells: every max is a tie; the hand-written backward
    splits the gradient over the tied cells as autodiff does."""
    x = _x(10)
    for strategy in ("max", "min_max", "learnable_max"):
        fused = _layer(strategy, "zeros")
        auto = _layer(strategy, "zeros", fused="autodiff")
        for a, b in zip(_grads(fused, x), _grads(auto, x)):
            np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)


def test_random_selection_gradient_matches_finite_differences():
    """Fixed draws: the fused gradient of the recurrent kernel equals
    central differences of the float64 reference."""
    layer = _layer("random")
    noise = _fixed_noise(layer)
    x = _x(3)
    grads = _grads(layer, x)
    w = _weights64(layer)
    c0 = _c0(layer)
    weights_c = np.arange(M * H) / 10.0

    def loss(w):
        out, h, c = ref_multicell(x.astype("f8"), w, "random", c0, noise)
        return (out**2).sum() + h.sum() + (c.reshape(B, -1) * weights_c).sum()

    rng = np.random.default_rng(0)
    for _ in range(6):
        j, k = rng.integers(H), rng.integers(4 * H)
        wp = [v.copy() for v in w]
        wm = [v.copy() for v in w]
        wp[1][j, k] += 1e-6
        wm[1][j, k] -= 1e-6
        fd = (loss(wp) - loss(wm)) / 2e-6
        np.testing.assert_allclose(grads[2][j, k], fd, rtol=1e-3, atol=1e-4)


def test_random_draws_granularity_and_inference():
    x = _x(4)
    node = _layer("random", "linspace")
    a = ops.convert_to_numpy(node(x, training=True)[0])
    b = ops.convert_to_numpy(node(x, training=True)[0])
    assert np.abs(a - b).max() > 0  # new draws every call
    # Inference: "sample" keeps drawing, "mean" is deterministic.
    c = ops.convert_to_numpy(node(x, training=False)[0])
    assert np.abs(c - a).max() > 0
    mean = _layer("random", "linspace", random_inference="mean")
    mean_ref = _layer("mean", "linspace")
    np.testing.assert_allclose(
        ops.convert_to_numpy(mean(x, training=False)[0]),
        ops.convert_to_numpy(mean_ref(x, training=False)[0]),
        atol=1e-6,
    )
    # "layer": one index per row and step, shared by every unit.
    layer = _layer("random", "linspace", random_granularity="layer")
    u = ops.convert_to_numpy(layer.cell.selection_noise((B, T, H), "float32"))
    assert np.all(u == u[..., :1])
    u = ops.convert_to_numpy(node.cell.selection_noise((B, T, H), "float32"))
    assert np.unique(u).size == u.size
    assert u.min() >= 0 and u.max() < 1


# -- the same-initial-state analysis ---------------------------------------


def _lstm_like(layer):
    lstm = LSTM(H, return_sequences=True, return_state=True)
    lstm.build((B, T, D))
    lstm.set_weights([v.numpy() for v in layer.trainable_weights[:3]])
    return lstm


@pytest.mark.parametrize("strategy", ["mean", "max", "min_max", "random"])
def test_equal_initial_cells_give_exactly_a_standard_lstm(strategy):
    """All cells start at 0 (the paper): every cell receives the same
    update, so they stay equal and these strategies are a plain LSTM with
    the same weights, outputs and gradients, for any number of cells."""
    layer = _layer(strategy, "zeros")
    lstm = _lstm_like(layer)
    x = _x(5)
    out = ops.convert_to_numpy(layer(x, training=True)[0])
    ref = ops.convert_to_numpy(lstm(x)[0])
    np.testing.assert_allclose(out, ref, atol=1e-6)
    cells = ops.convert_to_numpy(layer(x)[2]).reshape(B, M, H)
    np.testing.assert_array_equal(cells, np.repeat(cells[:, :1], M, 1))
    if keras.backend.backend() == "tensorflow" and strategy != "random":
        import tensorflow as tf

        def grads(model, n_weights):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(tf.constant(x))[0] ** 2)
            return tape.gradient(loss, model.trainable_variables[:n_weights])

        for a, b in zip(grads(layer, 3), grads(lstm, 3)):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)


def test_equal_initial_cells_weighted_and_learnable_are_rescaled_lstms():
    """weighted: h = o tanh(S c) with S the sum of the static weights;
    learnable max: h = o tanh(c max_k w_k) for c >= 0, o tanh(c min_k w_k)
    otherwise; c the plain LSTM cell."""
    x = _x(6).astype("f8")
    for strategy in ("weighted", "learnable_max"):
        layer = _layer(strategy, "zeros")
        w = _weights64(layer)
        out = ops.convert_to_numpy(layer(x.astype("f4"))[0])
        k, u, b = w[:3]
        h, c = np.zeros((B, H)), np.zeros((B, H))
        for t in range(T):
            z = x[:, t] @ k + h @ u + b
            i, f = sig(z[:, :H]), sig(z[:, H : 2 * H])
            a, o = np.tanh(z[:, 2 * H : 3 * H]), sig(z[:, 3 * H :])
            c = i * a + f * c
            if strategy == "weighted":
                scaled = sum(static_cell_weights(M, 0.5)) * c
            else:
                cw = w[3]
                scaled = np.where(c >= 0, c * cw.max(0), c * cw.min(0))
            h = o * np.tanh(scaled)
            np.testing.assert_allclose(out[:, t], h, atol=1e-5)


def test_distinct_initial_cells_keep_order_and_converge():
    """(c_k - c_l)' = f (c_k - c_l): order kept, gaps shrink; mean and max
    are a plain LSTM started from the mean / the largest initial cell."""
    x = np.tile(_x(7), (1, 6, 1))  # 42 steps
    layer = MultiCellLSTM(
        H,
        num_cells=M,
        strategy="max",
        initial_cells="random",
        initial_cells_scale=1.0,
        return_sequences=True,
        return_state=True,
        seed=3,
    )
    layer.build(x.shape)
    c0 = ops.convert_to_numpy(layer.cell.initial_cells_value)
    assert np.unique(c0).size == c0.size  # distinct starting cells
    prev_gap = np.ptp(c0, axis=0)
    order0 = np.argsort(c0, axis=0)
    for t in (5, 42):
        cells = ops.convert_to_numpy(layer(x[:, :t])[2]).reshape(-1, M, H)
        gap = np.ptp(cells, axis=1)
        assert np.all(gap <= prev_gap[None] + 1e-6)
        if t <= 20:  # later, float32 rounding ties the closest cells
            np.testing.assert_array_equal(
                np.argsort(cells, axis=1),
                np.broadcast_to(order0, cells.shape),
            )
    assert gap.max() < 0.5 * np.ptp(c0, axis=0).max()
    lstm = _lstm_like(layer)
    h0 = np.zeros((x.shape[0], H), "f4")
    for strategy, pick in (("max", c0.max(0)), ("mean", c0.mean(0))):
        layer2 = _layer(strategy, "zeros")
        layer2.set_weights(layer.get_weights()[:3])
        c_start = np.broadcast_to(pick, (x.shape[0], H)).astype("f4")
        ref = ops.convert_to_numpy(lstm(x, initial_state=[h0, c_start])[0])
        cells0 = np.broadcast_to(c0.reshape(1, -1), (x.shape[0], M * H))
        out = layer2(x, initial_state=[h0, cells0.astype("f4")])[0]
        np.testing.assert_allclose(ops.convert_to_numpy(out), ref, atol=1e-5)


def test_language_model_is_an_lstm_model_with_the_same_seed():
    """The builder with ``cell="multicell_lstm"`` (10 cells, max, zero
    initial cells) draws the same weights as ``cell="lstm"`` for the same
    seed and gives the same logits."""
    from keras_rnnlm.config import ModelConfig

    assert "multicell_lstm" in recurrent_layer_names()
    logits = []
    for cell, kw in (("lstm", {}), ("multicell_lstm", {"num_cells": 10})):
        cfg = ModelConfig(
            embedding_dim=8,
            hidden_sizes=[8, 8],
            cell=cell,
            cell_kwargs=kw,
            dropout=0.0,
            init_range=0.1,
        )
        model = build_language_model(cfg, 30, batch_size=2, seed=11)
        tokens = np.random.default_rng(0).integers(0, 30, (2, 9))
        logits.append(ops.convert_to_numpy(model(tokens)))
        logits.append(ops.convert_to_numpy(model(tokens)))  # carried state
    np.testing.assert_allclose(logits[0], logits[2], atol=1e-5)
    np.testing.assert_allclose(logits[1], logits[3], atol=1e-5)


def test_stateful_reset_returns_to_initial_cells():
    layer = make_recurrent_layer(
        "multicell_lstm",
        H,
        stateful=True,
        num_cells=M,
        initial_cells="linspace",
        initial_cells_scale=0.3,
    )
    layer(_x(8))
    c0 = np.linspace(-0.3, 0.3, M)[:, None] * np.ones((1, H))
    assert not np.allclose(ops.convert_to_numpy(layer.states[1]), 0)
    layer.reset_state()
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer.states[1]),
        np.broadcast_to(c0.reshape(1, -1), (B, M * H)),
        atol=1e-7,
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(layer.states[0]), 0)


CELL_KW = dict(units=H, num_cells=M, initial_cells="random", seed=7)


@pytest.mark.parametrize(
    "kw",
    [
        dict(strategy="learnable_max"),
        dict(strategy="random", random_inference="mean"),
        dict(strategy="weighted", weighted_decay=0.7, output_threshold=THR),
    ],
)
def test_layer_checks(kw):
    """Random selection draws at training only (``random_inference="mean"``
    here); learnable max has the cell weights as a fourth weight."""
    run_layer_test(
        MultiCellLSTM,
        dict(CELL_KW, return_sequences=True, return_state=True, **kw),
        input_shape=(B, T, D),
        expected_output_shape=[(None, T, H), (None, H), (None, M * H)],
        expected_num_trainable_weights=3 + (kw["strategy"] == "learnable_max"),
        expected_num_non_trainable_weights=1,  # the initial cells
        expected_num_seed_generators=1,
        training_changes_output=kw["strategy"] == "random",
    )


def test_cell_layer_checks():
    """The cell alone: ``cell(inputs, [h, cells])`` gives ``(h, [h,
    cells])``, the cells flattened to ``num_cells * units``."""
    rng = np.random.default_rng(6)
    states = [rng.normal(size=(B, n)).astype("f4") for n in (H, M * H)]
    run_layer_test(
        MultiCellLSTMCell,
        dict(CELL_KW, strategy="min_max"),
        dict(inputs=_x(6)[:, 0], states=states),
        expected_output_shape=[(None, H), (None, H), (None, M * H)],
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=1,
        expected_num_seed_generators=1,
    )


def test_static_weights_and_bad_arguments():
    assert static_cell_weights(4, 0.5) == [1.0, 0.5, 0.25, 0.125]
    assert static_cell_weights(4, 0.3, "linear") == pytest.approx(
        [1.0, 0.7, 0.4, 0.1]
    )
    assert sum(static_cell_weights(5, 0.5, normalize=True)) == pytest.approx(1)
    with pytest.raises(ValueError, match="strategy"):
        MultiCellLSTM(4, strategy="median")
    with pytest.raises(ValueError, match="initial_cells"):
        MultiCellLSTM(4, initial_cells="ones")
    with pytest.raises(ValueError, match="weighted_decay_type"):
        MultiCellLSTM(4, weighted_decay_type="cubic")
    with pytest.raises(ValueError, match="fused"):
        MultiCellLSTM(4, fused="yes")


@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="runs the JAX check from the TensorFlow test session",
)
def test_jax_backend_matches_reference_and__grads():
    """The reference, gradient and LSTM-equivalence tests on JAX."""
    env = dict(os.environ, KERAS_BACKEND="jax")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            "fused_matches or gradients_match or finite or exactly or tied",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "No module named 'jax'" in proc.stdout + proc.stderr:
        pytest.skip("jax not installed")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_stateful_layer_lists_its_carried_state():
    """The carried state is among the layer's (non-trainable) variables, as
    for the other recurrent layers: mid-epoch checkpoints save it, and the
    JAX trainer threads it through its compiled steps."""
    layer = MultiCellLSTM(4, num_cells=2, stateful=True, return_sequences=True)
    x = np.random.default_rng(0).normal(size=(2, 3, 5)).astype("float32")
    first = keras.ops.convert_to_numpy(layer(x))
    paths = [v.path for v in layer.non_trainable_variables]
    assert sum(p.endswith("rnn_state") for p in paths) == 2
    assert layer.count_params() == sum(
        int(np.prod(w.shape)) for w in layer.trainable_weights
    )
    state = keras.ops.convert_to_numpy(layer.states[0])
    assert np.abs(state).max() > 0
    second = keras.ops.convert_to_numpy(layer(x))
    assert not np.allclose(first, second)  # the state was carried
