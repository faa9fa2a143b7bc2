"""Ctrl-C (SIGINT) or SIGTERM during training: a checkpoint at the
current batch, :class:`TrainingInterrupted` naming it, and a resume that
ends exactly (bit for bit) where the uninterrupted run does -- whether
the signal came in the middle of an epoch, during validation or during a
checkpoint write. The default run interrupts in the middle of an epoch;
the other points, and SIGTERM, are ``slow``."""

import json
import os
import signal

import keras
import numpy as np
import pytest
from interrupting import AtBatch
from run_dirs import checkpoint_state
from run_dirs import checkpoint_weights
from run_dirs import newest_checkpoint
from run_dirs import run_log
from tiny_configs import tiny_run_dict

from keras_rnnlm.callbacks import TrainingInterrupted
from keras_rnnlm.callbacks.validation import Validation
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train


def _config(corpus_dir, out, *overrides):
    """The tiny run of ``tests/conftest.py`` (``tiny_config``), with
    dropout (the seed generators' state matters) and mid-epoch
    checkpoints every 10 batches."""
    config = tiny_run_dict(
        corpus_dir,
        out,
        model={"dropout": 0.3},
        train={"checkpoint_every_steps": 10},
    )
    return apply_overrides(RunConfig.from_dict(config), list(overrides))


@pytest.fixture(scope="module")
def straight(tiny_corpus_dir, tmp_path_factory):
    """The uninterrupted run, once for the module."""
    out = tmp_path_factory.mktemp("straight") / "run"
    config = _config(tiny_corpus_dir, out)
    train(config)
    return config


def _signal(epoch, batch, signum=signal.SIGINT):
    """A callback that sends ``signum`` to this process at the end of
    batch ``batch`` (index in the ``fit`` call) of ``epoch``, as Ctrl-C
    would."""
    return AtBatch(epoch, batch, lambda: signal.raise_signal(signum))


def _assert_same_run(straight, resumed):
    """The weights and optimizer state, the epoch log and the results of
    the two runs are equal, bit for bit."""
    pairs = zip(checkpoint_weights(straight), checkpoint_weights(resumed))
    for a, b in pairs:
        np.testing.assert_array_equal(a, b)
    assert run_log(straight.train.out_dir) == run_log(resumed.train.out_dir)
    results = []
    for config in (straight, resumed):
        with open(os.path.join(config.train.out_dir, "results.json")) as f:
            r = json.load(f)
        results.append({s: r[s]["nll"] for s in ("valid", "test")})
    assert results[0] == results[1]


def _handlers():
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]


@pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_mid_epoch_saves_that_batch_and_resumes_exactly(
    straight, tiny_corpus_dir, tmp_path, signum
):
    config = _config(tiny_corpus_dir, tmp_path / "run")
    handlers = _handlers()
    with pytest.raises(TrainingInterrupted) as info:
        train(config, callbacks=[_signal(1, 14, signum)])
    assert _handlers() == handlers  # the previous handlers are back
    e = info.value
    assert e.signum == signum
    assert e.exit_status == 128 + signum
    # the checkpoint is at the batch of the signal, not at the last
    # scheduled one (batch 10)
    assert (e.epoch, e.batch) == (2, 15)
    assert e.batches > 15
    ckpt = os.path.join(os.path.abspath(config.train.out_dir), "checkpoint")
    assert e.checkpoint == os.path.join(ckpt, "epoch-0002-batch-000000015")
    assert f"epoch 2, batch 15/{e.batches}" in str(e)
    partial = checkpoint_state(config.train.out_dir)
    assert (partial["epoch"], partial["batches_done"]) == (1, 15)
    assert not os.path.exists(os.path.join(ckpt, "..", "train.lock"))
    train(config)
    _assert_same_run(straight, config)


@pytest.mark.slow
def test_a_signal_during_validation_stops_after_the_epoch_checkpoint(
    straight, tiny_corpus_dir, tmp_path, monkeypatch
):
    config = _config(tiny_corpus_dir, tmp_path / "run")
    evaluate = Validation.evaluate

    def interrupted_evaluate(self):
        signal.raise_signal(signal.SIGINT)  # during the first validation
        return evaluate(self)

    monkeypatch.setattr(Validation, "evaluate", interrupted_evaluate)
    with pytest.raises(TrainingInterrupted) as info:
        train(config)
    monkeypatch.undo()
    # validation and the epoch's checkpoint finished: a resume starts
    # at the next epoch
    assert (info.value.epoch, info.value.batch) == (2, 0)
    assert "the start of epoch 2" in str(info.value)
    state = checkpoint_state(config.train.out_dir)
    assert state["epoch"] == 0 and "val_loss" in state["history"][0]
    assert len(run_log(config.train.out_dir)) == 1
    train(config)
    _assert_same_run(straight, config)


