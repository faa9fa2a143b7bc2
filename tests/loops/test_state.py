"""Carried state through Keras's compiled steps, on every backend."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import assert_windows_equal_whole
from layer_testing import run_layer_test

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.layers.keras_recurrent import GRU
from keras_rnnlm.layers.keras_recurrent import RNN
from keras_rnnlm.layers.keras_recurrent import KerasLSTM
from keras_rnnlm.layers.keras_recurrent import SimpleRNN
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights

LAYERS = ["lstm", "keras_lstm", "gru", "simple_rnn", "mlstm", "tmgru"]


@pytest.mark.parametrize(
    "layer_cls, kw, num_states, exclude",
    [
        (KerasLSTM, dict(units=3), 2, ("use_cudnn",)),
        (GRU, dict(units=3), 1, ("use_cudnn",)),
        (SimpleRNN, dict(units=3), 1, ("seed",)),
        (RNN, dict(cell=keras.layers.LSTMCell(3)), 2, ()),
    ],
)
def test_layer_checks(layer_cls, kw, num_states, exclude):
    """The stateful Keras layers: the carried states are non-trainable
    variables but not weights. (``exclude``: constructor arguments Keras's
    own layers leave out of their config.)"""
    run_layer_test(
        layer_cls,
        dict(kw, stateful=True, return_sequences=True),
        input_shape=(2, 5, 4),
        expected_output_shape=(2, 5, 3),
        expected_num_trainable_weights=3,
        expected_num_seed_generators=1,  # the Keras cell's (dropout)
        expected_num_non_trainable_variables=1 + num_states,
        config_exclude=exclude,
    )


def _models(cell, batch):
    cfg = ModelConfig(
        embedding_dim=6, hidden_sizes=[6, 5], cell=cell, init_range=0.5
    )
    stateful = build_language_model(cfg, 20, batch, seed=0)
    whole = build_language_model(cfg, 20, None, stateful=False, seed=0)
    copy_weights(stateful, whole)
    return stateful, whole


@pytest.mark.parametrize("cell", LAYERS)
def test_predict_on_batch_carries_state(cell):
    """Window-by-window predictions through the compiled predict step equal
    one pass over the whole sequence (the JAX trainer drops untracked
    state assignments; the layers track their state)."""
    model, whole = _models(cell, 2)
    ids = np.random.default_rng(0).integers(0, 20, (2, 28)).astype("int32")
    assert_windows_equal_whole(model, whole, ids, 7)


@pytest.mark.parametrize("cell", ["lstm", "mlstm"])
def test_saved_weights_exclude_state_and_load_at_any_batch_size(cell, tmp_path):
    model, _ = _models(cell, 4)
    model.predict_on_batch(np.zeros((4, 3), "int32"))
    path = str(tmp_path / "w.weights.h5")
    model.save_weights(path)
    other, _ = _models(cell, 1)
    other.load_weights(path)
    for a, b in zip(model.trainable_variables, other.trainable_variables):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b)
        )
    states = [v for v in model.non_trainable_variables if "rnn_state" in v.path]
    assert len(states) >= 2  # listed, so compiled steps thread them
    assert not any("rnn_state" in w.path for w in model.weights)


@pytest.mark.parametrize("cell", ["lstm", "mlstm", "multicell_lstm"])
def test_eager_gradients_of_stateful_fused_layers(cell):
    """Eager (``run_eagerly``) gradients through the fused loops equal the
    generic loop's: the backward pass must keep the *initial* state, not
    the state variable the layer overwrites after the forward pass."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("GradientTape")
    import tensorflow as tf

    ids = np.random.default_rng(1).integers(0, 20, (2, 6)).astype("int32")
    grads = {}
    for fused in ("auto", False):
        cfg = ModelConfig(
            embedding_dim=6,
            hidden_sizes=[5],
            cell=cell,
            init_range=0.5,
            cell_kwargs={"fused": fused},
        )
        model = build_language_model(cfg, 20, 2, seed=0)
        model.predict_on_batch(ids)  # a non-zero carried state
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(ids) ** 2)
        grads[fused] = [
            tf.convert_to_tensor(g).numpy()
            for g in tape.gradient(loss, model.trainable_variables)
        ]
    for a, b in zip(grads["auto"], grads[False]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
