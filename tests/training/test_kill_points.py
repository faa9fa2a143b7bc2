"""A training process killed (SIGKILL, as ``kill -9``) at every named
point of its run-directory writes (:data:`keras_rnnlm.runs.WRITE_POINTS`:
the lock, each step of the best weights' replacement, of an epoch and of
a mid-epoch checkpoint, the epoch log, ``model.keras``, ``results.json``)
leaves whole, verified best weights and checkpoints for a reader, and
resumes to the uninterrupted run's end, bit for bit: the checkpoint's
weights, the epoch log, the best weights, the results and the folders
kept. The kill is the process's own (``KERAS_RNNLM_KILL_AT=POINT:N``:
the N-th time it reaches POINT), the resume is ``train()`` here. The
default run kills inside the last epoch's checkpoint (weights and state
written, no manifest) and after it (before the epoch log); every other
point is ``slow``."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from run_dirs import checkpoint_weights
from run_dirs import run_log
from tiny_configs import tiny_run_dict

from keras_rnnlm.callbacks.checkpoint import checkpoints
from keras_rnnlm.callbacks.checkpoint import newest_good_checkpoint
from keras_rnnlm.config import RunConfig
from keras_rnnlm.runs import KILL_AT_VARIABLE
from keras_rnnlm.runs import WRITE_POINTS
from keras_rnnlm.runs import run_weights
from keras_rnnlm.training import train

# (point, N): the N-th time. 132 batches an epoch, a mid-epoch checkpoint
# every 10 (13 an epoch), two epochs; the best weights improve at both.
# One point in the default run (each case trains and resumes in fresh
# processes, ~20 s on 2 cores), the rest slow.
DEFAULT = [("checkpoint.pruned", 2)]
SLOW = [
    ("checkpoint.state", 2),
    ("lock.taken", 1),
    ("best.written", 1),
    ("best.kept", 1),  # at epoch 2: the first best weights kept
    ("best.recorded", 2),
    ("best.renamed", 2),
    ("checkpoint.weights", 1),
    ("checkpoint.files", 2),
    ("checkpoint.manifest", 1),
    ("checkpoint.renamed", 2),
    ("checkpoint.pruned", 1),
    ("mid_epoch_checkpoint.weights", 1),
    ("mid_epoch_checkpoint.arrays", 3),
    ("mid_epoch_checkpoint.files", 13),  # the last one of epoch 1
    ("mid_epoch_checkpoint.state", 14),  # the first one of epoch 2
    ("mid_epoch_checkpoint.manifest", 2),
    ("mid_epoch_checkpoint.renamed", 20),
    ("mid_epoch_checkpoint.pruned", 1),
    ("log.written", 2),
    ("model.written", 1),
    ("results.written", 1),
]
CASES = [
    *DEFAULT,
    *(pytest.param(*case, marks=pytest.mark.slow) for case in SLOW),
]

# Trains the config given as JSON (argv[1]) in a fresh process.
TRAIN = """
import json, sys
from keras_rnnlm.config import RunConfig
from keras_rnnlm.training import train
train(RunConfig.from_dict(json.loads(sys.argv[1])))
"""


def test_every_write_point_has_a_case():
    assert {p for p, _ in DEFAULT + SLOW} == set(WRITE_POINTS)


def _config(corpus_dir, out):
    """Dropout (the seed generators' state matters), NT-ASGD averaging
    from the start (its average is a file of every checkpoint),
    mid-epoch checkpoints every 10 batches."""
    return RunConfig.from_dict(
        tiny_run_dict(
            corpus_dir,
            out,
            model={"dropout": 0.3},
            train={
                "checkpoint_every_steps": 10,
                "nt_asgd_from_start": True,
            },
        )
    )


@pytest.fixture(scope="module")
def straight(tiny_corpus_dir, tmp_path_factory):
    """The uninterrupted run, once for the module."""
    config = _config(tiny_corpus_dir, tmp_path_factory.mktemp("straight"))
    train(config)
    return config


def _kill_at(config, point, n):
    env = {**os.environ, KILL_AT_VARIABLE: f"{point}:{n}"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    p = subprocess.run(
        [sys.executable, "-c", TRAIN, config.to_json()],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == -signal.SIGKILL, (point, n, p.stderr[-3000:])


def _results(config):
    with open(os.path.join(config.train.out_dir, "results.json")) as f:
        r = json.load(f)
    return {s: r[s]["nll"] for s in ("valid", "test")}


def _arrays(path):
    """``{dataset: bytes}`` of a weights file (the file's own bytes hold
    HDF5 timestamps)."""
    import h5py

    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                found.__setitem__(name, obj[()].tobytes())
                if isinstance(obj, h5py.Dataset)
                else None
            )
        )
    return found


def _kept(config):
    return [os.path.basename(p) for p in checkpoints(config.train.out_dir)]


@pytest.mark.parametrize("point, n", CASES)
def test_a_kill_at_any_write_point_resumes_to_the_same_run(
    straight, tiny_corpus_dir, tmp_path, point, n, capsys
):
    config = _config(tiny_corpus_dir, tmp_path / "run")
    _kill_at(config, point, n)
    # what a reader finds there now: whole, verified files
    out = config.train.out_dir
    if os.path.exists(os.path.join(out, "best.weights.h5")):
        assert run_weights(out) == os.path.join(out, "best.weights.h5")
    if checkpoints(out):
        assert newest_good_checkpoint(out)[0] == checkpoints(out)[0]
    assert capsys.readouterr().err == ""
    train(config)
    for a, b in zip(checkpoint_weights(straight), checkpoint_weights(config)):
        np.testing.assert_array_equal(a, b)
    assert run_log(config.train.out_dir) == run_log(straight.train.out_dir)
    assert _results(config) == _results(straight)
    ref = straight.train.out_dir
    for name in ("best.weights.h5", "best.previous.weights.h5"):
        assert _arrays(os.path.join(out, name)) == _arrays(
            os.path.join(ref, name)
        )
    assert _kept(config) == _kept(straight)
    names = set(os.listdir(out)) | set(
        os.listdir(os.path.join(out, "checkpoint"))
    )
    assert not [n for n in names if "tmp" in n or n.startswith(".old-")]
    assert "train.lock" not in names
    assert os.path.exists(os.path.join(out, "model.keras"))
    err = capsys.readouterr().err
    if point == "lock.taken":
        assert "taking over the lock of pid" in err
