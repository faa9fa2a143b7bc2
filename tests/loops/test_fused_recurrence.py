"""The fused layers' shared base: the ``fused`` modes and the gradient shim.

``fused="auto"`` takes the fast path when it can and otherwise falls back
to Keras's per-step loop; ``fused=True`` raises where the fast path is
impossible (as Keras's ``use_cudnn=True`` does); ``fused=False`` never
takes it.
"""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import randomized

from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multiplicative import CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.loops.fused_recurrence import FusedRecurrence
from keras_rnnlm.loops.fused_recurrence import custom_gradient

B, T, D, H = 2, 5, 3, 4


def _weight_drop_lstm(fused="auto", **kw):
    # WeightDropLSTM refuses fused=False; its per-step reference is the
    # LSTM it extends, with the same weights.
    if fused is False:
        return LSTM(H, fused=False, **kw)
    return WeightDropLSTM(H, weight_dropout=0.0, fused=fused, **kw)


#: name -> factory(**kwargs) of each fused layer.
FACTORIES = {
    "lstm": lambda **kw: LSTM(H, **kw),
    "weight_drop_lstm": _weight_drop_lstm,
    "mlstm": lambda **kw: MultiplicativeRNN(CELLS["mlstm"](H), **kw),
    "tmgru": lambda **kw: MultiplicativeRNN(CELLS["tmgru"](H), **kw),
    "multicell_lstm": lambda **kw: MultiCellLSTM(
        H, num_cells=3, strategy="max", initial_cells="linspace", **kw
    ),
}

#: Configurations the fast path cannot run, with the phrase the error
#: names; all layers share the first two.
BLOCKERS = {
    "go_backwards": ({"go_backwards": True}, "go_backwards=True"),
    "unroll": ({"unroll": True}, "unroll=True"),
}
LSTM_BLOCKERS = {
    "dropout": ({"dropout": 0.1}, "dropout=0.1"),
    "recurrent_dropout": (
        {"recurrent_dropout": 0.1},
        "recurrent_dropout=0.1",
    ),
    "activation": ({"activation": "relu"}, "activation other than tanh"),
    "recurrent_activation": (
        {"recurrent_activation": "hard_sigmoid"},
        "recurrent_activation other than sigmoid",
    ),
}


def _cases():
    for name in FACTORIES:
        blockers = dict(BLOCKERS)
        if name == "lstm":
            blockers.update(LSTM_BLOCKERS)
        for blocker, (kwargs, phrase) in blockers.items():
            yield pytest.param(name, kwargs, phrase, id=f"{name}-{blocker}")


def _inputs(seed=0):
    return np.random.default_rng(seed).normal(size=(B, T, D)).astype("f4")


def _pair(name, fused, other="auto", **kwargs):
    """Two built layers of ``name`` with the same weights."""
    kwargs = dict(return_sequences=True, return_state=True, **kwargs)
    a = FACTORIES[name](fused=fused, **kwargs)
    b = FACTORIES[name](fused=other, **kwargs)
    for layer in (a, b):
        layer.build((B, T, D))
    rng = np.random.default_rng(1)
    weights = [rng.uniform(-0.5, 0.5, w.shape) for w in a.get_weights()]
    a.set_weights(weights)
    b.set_weights(weights)
    return a, b


def _assert_same(outs_a, outs_b):
    assert len(outs_a) == len(outs_b)
    for x, y in zip(outs_a, outs_b):
        np.testing.assert_allclose(
            ops.convert_to_numpy(x), ops.convert_to_numpy(y), atol=1e-5
        )


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_fused_layer_has_the_base(name):
    layer = FACTORIES[name]()
    assert isinstance(layer, FusedRecurrence)
    assert layer.fused == "auto" and layer.forward_only is False
    with pytest.raises(ValueError, match="fused"):
        FACTORIES[name](fused="yes")


