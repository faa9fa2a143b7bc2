"""Sentence-level state reset (arXiv:2106.08927, Section 3.1): a
sentence's outputs inside a stream equal those of the sentence alone from
the initial state."""

import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights

B, T, D, H = 2, 12, 3, 5
STARTS = [(0, 4), (0, 9), (1, 6)]  # (row, t): a sentence starts at t


def _reset():
    r = np.zeros((B, T), "float32")
    for b, t in STARTS:
        r[b, t] = 1.0
    return r


def _segments():
    """(row, start, stop) of each complete sentence of the stream."""
    return [(0, 4, 9), (0, 9, T), (1, 6, T)]


def _check_sentence_inside_stream_equals_alone(layer, seed):
    """``layer(x, reset=_reset())``: before a row's first reset, the
    unmasked output; each sentence, its output alone from the initial
    state; a mask of zeros, the unmasked (fused loop's) output."""
    x = np.random.default_rng(seed).normal(size=(B, T, D)).astype("float32")
    plain = ops.convert_to_numpy(layer(x))
    got = ops.convert_to_numpy(layer(x, reset=_reset()))
    np.testing.assert_allclose(got[0, :4], plain[0, :4], atol=1e-5)
    np.testing.assert_allclose(got[1, :6], plain[1, :6], atol=1e-5)
    for b, s, e in _segments():
        alone = ops.convert_to_numpy(layer(x[b : b + 1, s:e]))
        np.testing.assert_allclose(got[b, s:e], alone[0], atol=1e-5)
    none = ops.convert_to_numpy(layer(x, reset=np.zeros((B, T), "float32")))
    np.testing.assert_allclose(none, plain, atol=1e-5)


def _check_resets_carried_state_at_t0(layer, seed):
    """A stateful layer with a reset at t = 0 of every row gives the
    output of a fresh state, and keeps its final state as an unmasked
    call does."""
    x = np.random.default_rng(seed).normal(size=(B, T, D)).astype("float32")
    layer(x)  # some carried state
    r = np.zeros((B, T), "float32")
    r[:, 0] = 1.0
    got = ops.convert_to_numpy(layer(x, reset=r))
    carried = [ops.convert_to_numpy(s) for s in layer.states]
    layer.reset_state()
    want = ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(got, want, atol=1e-5)
    for a, b in zip(carried, layer.states):
        np.testing.assert_allclose(a, ops.convert_to_numpy(b), atol=1e-5)


@pytest.mark.parametrize("cls", [LSTM, WeightDropLSTM])
def test_layer_sentence_inside_stream_equals_alone(cls):
    kw = {"weight_dropout": 0.5, "seed": 1} if cls is WeightDropLSTM else {}
    layer = cls(H, return_sequences=True, **kw)
    _check_sentence_inside_stream_equals_alone(layer, seed=0)


def test_stateful_layer_resets_the_carried_state_at_t0():
    layer = LSTM(H, return_sequences=True, stateful=True)
    _check_resets_carried_state_at_t0(layer, seed=1)


def test_gradients_flow_with_a_reset_mask():
    import keras

    layer = LSTM(H, return_sequences=True)
    inputs = keras.Input((T, D))
    reset = keras.Input((T,))
    model = keras.Model([inputs, reset], layer(inputs, reset=reset))
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    x = np.random.default_rng(2).normal(size=(B, T, D)).astype("float32")
    before = [w.copy() for w in layer.get_weights()]
    model.train_on_batch([x, _reset()], np.ones((B, T, H), "float32"))
    after = layer.get_weights()
    assert all(not np.allclose(a, b) for a, b in zip(after, before))


def _lm(context=None, **kw):
    return ModelConfig(
        embedding_dim=6,
        hidden_sizes=[7, 5],
        init_range=0.3,
        context=context,
        **kw,
    )


def _stream_and_alone(cfg, seed):
    """``(alone, x, got)``: the model of ``cfg`` for one row (``alone``),
    random ids ``x`` and the output over ``x`` with the reset mask
    :func:`_reset` of the sentence-reset model (the same weights)."""
    model = build_language_model(cfg, 20, B, seed=0, reset_input=True)
    alone = build_language_model(cfg, 20, 1, seed=1)
    copy_weights(model, alone)
    x = np.random.default_rng(seed).integers(0, 20, (B, T)).astype("int32")
    got = ops.convert_to_numpy(model({"tokens": x, "reset": _reset()}))
    return alone, x, got


@pytest.mark.parametrize("weight_dropout", [0.0, 0.4])
def test_model_scores_a_sentence_in_a_stream_as_alone(weight_dropout):
    """Sentence reset through the builder (every recurrent layer), the
    scores of each sentence equal scoring it alone from the zero state."""
    alone, x, got = _stream_and_alone(_lm(weight_dropout=weight_dropout), 3)
    for b, s, e in _segments():
        for layer in alone.layers:
            if getattr(layer, "stateful", False):
                layer.reset_state()
        want = ops.convert_to_numpy(alone(x[b : b + 1, s:e]))
        np.testing.assert_allclose(got[b, s:e], want[0], atol=1e-5)


