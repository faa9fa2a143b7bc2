import json
import os

import keras
import numpy as np
from keras import ops
from run_dirs import newest_checkpoint

from keras_rnnlm.callbacks.nt_asgd import NTASGD
from keras_rnnlm.callbacks.nt_asgd import should_trigger


def test_trigger_on_scripted_histories():
    n = 2
    # Not enough history: len(history) must exceed n.
    assert not should_trigger([5.0, 4.0], 9.0, n)
    # min(history[:-n]) = min([5.0]) = 5.0
    assert not should_trigger([5.0, 4.0, 3.0], 3.5, n)
    assert should_trigger([5.0, 4.0, 3.0], 5.5, n)
    # The paper's "last n" reading would compare with min(last n) = 3.0 and
    # fire on 3.5: the reference code (and this) does not.
    assert not should_trigger([5.0, 4.0, 3.0], 4.9, n)
    # Equal is not worse.
    assert not should_trigger([5.0, 4.0, 3.0], 5.0, n)
    # n = 0 compares with the best of all epochs.
    assert should_trigger([5.0, 4.0], 4.5, 0)


def test_switch_epoch_on_scripted_validation_run(tmp_path):
    cb = NTASGD(str(tmp_path), nonmono=2)
    cb.set_model(_model())
    switched = []
    for epoch, val in enumerate([6.0, 5.0, 4.0, 4.5, 4.2, 6.5, 3.0]):
        cb.on_epoch_end(epoch, {"val_loss": val})
        switched.append(cb.averaging)
    # epoch 5: history [6, 5, 4, 4.5, 4.2], 6.5 > min([6, 5, 4]) -> switch
    assert switched == [False] * 5 + [True, True]
    assert cb.trigger_epoch == 5
    # After the switch (main training) the history is not extended.
    assert cb.history == [6.0, 5.0, 4.0, 4.5, 4.2, 6.5]


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model


def _set(model, value):
    for v in model.trainable_variables:
        v.assign(np.full(v.shape, value, "float32"))


def test_average_is_uniform_mean_of_iterates_and_swaps(tmp_path):
    model = _model()
    cb = NTASGD(str(tmp_path), nonmono=1, start_averaging=True)
    cb.set_model(model)
    cb.on_train_begin()
    iterates = [1.0, 2.0, 6.0, 7.0]
    for i, value in enumerate(iterates):
        _set(model, value)
        cb.on_train_batch_end(i)
    avg = cb.average_weights()
    for a in avg:
        np.testing.assert_allclose(a, np.mean(iterates), rtol=1e-6)
    # swap in for validation / best checkpoint, swap out at epoch end
    cb.swap_in.set_model(model)
    cb.swap_in.on_epoch_end(0, {})
    for v in model.trainable_variables:
        np.testing.assert_allclose(ops.convert_to_numpy(v), 4.0)
    logs = {"val_loss": 1.0}
    cb.on_epoch_end(0, logs)
    for v in model.trainable_variables:
        np.testing.assert_allclose(ops.convert_to_numpy(v), 7.0)
    assert logs["asgd"] == 1.0


def test_state_survives_resume(tmp_path):
    model = _model()
    cb = NTASGD(str(tmp_path), nonmono=1, start_averaging=True)
    cb.set_model(model)
    for i, value in enumerate([1.0, 3.0]):
        _set(model, value)
        cb.on_train_batch_end(i)
    cb.on_epoch_end(0, {"val_loss": 2.0})
    folder = tmp_path / "checkpoint"  # a checkpoint's folder
    folder.mkdir()
    state = cb.get_checkpoint_state(str(folder))
    state = json.loads(json.dumps(state))  # as in state.json
    assert os.listdir(folder) == [state["average_file"]]

    resumed = NTASGD(str(tmp_path), nonmono=1, start_averaging=True)
    resumed.set_checkpoint_state(state, str(folder))
    resumed.set_model(model)
    resumed.on_train_begin()
    assert resumed.n_averaged == 2 and resumed.averaging
    _set(model, 8.0)
    resumed.on_train_batch_end(0)
    # (1 + 3 + 8) / 3
    for a in resumed.average_weights():
        np.testing.assert_allclose(a, 4.0, rtol=1e-6)