@pytest.mark.parametrize("name, kwargs, phrase", list(_cases()))
def test_fused_true_raises_where_the_fast_path_is_impossible(
    name, kwargs, phrase
):
    with pytest.raises(ValueError, match="fused=True") as err:
        FACTORIES[name](fused=True, **kwargs)
    assert phrase in str(err.value)
    # "auto" accepts the same configuration and falls back.
    layer = FACTORIES[name](fused="auto", **kwargs)
    assert not layer.use_fast_path(None)
    assert not FACTORIES[name](fused=False).use_fast_path(None)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_fused_true_raises_on_a_mask(name):
    layer, auto = _pair(name, True)
    x = _inputs()
    mask = np.ones((B, T), bool)
    with pytest.raises(ValueError, match="a mask"):
        layer(x, mask=mask)
    assert not auto.use_fast_path(mask)
    auto(x, mask=mask)  # falls back


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_auto_falls_back_and_matches_false(name):
    """With go_backwards the fast path is impossible: "auto" runs Keras's
    per-step loop and gives exactly what fused=False gives."""
    auto, slow = _pair(name, "auto", False, go_backwards=True)
    x = _inputs()
    assert not auto.use_fast_path(None)
    _assert_same(auto(x), slow(x))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_true_takes_the_fast_path_and_matches_false(name):
    fused, slow = _pair(name, True, False)
    x = _inputs()
    assert fused.use_fast_path(None) and not slow.use_fast_path(None)
    _assert_same(fused(x), slow(x))
    # fused=True is saved and reloads.
    config = fused.get_config()
    assert config["fused"] is True
    clone = type(fused).from_config(config)
    assert clone.fused is True


def test_fast_path_is_really_taken_with_fused_true(monkeypatch):
    layer, _ = _pair("mlstm", True)

    def fail(*args, **kwargs):
        raise AssertionError("the per-step loop was used")

    monkeypatch.setattr(layer, "generic_inner_loop", fail)
    layer(_inputs())


def test_multicell_autodiff_mode_falls_back_like_auto():
    layer = MultiCellLSTM(H, num_cells=2, fused="autodiff", unroll=True)
    assert not layer.use_fast_path(None)
    assert MultiCellLSTM(H, num_cells=2, fused="autodiff").use_fast_path()


def test_weight_drop_lstm_names_what_blocks_weight_drop():
    layer = WeightDropLSTM(H, weight_dropout=0.5, go_backwards=True)
    layer.build((B, T, D))
    with pytest.raises(ValueError, match="go_backwards=True"):
        layer(_inputs(), training=True)


def _major_minor(fuse, **kwargs):
    layer = MajorMinorLSTM(
        7,
        major_proportion=kwargs.pop("r", 0.6),
        minor_input="previous",
        return_sequences=True,
        return_state=True,
        fuse_branches=fuse,
        **kwargs,
    )
    return randomized(layer, (B, T, D), 2)


def test_major_minor_fuse_branches_true_fuses_on_every_backend():
    fused, apart = _major_minor(True), _major_minor(False)
    x = _inputs()
    assert fused._fused(x) and not apart._fused(x)
    _assert_same(fused(x), apart(x))
    auto = _major_minor("auto")
    assert auto._fused(x) == (keras.backend.backend() == "jax")
    # One branch is already one fused loop: nothing to fuse, no error.
    assert not _major_minor(True, r=1.0)._fused(x)


def _grads(fn, args):
    """Gradients of ``sum(fn(*args)[0] * 2)`` (the other outputs unused)."""
    if keras.backend.backend() == "jax":
        import jax

        def loss(*a):
            return ops.sum(fn(*a)[0] * 2.0)

        return jax.grad(loss, argnums=tuple(range(len(args))))(*args)
    import tensorflow as tf

    args = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = ops.sum(fn(*args)[0] * 2.0)
    return tape.gradient(loss, args)


def test_custom_gradient_shim():
    """The shim's ``backward`` gets every output's gradient as one tuple,
    zeros for an output the loss does not use, on every backend."""
    seen = []

    @custom_gradient
    def f(x, y):
        def backward(upstream):
            seen.append(len(upstream))
            d_xy, d_x = upstream
            return d_xy * y + d_x, d_xy * x

        return (x * y, x), backward

    x = np.array([1.0, 2.0], "float32")
    y = np.array([3.0, 5.0], "float32")
    dx, dy = _grads(f, (x, y))
    np.testing.assert_allclose(ops.convert_to_numpy(dx), 2 * y)
    np.testing.assert_allclose(ops.convert_to_numpy(dy), 2 * x)
    assert seen and all(n == 2 for n in seen)
