"""Resumable checkpoints: a run killed in the middle of an epoch resumes
from its last mid-epoch checkpoint and ends exactly where an uninterrupted
run does (weights, optimizer state, epoch logs, NT-ASGD average)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
from interrupting import AtBatch
from interrupting import Killed
from interrupting import kill
from run_dirs import checkpoint_state
from run_dirs import checkpoint_weights
from run_dirs import newest_checkpoint
from run_dirs import run_log
from tiny_configs import tiny_run_dict

from keras_rnnlm.callbacks.checkpoint import TrainingCheckpoint
from keras_rnnlm.callbacks.checkpoint import read_checkpoint
from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import RunConfig
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.runs import RunFileError
from keras_rnnlm.training import prepare_run
from keras_rnnlm.training import train


class _Batches(keras.callbacks.Callback):
    """Counts the training batches run in each epoch."""

    def __init__(self):
        super().__init__()
        self.per_epoch = {}

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self.per_epoch.setdefault(epoch, 0)

    def on_train_batch_end(self, batch, logs=None):
        self.per_epoch[self._epoch] += 1


@pytest.fixture(scope="module")
def straight_dropout_run(tiny_corpus_dir, tmp_path_factory):
    """(config, batches per epoch) of the tiny run with dropout 0.3 and
    checkpoints every 10 batches, trained uninterrupted once for the
    module's tests that compare a killed run with it."""
    out = tmp_path_factory.mktemp("straight_dropout") / "straight"
    straight = RunConfig.from_dict(tiny_run_dict(tiny_corpus_dir, out))
    straight = apply_overrides(
        straight, ["model.dropout=0.3", "train.checkpoint_every_steps=10"]
    )
    full = _Batches()
    train(straight, callbacks=[full])
    return straight, full.per_epoch


def _kill_and_resume(cfg, tmp_path, epoch, batch, straight=None):
    """Trains ``cfg`` straight (unless ``straight``, the (config, batches
    per epoch) of that run, is given) and with a kill; returns both run
    configs and the killed run's checkpoint state."""
    if straight is None:
        straight = apply_overrides(
            cfg, [f"train.out_dir={tmp_path / 'straight'}"]
        )
        full = _Batches()
        train(straight, callbacks=[full])
        straight = straight, full.per_epoch
    straight, per_epoch = straight
    killed = apply_overrides(cfg, [f"train.out_dir={tmp_path / 'killed'}"])
    with pytest.raises(Killed):
        train(killed, callbacks=[kill(epoch, batch)])
    partial = checkpoint_state(tmp_path / "killed")
    assert partial["epoch"] == epoch
    rest = _Batches()
    train(killed, callbacks=[rest])  # resumes in the middle of ``epoch``
    # the resumed run trains only what the kill left: the rest of
    # ``epoch`` after the checkpointed batches, then the later epochs
    # (not ``epoch`` again from its start, nor the epochs before it)
    done = partial["batches_done"]
    assert done > 0
    assert rest.per_epoch == {
        e: n - done if e == epoch else n
        for e, n in per_epoch.items()
        if e >= epoch
    }
    epochs = cfg.train.epochs
    newest = newest_checkpoint(tmp_path / "killed")
    assert os.path.basename(newest) == f"epoch-{epochs:04d}-end"
    return straight, killed, partial


