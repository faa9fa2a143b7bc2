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


@pytest.mark.parametrize("cls", [LSTM, WeightDropLSTM])
def test_layer_sentence_inside_stream_equals_alone(cls):
    kw = {"weight_dropout": 0.5, "seed": 1} if cls is WeightDropLSTM else {}
    layer = cls(H, return_sequences=True, **kw)
    x = np.random.default_rng(0).normal(size=(B, T, D)).astype("float32")
    plain = ops.convert_to_numpy(layer(x))
    got = ops.convert_to_numpy(layer(x, reset=_reset()))
    # before the first reset of a row: the ordinary LSTM
    np.testing.assert_allclose(got[0, :4], plain[0, :4], atol=1e-5)
    np.testing.assert_allclose(got[1, :6], plain[1, :6], atol=1e-5)
    for b, s, e in _segments():
        alone = ops.convert_to_numpy(layer(x[b : b + 1, s:e]))
        np.testing.assert_allclose(got[b, s:e], alone[0], atol=1e-5)
    # no reset anywhere: the fused loop's results
    none = ops.convert_to_numpy(layer(x, reset=np.zeros((B, T), "float32")))
    np.testing.assert_allclose(none, plain, atol=1e-5)


def test_stateful_layer_resets_the_carried_state_at_t0():
    layer = LSTM(H, return_sequences=True, stateful=True)
    x = np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")
    layer(x)  # some carried state
    r = np.zeros((B, T), "float32")
    r[:, 0] = 1.0
    got = ops.convert_to_numpy(layer(x, reset=r))
    layer.reset_state()
    want = ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(got, want, atol=1e-5)


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


@pytest.mark.parametrize("weight_dropout", [0.0, 0.4])
def test_model_scores_a_sentence_in_a_stream_as_alone(weight_dropout):
    """Sentence reset through the builder (every recurrent layer), the
    scores of each sentence equal scoring it alone from the zero state."""
    cfg = _lm(weight_dropout=weight_dropout)
    model = build_language_model(cfg, 20, B, seed=0, reset_input=True)
    alone = build_language_model(cfg, 20, 1, seed=1)
    copy_weights(model, alone)
    x = np.random.default_rng(3).integers(0, 20, (B, T)).astype("int32")
    got = ops.convert_to_numpy(model({"tokens": x, "reset": _reset()}))
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
    cfg = _lm(context=ctx)
    model = build_language_model(cfg, 20, B, seed=0, reset_input=True)
    alone = build_language_model(cfg, 20, 1, seed=1)
    copy_weights(model, alone)
    x = np.random.default_rng(4).integers(0, 20, (B, T)).astype("int32")
    got = ops.convert_to_numpy(model({"tokens": x, "reset": _reset()}))
    want = ops.convert_to_numpy(alone(x[0:1, 4:9]))
    assert not np.allclose(got[0, 4:9], want[0], atol=1e-4)


def test_other_cells_are_refused():
    cfg = ModelConfig(embedding_dim=4, hidden_sizes=[4], cell="gru")
    with pytest.raises(ConfigError, match="reset"):
        build_language_model(cfg, 20, B, reset_input=True)