def test_cbow_context_is_not_reset():
    """The LSTM restarts at the sentence, the CBOW window does not: the
    sentence's scores depend on the sentences before it."""
    ctx = {"weighting": "uniform", "window": 10, "dim": 4}
    alone, x, got = _stream_and_alone(_lm(context=ctx), 4)
    want = ops.convert_to_numpy(alone(x[0:1, 4:9]))
    assert not np.allclose(got[0, 4:9], want[0], atol=1e-4)


def test_other_cells_are_refused():
    """A Keras cell passed from Python (wrapped in keras.layers.RNN)."""
    import keras

    cfg = ModelConfig(
        embedding_dim=4, hidden_sizes=[4], cell=keras.layers.GRUCell
    )
    with pytest.raises(ConfigError, match="reset"):
        build_language_model(cfg, 20, B, reset_input=True)


@pytest.mark.parametrize("key", ["dropout", "recurrent_dropout"])
def test_keras_layer_dropout_is_refused_under_a_reset(key):
    cfg = ModelConfig(
        embedding_dim=4, hidden_sizes=[4], cell="gru", cell_kwargs={key: 0.2}
    )
    with pytest.raises(ConfigError, match=key):
        build_language_model(cfg, 20, B, reset_input=True)
    build_language_model(cfg, 20, B)  # without a reset: Keras's own


# -- Keras's own layers (keras_lstm, gru, simple_rnn) -------------------


def _check_trains_with_a_reset_mask(layer, units, seed):
    """One training step of a model over ``layer(x, reset=r)`` changes
    every trainable weight, with a finite loss."""
    import keras

    inputs = keras.Input((T, D))
    reset = keras.Input((T,))
    model = keras.Model([inputs, reset], layer(inputs, reset=reset))
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(seed).normal(size=(B, T, D)).astype("float32")
    y = np.ones((B, T, units), "float32")
    before = [ops.convert_to_numpy(w) for w in layer.trainable_weights]
    loss = model.train_on_batch([x, _reset()], y)
    assert np.isfinite(loss)
    after = [ops.convert_to_numpy(w) for w in layer.trainable_weights]
    assert all(not np.allclose(a, b) for a, b in zip(after, before))


def _keras_layers():
    from keras_rnnlm.layers import keras_recurrent as stateful

    return {
        "keras_lstm": stateful.KerasLSTM,
        "gru": stateful.GRU,
        "simple_rnn": stateful.SimpleRNN,
    }


KERAS_LAYERS = _keras_layers()


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_layer_scores_a_sentence_in_a_stream_as_alone(name):
    layer = KERAS_LAYERS[name](H, return_sequences=True)
    _check_sentence_inside_stream_equals_alone(layer, seed=10)


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_layer_resets_its_carried_state_at_t0(name):
    layer = KERAS_LAYERS[name](H, return_sequences=True, stateful=True)
    _check_resets_carried_state_at_t0(layer, seed=11)


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_layer_trains_with_a_reset_mask(name):

    layer = KERAS_LAYERS[name](H, return_sequences=True)
    _check_trains_with_a_reset_mask(layer, H, seed=12)


@pytest.mark.parametrize(
    "kw",
    [{"dropout": 0.3}, {"recurrent_dropout": 0.3}, {"go_backwards": True}],
)
def test_keras_layer_refuses_what_the_reset_loop_lacks(kw):
    layer = KERAS_LAYERS["gru"](H, return_sequences=True, **kw)
    x = np.zeros((B, T, D), "float32")
    layer(x)  # without a reset: Keras's own loop
    with pytest.raises(ValueError, match=next(iter(kw))):
        layer(x, reset=_reset())


def test_keras_layer_refuses_a_keras_mask_under_a_reset():
    layer = KERAS_LAYERS["keras_lstm"](H, return_sequences=True)
    x = np.zeros((B, T, D), "float32")
    with pytest.raises(ValueError, match="mask"):
        layer(x, mask=np.ones((B, T), bool), reset=_reset())


# -- every recurrent layer of the package ------------------------------


def _layers():
    """``{id: make(**kw)}``: one layer per registry family and variant
    (the multi-cell ones from non-zero initial cells, which a reset must
    restore)."""
    from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
    from keras_rnnlm.layers.multicell_lstm import STRATEGIES
    from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
    from keras_rnnlm.layers.multiplicative import CELLS
    from keras_rnnlm.layers.multiplicative import MultiplicativeRNN

    makers = {}
    for fuse in (False, True):
        makers[f"mmlstm-fuse{fuse}"] = lambda fuse=fuse, **kw: MajorMinorLSTM(
            H + 1,
            major_proportion=0.5,
            minor_input="previous",
            weight_dropout=0.3,
            seed=2,
            fuse_branches=fuse,
            **kw,
        )
    for name, cell in CELLS.items():
        makers[name] = lambda cell=cell, **kw: MultiplicativeRNN(
            cell(H, intermediate_size=4), **kw
        )
    multicell = {
        "num_cells": 3,
        "initial_cells": "linspace",
        "initial_cells_scale": 0.5,
        "random_inference": "mean",
        "seed": 3,
    }
    for strategy in STRATEGIES:
        makers[f"multicell-{strategy}"] = lambda s=strategy, **kw: (
            MultiCellLSTM(H, **{**multicell, "strategy": s, **kw})
        )
    return makers