def test_finetune_stops_on_nonmonotone_condition(tmp_path):
    model = _model()
    cb = NTASGD(
        str(tmp_path), nonmono=1, start_averaging=True, stop_when_triggered=True
    )
    cb.set_model(model)
    model.stop_training = False
    for epoch, val in enumerate([5.0, 4.0, 4.5]):
        cb.on_epoch_end(epoch, {"val_loss": val})
        assert not model.stop_training
    cb.on_epoch_end(3, {"val_loss": 5.5})  # > min([5.0, 4.0])
    assert model.stop_training and cb.stopped_epoch == 3


def test_average_through_fit_is_the_mean_of_the_iterates(tmp_path):
    """Inside ``model.fit`` (the JAX trainer keeps the weights outside the
    variables during an epoch) the average is still that of every step's
    weights: the four SGD iterates of a linear model under MSE computed
    in closed form with NumPy."""
    model = _model()
    w0 = [ops.convert_to_numpy(v) for v in model.trainable_variables]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    cb = NTASGD(str(tmp_path), nonmono=1, start_averaging=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3)).astype("float32")
    y = rng.normal(size=(12, 2)).astype("float32")
    model.fit(
        x, y, batch_size=3, epochs=1, shuffle=False, verbose=0, callbacks=[cb]
    )
    assert cb.n_averaged == 4
    w, b = (a.astype("float64") for a in w0)
    iterates = []
    for i in range(0, 12, 3):  # d mean((xW + b - y)^2) / d(W, b)
        err = x[i : i + 3] @ w + b - y[i : i + 3]
        scale = 2.0 / err.size
        w = w - 0.1 * scale * x[i : i + 3].T @ err
        b = b - 0.1 * scale * err.sum(0)
        iterates.append((w, b))
    assert not np.allclose(iterates[0][0], iterates[-1][0])
    expect = [np.mean([it[j] for it in iterates], 0) for j in (0, 1)]
    for avg, e in zip(cb.average_weights(), expect):
        np.testing.assert_allclose(avg, e, rtol=1e-5, atol=1e-6)
    # the raw weights after fit are the last iterate, not the average
    for v, e in zip(model.trainable_variables, iterates[-1]):
        np.testing.assert_allclose(ops.convert_to_numpy(v), e, atol=1e-6)


def test_trainer_saves_averaged_best_and_raw_last(tiny_config):
    """Through the trainer's callback order: ``best.weights.h5`` holds the
    average of every step's weights (validated and saved swapped in) and
    the checkpoint's weights the raw last iterate (swapped out)."""
    import os

    from keras_rnnlm.config import apply_overrides
    from keras_rnnlm.training import prepare_run
    from keras_rnnlm.training import train

    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            "train.optimizer=sgd",
            "train.learning_rate=1.0",
            "train.nt_asgd_from_start=true",
        ],
    )
    iterates = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            iterates.append(
                [ops.convert_to_numpy(v) for v in self.model.trainable_weights]
            )

    train(cfg, callbacks=[Record()])
    _, model = prepare_run(cfg)
    out = cfg.train.out_dir

    def saved(path):
        model.load_weights(path)
        return [ops.convert_to_numpy(v) for v in model.trainable_weights]

    assert len(iterates) > 2
    assert not np.allclose(iterates[0][0], iterates[-1][0])
    mean = [np.mean(ws, 0) for ws in zip(*iterates)]
    for got, e in zip(saved(os.path.join(out, "best.weights.h5")), mean):
        np.testing.assert_allclose(got, e, rtol=1e-4, atol=1e-6)
    last = saved(os.path.join(newest_checkpoint(out), "model.weights.h5"))
    for got, e in zip(last, iterates[-1]):
        np.testing.assert_allclose(got, e, atol=1e-6)
