"""The fused loops' forward-only mode (evaluation and scoring)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.layers import LSTM
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multiplicative import CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.loops.recurrence import set_forward_only

B, T, D, H = 3, 6, 5, 4


def _layers():
    kw = dict(return_sequences=True, return_state=True)
    return {
        "lstm": LSTM(H, **kw),
        "mlstm": MultiplicativeRNN(CELLS["mlstm"](H), **kw),
        "tmgru": MultiplicativeRNN(CELLS["tmgru"](H), **kw),
        "multicell_max": MultiCellLSTM(H, num_cells=3, strategy="max", **kw),
        "multicell_random": MultiCellLSTM(
            H, num_cells=3, strategy="random", random_inference="mean", **kw
        ),
    }


@pytest.mark.parametrize("name", sorted(_layers()))
def test_forward_only_gives_the_same_outputs_and_states(name):
    layer = _layers()[name]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer.build((B, T, D))
    layer.set_weights(
        [rng.uniform(-0.5, 0.5, w.shape) for w in layer.get_weights()]
    )
    full = [ops.convert_to_numpy(t) for t in layer(x)]
    assert set_forward_only(layer) == 1
    assert layer.forward_only is True
    fwd = [ops.convert_to_numpy(t) for t in layer(x)]
    for a, b in zip(full, fwd):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # Runtime mode, not configuration.
    assert "forward_only" not in layer.get_config()
    set_forward_only(layer, False)
    assert layer.forward_only is False


def test_switches_nested_layers():
    layer = MajorMinorLSTM(8, major_proportion=0.75)
    layer([np.zeros((B, T, D), "float32"), np.zeros((B, T, D), "float32")])
    assert set_forward_only(layer) == 2
    inner = [
        sub
        for sub in layer._flatten_layers(include_self=False)
        if hasattr(sub, "forward_only")
    ]
    assert len(inner) == 2 and all(sub.forward_only for sub in inner)


def test_evaluator_and_inference_graph_are_forward_only():
    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[6, 6])
    ev = Evaluator(cfg, 20, 2, 5)
    lstms = [lay for lay in ev.model.layers if isinstance(lay, LSTM)]
    assert len(lstms) == 2 and all(lay.forward_only for lay in lstms)

    from keras_rnnlm.models import build_language_model

    model = build_language_model(cfg, 20, None, stateful=False, seed=0)
    infer = build_inference_model(model)
    twins = [lay for lay in infer.model.layers if isinstance(lay, LSTM)]
    assert len(twins) == 2 and all(lay.forward_only for lay in twins)
    # The source (training) model is untouched.
    assert not any(
        lay.forward_only for lay in model.layers if isinstance(lay, LSTM)
    )
    assert not infer.portable and build_inference_model(model, True).portable
    tokens = np.random.default_rng(1).integers(0, 20, (2, 7))
    logits, _ = infer(tokens, infer.initial_states(2))
    np.testing.assert_allclose(
        ops.convert_to_numpy(logits),
        ops.convert_to_numpy(model(tokens)),
        rtol=1e-5,
        atol=1e-5,
    )


def test_training_model_gradients_unaffected():
    """A model that was never switched still trains through the
    hand-written backward pass."""
    layer = LSTM(H, return_sequences=True)
    x = keras.random.normal((B, T, D), seed=1)
    layer.build((B, T, D))
    assert layer.forward_only is False
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = ops.sum(layer(x) ** 2)
        grads = tape.gradient(loss, layer.trainable_weights)
        assert all(g is not None for g in grads)
