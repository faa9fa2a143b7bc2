"""The weights of builder models (:mod:`keras_rnnlm.models.weights`)."""

import warnings

import keras
import numpy as np

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.weights import load_weights_file

V = 17


def test_a_training_models_file_loads_into_a_compiled_model_of_any_batch(
    tmp_path,
):
    """A file of a compiled training model (its optimizer's variables in
    it) loads into a compiled evaluation model of another batch size,
    with no warning, every variable as saved, and the model's own
    optimizer untouched."""
    config = ModelConfig(embedding_dim=6, hidden_sizes=[8, 8])
    train = build_language_model(config, V, 4, seed=3)
    train.compile(optimizer=keras.optimizers.SGD(1.0, momentum=0.9))
    train.optimizer.build(train.trainable_variables)
    path = str(tmp_path / "train.weights.h5")
    train.save_weights(path)
    model = build_language_model(config, V, 2, seed=9)
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    model.optimizer.build(model.trainable_variables)
    before = [v.numpy() for v in model.optimizer.variables]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_weights_file(model, path)
    for a, b in zip(model.weights, train.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for v, b in zip(model.optimizer.variables, before, strict=True):
        np.testing.assert_array_equal(v.numpy(), b)
    uncompiled = build_language_model(config, V, 1, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_weights_file(uncompiled, path)
    np.testing.assert_array_equal(
        uncompiled.weights[0].numpy(), train.weights[0].numpy()
    )