def _assert_same_run(straight, killed, keys):
    for a, b in zip(checkpoint_weights(straight), checkpoint_weights(killed)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    log_a = run_log(straight.train.out_dir)
    log_b = run_log(killed.train.out_dir)
    assert [r["epoch"] for r in log_a] == [r["epoch"] for r in log_b]
    for ra, rb in zip(log_a, log_b):
        for key in keys:  # the epoch means include the batches before
            np.testing.assert_allclose(  # the kill (metric totals restored)
                float(ra[key]), float(rb[key]), rtol=1e-5, err_msg=key
            )


@pytest.mark.slow
def test_mid_epoch_resume_equals_uninterrupted(straight_dropout_run, tmp_path):
    """Fixed windows, dropout, stateful carry: killed at batch 23 of epoch
    1 with checkpoints every 10 batches, the run resumes after batch 20."""
    cfg = straight_dropout_run[0]
    straight, killed, partial = _kill_and_resume(
        cfg, tmp_path, 1, 23, straight=straight_dropout_run
    )
    assert partial["batches_done"] == 20
    assert partial["stream"]["start"] == 20
    _assert_same_run(straight, killed, ["loss", "ppl", "val_loss"])


@pytest.mark.slow
def test_mid_epoch_resume_awd_variable_windows_and_averaging(
    tiny_config, tmp_path
):
    """Variable windows (lr scaled per batch), every AWD regulariser, AR/
    TAR logs, NT-ASGD averaging from the first step (its running average
    is in the mid-epoch checkpoint)."""
    cfg = apply_overrides(
        tiny_config,
        [
            "data.variable_bptt=true",
            "data.bptt_max_delta=4",
            "model.locked_dropout=true",
            "model.dropout=0.3",
            "model.dropouth=0.2",
            "model.dropouti=0.2",
            "model.dropoute=0.1",
            "model.weight_dropout=0.3",
            "model.ar_alpha=2.0",
            "model.tar_beta=1.0",
            "train.optimizer=sgd",
            "train.learning_rate=2.0",
            "train.clipnorm=0.25",
            "train.nt_asgd_from_start=true",
            "train.checkpoint_every_steps=7",
        ],
    )
    straight, killed, partial = _kill_and_resume(cfg, tmp_path, 1, 30)
    assert partial["batches_done"] == 28
    state = partial["callbacks"]["NTASGD"]
    assert state["n_averaged"] > 28
    assert state["average_file"] == "nt_asgd_average.npz"
    assert partial["progress"]["RegularizerLogger"]["n"] == 28
    _assert_same_run(straight, killed, ["loss", "nll", "ar", "tar", "val_loss"])
    a = checkpoint_state(straight.train.out_dir)["callbacks"]["NTASGD"]
    b = checkpoint_state(killed.train.out_dir)["callbacks"]["NTASGD"]
    assert a["n_averaged"] == b["n_averaged"]
    avg = [
        np.load(os.path.join(newest_checkpoint(r.train.out_dir), name))
        for r, name in (
            (straight, a["average_file"]),
            (killed, b["average_file"]),
        )
    ]
    for k in avg[0].files:
        np.testing.assert_allclose(avg[0][k], avg[1][k], atol=1e-5)


@pytest.mark.slow
def test_torn_or_stale_checkpoints_are_passed_over(
    tiny_config, tmp_path, capsys
):
    cfg = apply_overrides(
        tiny_config,
        ["train.epochs=1", "train.checkpoint_every_steps=10"],
    )
    out = tmp_path / "run"
    cfg = apply_overrides(cfg, [f"train.out_dir={out}"])
    with pytest.raises(Killed):
        train(cfg, callbacks=[kill(0, 35)])
    ckpt = out / "checkpoint"
    assert checkpoint_state(out)["batches_done"] == 30
    # A kill in the middle of the next write leaves its temporary folder
    # (removed when the run starts again); a folder without its manifest
    # (a copy by hand) is passed over, in one line.
    (ckpt / ".tmp-epoch-0001-batch-000000040").mkdir()
    torn = ckpt / "epoch-0001-batch-000000040"
    torn.mkdir()
    (torn / "model.weights.h5").write_bytes(b"torn")
    corpus, model = prepare_run(cfg)
    from keras_rnnlm.training.trainer import make_train_stream

    stream = make_train_stream(cfg, corpus)
    cp = TrainingCheckpoint(str(out), stream=stream, every_steps=10)
    assert cp.restore(model) == 0 and cp.resume_batches == 30
    assert stream.start == 30 and len(stream) == stream.num_batches
    assert not (ckpt / ".tmp-epoch-0001-batch-000000040").exists()
    err = capsys.readouterr().err.strip()
    assert err == (
        f"passing over a bad checkpoint: {torn / 'manifest.json'}: missing "
        "(written last: the checkpoint is incomplete); using "
        f"{ckpt / 'epoch-0001-batch-000000030'}"
    )
    # A mid-epoch checkpoint of an epoch that has since been checkpointed
    # whole (e.g. a copy restored by hand) is older: not resumed.
    train(cfg)
    copied = ckpt / "epoch-0001-batch-000000099"
    shutil.copytree(ckpt / "epoch-0001-end", copied)
    corpus, model = prepare_run(cfg)
    cp = TrainingCheckpoint(str(out), stream=make_train_stream(cfg, corpus))
    assert cp.restore(model) == 1 and cp.resume_batches == 0


def test_changed_model_is_a_clear_error(tiny_config, tmp_path):
    cfg = apply_overrides(
        tiny_config,
        [f"train.out_dir={tmp_path}", "train.checkpoint_every_steps=10"],
    )
    with pytest.raises(Killed):
        train(cfg, callbacks=[kill(0, 12)])
    changed = apply_overrides(cfg, ["model.hidden_sizes=[16, 16, 16]"])
    with pytest.raises(ConfigError, match=r"model.hidden_sizes: \[16, 16\]"):
        train(changed)


def test_mid_epoch_checkpoints_need_the_stream(tmp_path):
    with pytest.raises(ValueError, match="stream"):
        TrainingCheckpoint(str(tmp_path), every_minutes=5)


# -- only good states are kept -------------------------------------------


def _max_abs_checkpoint_weight(cfg):
    return max(float(np.abs(w).max()) for w in checkpoint_weights(cfg))


def _assert_one_finite_row_per_epoch(out, epochs):
    rows = run_log(out)
    assert [int(r["epoch"]) for r in rows] == list(range(epochs))
    for r in rows:
        assert all(np.isfinite(float(v)) for v in r.values()), r


@pytest.mark.slow
def test_divergence_names_a_really_good_checkpoint_and_resume_works(
    tiny_config, tmp_path
):
    """No dropout, a checkpoint after every batch and a learning rate
    multiplied by 1e36 from the second epoch. The first update of epoch 2
    explodes the weights (finite, ~1e35) while the loss stays finite
    (huge) for a while; that batch's mid-epoch checkpoint must not be
    called the last good one (resuming from it diverges again). It is
    discarded (the next batch's logs, computed with its weights, are not
    finite), the error names the end-of-epoch-1 checkpoint, and resuming
    from it with a sane schedule works."""
    from keras_rnnlm.callbacks import TrainingDivergedError

    cfg = apply_overrides(
        tiny_config,
        [
            "train.epochs=2",
            "data.max_train_tokens=1024",  # 32 batches an epoch
            "train.optimizer=sgd",
            "train.learning_rate=1.0",
            "train.checkpoint_every_steps=1",
            'train.lr_schedule={"name": "zaremba", "decay": 1e36, '
            '"start_epoch": 1}',
        ],
    )
    out = cfg.train.out_dir
    with pytest.raises(TrainingDivergedError) as e:
        train(cfg)
    message = str(e.value)
    last = os.path.join(out, "checkpoint", "epoch-0001-end")
    assert f"is {last} (end of epoch 1, val_loss" in message
    assert newest_checkpoint(out) == last  # the exploded one is removed
    assert _max_abs_checkpoint_weight(cfg) < 100
    _assert_one_finite_row_per_epoch(out, 1)  # no inf row for epoch 2
    # the advice: resume with a sane learning-rate schedule
    sane = apply_overrides(cfg, ['train.lr_schedule={"name": "constant"}'])
    results = train(sane)
    assert np.isfinite(results["test"]["ppl"])
    _assert_one_finite_row_per_epoch(out, 2)
    assert _max_abs_checkpoint_weight(cfg) < 100


@pytest.mark.slow
def test_log_csv_is_rewritten_from_the_checkpoint_on_resume(
    tiny_config, tmp_path
):
    """A kill between the log.csv write and state.json left the epoch's
    row twice; a diverged epoch left an inf row that the resumed run
    appended to. On resume, log.csv is the checkpoint's history."""
    cfg = apply_overrides(tiny_config, ["train.epochs=1"])
    out = cfg.train.out_dir
    train(cfg)
    path = os.path.join(out, "log.csv")
    with open(path) as f:
        lines = f.read().splitlines()
    header, row = lines
    inf_row = ",".join(["1"] + ["inf"] * (len(header.split(",")) - 1))
    with open(path, "a") as f:
        f.write(f"{row}\n{inf_row}\n")  # what a kill/divergence left
    train(apply_overrides(cfg, ["train.epochs=2"]))
    _assert_one_finite_row_per_epoch(out, 2)
    with open(path) as f:
        assert f.read().splitlines()[:2] == [header, row]


class _FailingWrites:
    """Makes ``save_weights`` into the checkpoint directory fail like a
    full disk, after writing half a file, from its ``n``-th call on."""

    def __init__(self, monkeypatch, n):
        import errno

        original = keras.Model.save_weights
        self.calls = 0

        def save_weights(model, filepath, *args, **kwargs):
            if f"{os.sep}checkpoint{os.sep}" in str(filepath):
                self.calls += 1
                if self.calls >= n:
                    with open(filepath, "wb") as f:
                        f.write(b"\x89HDF\r\n half a file")
                    raise OSError(errno.ENOSPC, "No space left on device")
            return original(model, filepath, *args, **kwargs)

        monkeypatch.setattr(keras.Model, "save_weights", save_weights)


def _no_temporary_files(out):
    names = os.listdir(os.path.join(out, "checkpoint"))
    assert not [n for n in names if "tmp" in n], names


@pytest.mark.slow
def test_a_failed_epoch_checkpoint_write_keeps_the_previous_one(
    tiny_config, tmp_path, monkeypatch
):
    from keras_rnnlm.callbacks import CheckpointWriteError

    cfg = apply_overrides(
        tiny_config,
        ["train.checkpoint_every_minutes=null", "data.max_train_tokens=1024"],
    )
    out = cfg.train.out_dir
    _FailingWrites(monkeypatch, n=2)  # the checkpoint of epoch 2 fails
    with pytest.raises(CheckpointWriteError, match="No space left on device"):
        train(cfg)
    _no_temporary_files(out)
    assert checkpoint_state(out)["epoch"] == 0
    monkeypatch.undo()
    epochs = []

    class Epochs(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epochs.append(epoch)

    train(cfg, callbacks=[Epochs()])  # resumes from the whole checkpoint
    assert epochs == [1]
    _assert_one_finite_row_per_epoch(out, 2)


@pytest.mark.slow
def test_a_failed_mid_epoch_write_keeps_the_previous_one(
    tiny_config, tmp_path, monkeypatch
):
    from keras_rnnlm.callbacks import CheckpointWriteError

    cfg = apply_overrides(
        tiny_config, ["train.epochs=1", "train.checkpoint_every_steps=10"]
    )
    out = cfg.train.out_dir
    _FailingWrites(monkeypatch, n=3)  # partial-3 fails
    with pytest.raises(CheckpointWriteError, match="mid-epoch"):
        train(cfg)
    _no_temporary_files(out)
    assert checkpoint_state(out)["batches_done"] == 20
    ckpt = os.path.join(out, "checkpoint")
    assert not [n for n in os.listdir(ckpt) if n.endswith("batch-000000030")]
    monkeypatch.undo()
    train(cfg)
    _assert_one_finite_row_per_epoch(out, 1)


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root writes into read-only directories",
)
def test_a_read_only_run_directory_is_a_clear_error(tiny_config, tmp_path):
    from keras_rnnlm.callbacks import CheckpointWriteError

    cfg = apply_overrides(tiny_config, ["train.epochs=1"])
    out = cfg.train.out_dir
    train(cfg)
    ckpt = os.path.join(out, "checkpoint")
    os.chmod(ckpt, 0o555)
    try:
        with pytest.raises(CheckpointWriteError, match="previous checkpoint"):
            train(apply_overrides(cfg, ["train.epochs=2"]))
        assert checkpoint_state(out)["epoch"] == 0
    finally:
        os.chmod(ckpt, 0o755)


@pytest.mark.slow
def test_random_kill_step_then_resume_equals_uninterrupted(
    tiny_config, tmp_path
):
    """Property test (few examples): a kill at a random batch of a random
    epoch, with mid-epoch checkpoints every random number of batches,
    then a resume, ends where the uninterrupted run does."""
    from hypothesis import given
    from hypothesis import settings
    from hypothesis import strategies as st

    base = apply_overrides(tiny_config, ["model.dropout=0.3"])
    straight = apply_overrides(base, [f"train.out_dir={tmp_path / 'straight'}"])
    train(straight)
    runs = iter(range(1000))

    @settings(max_examples=3, deadline=None)
    @given(
        epoch=st.integers(0, 1),
        batch=st.integers(1, 60),
        every=st.integers(1, 25),
    )
    def check(epoch, batch, every):
        out = tmp_path / f"killed{next(runs)}"
        killed = apply_overrides(
            base,
            [f"train.out_dir={out}", f"train.checkpoint_every_steps={every}"],
        )
        with pytest.raises(Killed):
            train(killed, callbacks=[kill(epoch, batch)])
        train(killed)
        _assert_same_run(straight, killed, ["loss", "ppl", "val_loss"])

    check()


# -- checkpoints are verified when read ------------------------------------


def _mid_epoch_killed(cfg, out, epoch, batch):
    """``cfg`` with checkpoints every 10 batches, trained in ``out`` until
    a kill at ``batch`` of ``epoch``; returns the run's config and its
    checkpoint folders, newest first."""
    from keras_rnnlm.callbacks.checkpoint import checkpoints

    killed = apply_overrides(
        cfg, [f"train.out_dir={out}", "train.checkpoint_every_steps=10"]
    )
    with pytest.raises(Killed):
        train(killed, callbacks=[kill(epoch, batch)])
    return killed, checkpoints(str(out))


@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_passed_over_in_one_line(
    straight_dropout_run, tmp_path, capsys
):
    """The newest checkpoint's weights truncated: the resume says so in
    one line, starts from the checkpoint before it and ends where the
    uninterrupted run does."""
    straight, per_epoch = straight_dropout_run
    cfg = straight
    killed, (newest, previous, *_) = _mid_epoch_killed(
        cfg, tmp_path / "killed", 1, 23
    )
    assert newest.endswith("epoch-0002-batch-000000020")
    assert previous.endswith("epoch-0002-batch-000000010")
    weights = os.path.join(newest, "model.weights.h5")
    size = os.path.getsize(weights)
    os.truncate(weights, size // 2)
    capsys.readouterr()
    rest = _Batches()
    train(killed, callbacks=[rest])
    assert capsys.readouterr().err == (
        f"passing over a bad checkpoint: {weights}: {size // 2} bytes, not "
        f"the {size} that manifest.json records (a truncated or replaced "
        f"file); using {previous}\n"
    )
    assert rest.per_epoch == {1: per_epoch[1] - 10}
    _assert_same_run(straight, killed, ["loss", "ppl", "val_loss"])


def test_no_good_checkpoint_is_one_line_naming_the_file(
    tiny_config, tmp_path, capsys
):
    """``{}`` written over the newest checkpoint's state.json and the
    previous one's manifest truncated: the resume stops with one line
    naming the newest one's file."""
    from keras_rnnlm.cli.errors import run_reporting_errors

    killed, (newest, previous) = _mid_epoch_killed(
        tiny_config, tmp_path / "run", 0, 23
    )
    state = os.path.join(newest, "state.json")
    size = os.path.getsize(state)
    with open(state, "w") as f:
        f.write("{}")
    manifest = os.path.join(previous, "manifest.json")
    os.truncate(manifest, 10)
    with pytest.raises(RunFileError, match="not valid JSON"):
        read_checkpoint(previous)
    capsys.readouterr()
    assert run_reporting_errors("train", lambda: train(killed)) == 2
    assert capsys.readouterr().err == (
        f"keras-rnnlm train: error: {state}: 2 bytes, not the {size} that "
        "manifest.json records (a truncated or replaced file); no "
        f"checkpoint of {killed.train.out_dir} is whole: start over with "
        "--no-resume\n"
    )
    assert not os.path.exists(os.path.join(killed.train.out_dir, "train.lock"))


def test_divergence_does_not_name_a_checkpoint_with_nan_weights(
    tiny_config, tmp_path
):
    """A NaN in the newest (mid-epoch) checkpoint's weights, with its
    manifest's digest matching (written so): the divergence message names
    the good checkpoint before it, whose weights are finite."""
    import h5py

    from keras_rnnlm.callbacks import TrainingDivergedError
    from keras_rnnlm.data.download import sha256_file

    cfg = apply_overrides(
        tiny_config,
        ["data.max_train_tokens=1024", "train.checkpoint_every_steps=10"],
    )
    out = cfg.train.out_dir

    def poison():
        folder = newest_checkpoint(out)
        assert folder.endswith("epoch-0002-batch-000000010")
        weights = os.path.join(folder, "model.weights.h5")
        with h5py.File(weights, "r+") as f:
            bias = f["layers/dense/vars/1"]
            value = bias[()]
            value[0] = np.nan
            bias[...] = value
        path = os.path.join(folder, "manifest.json")
        manifest = json.load(open(path))
        manifest["files"]["model.weights.h5"] = {
            "bytes": os.path.getsize(weights),
            "sha256": sha256_file(weights),
        }
        with open(path, "w") as f:
            json.dump(manifest, f)
        for w in model_of[0].trainable_weights:  # the loss becomes NaN
            w.assign(np.full(w.shape, np.nan, "float32"))

    model_of = []

    class Poison(AtBatch):
        def set_model(self, model):
            super().set_model(model)
            model_of[:] = [model]

    with pytest.raises(TrainingDivergedError) as e:
        train(cfg, callbacks=[Poison(1, 14, poison)])
    good = os.path.join(out, "checkpoint", "epoch-0001-end")
    assert f"is {good} (end of epoch 1, val_loss" in str(e.value)
    with pytest.raises(RunFileError, match="non-finite values"):
        read_checkpoint(newest_checkpoint(out))
