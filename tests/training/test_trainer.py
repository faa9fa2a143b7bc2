import dataclasses
import json
import math
import os

import keras
import numpy as np
import pytest
from run_dirs import checkpoint_state
from run_dirs import checkpoint_weights

from keras_rnnlm.callbacks import TrainingDivergedError
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.evaluation.static import evaluate_run
from keras_rnnlm.training import train


def test_end_to_end_learns_and_writes_run_files(tiny_config):
    cfg = apply_overrides(tiny_config, ["train.epochs=3"])
    results = train(cfg)
    out = cfg.train.out_dir
    vocab_size = json.load(open(os.path.join(out, "vocab.json")))["tokens"]
    # untrained ~ uniform over the vocabulary; the grammar allows ~4 choices
    # the grammar allows 64 sentences of 8 tokens: ~1.7 at best
    assert results["valid"]["ppl"] < 0.3 * len(vocab_size)
    assert results["test"]["ppl"] < 0.3 * len(vocab_size)
    for name in (
        "config.json",
        "vocab.json",
        "run.json",
        "log.csv",
        "learning_curve.png",
        "best.weights.h5",
        "model.keras",
        "results.json",
    ):
        assert os.path.exists(os.path.join(out, name)), name
    meta = json.load(open(os.path.join(out, "run.json")))
    assert meta["seed"] == cfg.train.seed and "git_commit" in meta
    with open(os.path.join(out, "log.csv")) as f:
        header = f.readline()
    assert "val_ppl" in header and "lr" in header


@pytest.mark.slow
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_resume_equals_uninterrupted(tiny_config, tmp_path, dropout):
    """Resuming after epoch 1 gives the weights of an uninterrupted run;
    with dropout too (the dropout seed generators' states are restored)."""
    tiny_config = apply_overrides(tiny_config, [f"model.dropout={dropout}"])
    straight = apply_overrides(
        tiny_config, [f"train.out_dir={tmp_path / 'straight'}"]
    )
    train(straight)
    interrupted = apply_overrides(
        tiny_config,
        [f"train.out_dir={tmp_path / 'resumed'}", "train.epochs=1"],
    )
    train(interrupted)  # "killed" after epoch 1
    resumed = apply_overrides(interrupted, ["train.epochs=2"])
    epochs = []

    class Epochs(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epochs.append(epoch)

    train(resumed, callbacks=[Epochs()])
    assert epochs == [1]  # only the missing epoch is trained
    state = checkpoint_state(tmp_path / "resumed")
    assert state["epoch"] == 1 and len(state["history"]) == 2
    with open(tmp_path / "resumed" / "log.csv") as f:  # appended, no repeat
        assert [line.split(",")[0] for line in f][1:] == ["0", "1"]
    for a, b in zip(checkpoint_weights(straight), checkpoint_weights(resumed)):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow
def test_evaluate_run_batch_sizes(tiny_config):
    cfg = apply_overrides(tiny_config, ["train.epochs=1"])
    train(cfg)
    r1 = evaluate_run(
        cfg.train.out_dir,
        splits=("test",),
        batch_sizes={"test": 1},
        write=False,
    )
    r3 = evaluate_run(
        cfg.train.out_dir,
        splits=("test",),
        batch_sizes={"test": 3},
        write=False,
    )
    # different streams, same model: close but token counts differ
    assert r1["test"]["tokens"] > r3["test"]["tokens"]
    assert math.isclose(r1["test"]["ppl"], r3["test"]["ppl"], rel_tol=0.2)


class _Poison(keras.callbacks.Callback):
    """Turns a weight into NaN in epoch 2 (a diverging run)."""

    def on_train_batch_end(self, batch, logs=None):
        if self._epoch == 1 and batch == 3:
            w = self.model.trainable_weights[0]
            w.assign(np.full(w.shape, np.nan, "float32"))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch


def test_nan_loss_raises_clear_error_and_keeps_checkpoint(tiny_config):
    cfg = apply_overrides(tiny_config, ["train.epochs=3"])
    with pytest.raises(TrainingDivergedError, match="epoch 2"):
        train(cfg, callbacks=[_Poison()])
    state = checkpoint_state(cfg.train.out_dir)
    assert state["epoch"] == 0  # epoch 1's checkpoint kept, not the NaNs
    weights = checkpoint_weights(cfg)
    assert all(np.isfinite(w).all() for w in weights)


def test_config_errors_before_training(tiny_config):
    from keras_rnnlm.config import ConfigError

    bad = dataclasses.replace(
        tiny_config,
        model=dataclasses.replace(
            tiny_config.model, head="tied", hidden_sizes=[16, 12]
        ),
    )
    with pytest.raises(ConfigError):
        train(bad)


def test_max_train_tokens_truncates_training_split_only(tiny_config):
    from keras_rnnlm.config import ConfigError
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.training.trainer import make_train_stream

    full_corpus = load_run_corpus(tiny_config)
    full = make_train_stream(tiny_config, full_corpus)
    n = 100
    cut = apply_overrides(tiny_config, [f"data.max_train_tokens={n}"])
    corpus = load_run_corpus(cut)
    stream = make_train_stream(cut, corpus)
    # The first n ids in batch_size streams of n // batch_size (batchify
    # drops the remainder): the prefix of the split, nothing more.
    b = tiny_config.data.batch_size
    assert stream.streams.shape == (b, n // b)
    np.testing.assert_array_equal(
        stream.streams.reshape(-1), full_corpus.train[: n - n % b]
    )
    assert full.stream_len > stream.stream_len
    # Validation, test and the vocabulary stay whole.
    np.testing.assert_array_equal(corpus.valid, full_corpus.valid)
    np.testing.assert_array_equal(corpus.test, full_corpus.test)
    assert len(corpus.vocab) == len(full_corpus.vocab)
    with pytest.raises(ConfigError, match="max_train_tokens"):
        load_run_corpus(
            apply_overrides(tiny_config, ["data.max_train_tokens=5"])
        )


@pytest.mark.slow
def test_every_epoch_reads_fit_data(tiny_config, monkeypatch):
    """Fixed windows too: one ``fit`` per epoch on ``fit_data(stream)``
    (on TensorFlow a pipeline without tf.data's background threads, which
    made two-thread training run at half speed in random epochs: see
    keras_rnnlm.data.fit_data), every epoch's windows served."""
    from keras_rnnlm.data.fit_data import fit_data
    from keras_rnnlm.training import trainer

    served = []

    def spy(stream):
        served.append((stream.epoch, len(stream)))
        return fit_data(stream)

    monkeypatch.setattr(trainer, "fit_data", spy)
    cfg = apply_overrides(tiny_config, ["train.epochs=3"])
    assert not cfg.data.variable_bptt
    train(cfg)
    assert [epoch for epoch, _ in served] == [0, 1, 2]
    assert len({n for _, n in served}) == 1 and served[0][1] > 1