LAYERS = _layers()


#: Sentences of four steps (so that they are scored alone in one call);
#: row 1 starts one at t = 0.
EVEN_STARTS = [(0, 4), (0, 8), (1, 0), (1, 4), (1, 8)]


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_layer_scores_a_sentence_in_a_stream_as_alone(name):
    layer = LAYERS[name](return_sequences=True)
    x = np.random.default_rng(5).normal(size=(B, T, D)).astype("float32")
    r = np.zeros((B, T), "float32")
    for b, t in EVEN_STARTS:
        r[b, t] = 1.0
    plain = ops.convert_to_numpy(layer(x))
    got = ops.convert_to_numpy(layer(x, reset=r))
    np.testing.assert_allclose(got[0, :4], plain[0, :4], atol=1e-5)
    alone = ops.convert_to_numpy(
        layer(np.stack([x[b, t : t + 4] for b, t in EVEN_STARTS]))
    )
    for k, (b, t) in enumerate(EVEN_STARTS):
        np.testing.assert_allclose(got[b, t : t + 4], alone[k], atol=1e-5)
    none = ops.convert_to_numpy(layer(x, reset=np.zeros((B, T), "float32")))
    np.testing.assert_allclose(none, plain, atol=1e-5)
    # Without a mask: the fused loop's output, bit for bit.
    np.testing.assert_array_equal(plain, _fast_path_outputs(layer, x))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_layer_resets_its_carried_state_at_t0(name):
    layer = LAYERS[name](return_sequences=True, stateful=True)
    _check_resets_carried_state_at_t0(layer, seed=6)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_layer_trains_with_a_reset_mask(name):

    if name == "multicell-random":  # the sampled selection in training
        layer = LAYERS[name](return_sequences=True, random_inference="sample")
    else:
        layer = LAYERS[name](return_sequences=True)
    units = layer.cell.units if hasattr(layer, "cell") else layer.units
    _check_trains_with_a_reset_mask(layer, units, seed=7)


def _fast_path_outputs(layer, x):
    """The layer's output through its fused loop, called directly."""
    from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM

    if isinstance(layer, MajorMinorLSTM):
        if layer._fused(x):
            out, _ = layer._fused_call(x, x, [None, None], False)
            return ops.convert_to_numpy(out)
        parts = [
            b.fused_inner_loop(x, b.get_initial_state(B), False)[1]
            for b in layer.branches
        ]
        return ops.convert_to_numpy(ops.concatenate(parts, axis=-1))
    states = layer.cell.get_initial_state(B)
    return ops.convert_to_numpy(layer.fused_inner_loop(x, states, False)[1])


MODEL_CELLS = {
    "mmlstm": {"cell": "mmlstm", "major_proportions": [0.5, 0.6]},
    "mmlstm-wd": {
        "cell": "mmlstm",
        "major_proportions": [0.5, 1.0],
        "weight_dropout": 0.3,
    },
    **{
        c: {"cell": c, "cell_kwargs": {"intermediate_size": 4}}
        for c in ("mrnn", "mlstm", "tmlstm", "mgru", "tmgru")
    },
    "multicell_lstm": {
        "cell": "multicell_lstm",
        "cell_kwargs": {"num_cells": 3, "initial_cells": "linspace"},
    },
    # Keras's own layers (SentenceResetMixin)
    **{c: {"cell": c} for c in ("keras_lstm", "gru", "simple_rnn")},
}


@pytest.mark.parametrize("name", sorted(MODEL_CELLS))
def test_every_registry_model_scores_a_sentence_as_alone(name):
    """Through the builder (both layers reset), for each registry name."""
    cfg = _lm(**MODEL_CELLS[name])
    model = build_language_model(cfg, 20, B, seed=0, reset_input=True)
    alone = build_language_model(cfg, 20, None, stateful=False, seed=1)
    copy_weights(model, alone)
    x = np.random.default_rng(9).integers(0, 20, (B, T)).astype("int32")
    r = np.zeros((B, T), "float32")
    for b, t in EVEN_STARTS:
        r[b, t] = 1.0
    got = ops.convert_to_numpy(model({"tokens": x, "reset": r}))
    want = ops.convert_to_numpy(
        alone(np.stack([x[b, t : t + 4] for b, t in EVEN_STARTS]))
    )
    for k, (b, t) in enumerate(EVEN_STARTS):
        np.testing.assert_allclose(got[b, t : t + 4], want[k], atol=1e-5)
