"""The run's progress bar numbers epochs out of the run's total."""

import keras
import numpy as np

from keras_rnnlm.callbacks import RunProgbar


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_epochs_are_numbered_out_of_the_run_total(capsys):
    """One ``fit`` per epoch (the trainer's variable-BPTT loop) still
    prints "Epoch k/4", including the first epoch, which Keras's own bar
    leaves unnumbered when a fit call has one epoch."""
    model = _model()
    x = np.zeros((4, 3), "float32")
    y = np.zeros((4, 1), "float32")
    bar = RunProgbar(4)
    for epoch in range(3):
        model.fit(
            x,
            y,
            epochs=epoch + 1,
            initial_epoch=epoch,
            callbacks=[bar],
            verbose=2,
        )
    out = capsys.readouterr().out
    assert "Epoch 1/4" in out
    assert "Epoch 2/4" in out
    assert "Epoch 3/4" in out
    assert "Epoch 2/2" not in out and "Epoch 3/3" not in out


def test_single_fit_matches_keras():
    bar = RunProgbar(5)
    bar.set_params({"verbose": 1, "epochs": 5, "steps": 2})
    assert bar.epochs == 5 and bar.target == 2 and bar.verbose == 1