@pytest.mark.slow
def test_a_signal_during_a_checkpoint_write_lets_it_finish(
    straight, tiny_corpus_dir, tmp_path, monkeypatch
):
    """A signal in the middle of the mid-epoch checkpoint after batch 20
    of epoch 1 (and, in another run, of the epoch checkpoint of epoch 1):
    the write completes, the run stops there without a second write."""
    save_weights = keras.Model.save_weights
    writes = []

    def interrupted_save(model, filepath, *args, **kwargs):
        # the checkpoint's folder, under its temporary name
        name = os.path.basename(os.path.dirname(str(filepath)))
        if f"{os.sep}checkpoint{os.sep}" in str(filepath):
            writes.append(name)
            if name == f".tmp-{target}":
                signal.raise_signal(signal.SIGINT)
        return save_weights(model, filepath, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "save_weights", interrupted_save)
    # the second mid-epoch checkpoint, after batch 20, and the first
    # epoch's checkpoint
    targets = (
        ("epoch-0001-batch-000000020", (1, 20)),
        ("epoch-0001-end", (2, 0)),
    )
    for target, where in targets:
        writes.clear()
        config = _config(tiny_corpus_dir, tmp_path / target)
        with pytest.raises(TrainingInterrupted) as info:
            train(config)
        assert (info.value.epoch, info.value.batch) == where
        assert writes[-1] == f".tmp-{target}"  # nothing written after it
        assert newest_checkpoint(config.train.out_dir).endswith(target)
        ckpt = os.path.join(config.train.out_dir, "checkpoint")
        assert not [n for n in os.listdir(ckpt) if "tmp" in n]
    monkeypatch.undo()
    for target, _ in targets:
        config = _config(tiny_corpus_dir, tmp_path / target)
        train(config)
        _assert_same_run(straight, config)


@pytest.mark.slow
def test_a_signal_without_mid_epoch_checkpoints_saves_its_batch(
    tiny_corpus_dir, tmp_path
):
    """Without ``train.checkpoint_every_*`` the signal still saves the
    batch it came at."""
    config = _config(
        tiny_corpus_dir,
        tmp_path / "run",
        "train.checkpoint_every_steps=null",
        "train.checkpoint_every_minutes=null",
        "train.epochs=1",
    )
    with pytest.raises(TrainingInterrupted) as info:
        train(config, callbacks=[_signal(0, 4)])
    assert (info.value.epoch, info.value.batch) == (1, 5)
    progress = []

    class Batches(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            progress.append(batch)

    train(config, callbacks=[Batches()])
    assert len(progress) == info.value.batches - 5


@pytest.mark.slow
def test_sigterm_outside_the_epochs_releases_the_run(
    tiny_corpus_dir, tmp_path, monkeypatch
):
    """SIGTERM during the final evaluation (no epoch running, so no
    StopOnSignal): TrainingInterrupted naming the newest checkpoint, the
    lock released, and a resume evaluates the run."""
    from keras_rnnlm.training import trainer

    config = _config(tiny_corpus_dir, tmp_path / "run", "train.epochs=1")
    evaluate = trainer.evaluate_run

    def terminated_evaluate(*args, **kwargs):
        signal.raise_signal(signal.SIGTERM)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(trainer, "evaluate_run", terminated_evaluate)
    handlers = _handlers()
    with pytest.raises(TrainingInterrupted) as info:
        train(config)
    assert _handlers() == handlers
    assert info.value.signum == signal.SIGTERM
    assert info.value.checkpoint == newest_checkpoint(config.train.out_dir)
    assert (info.value.epoch, info.value.batch) == (2, 0)
    out = config.train.out_dir
    assert not os.path.exists(os.path.join(out, "train.lock"))
    assert not os.path.exists(os.path.join(out, "results.json"))
    monkeypatch.undo()
    assert "valid" in train(config)
