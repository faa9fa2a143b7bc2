"""Run bookkeeping: metadata, learning curves, divergence guard."""

import csv
import io
import json
import math
import os
import subprocess
import sys
import time

import keras

from keras_rnnlm._version import PACKAGE_DIR
from keras_rnnlm._version import __version__
from keras_rnnlm.runs import LEARNING_CURVE_FILE
from keras_rnnlm.runs import METADATA_FILE
from keras_rnnlm.runs import METADATA_LOG_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import is_writer


def git_commit(path=None):
    """The git commit of the working tree holding ``path`` (or None)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=5,
        )
        commit = out.stdout.strip() or None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=path or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return f"{commit}+dirty" if commit and dirty else commit
    except (OSError, subprocess.SubprocessError):
        return None


def run_metadata(config_dict, extra=None):
    """Config, seed, versions, commit and command line of a run."""
    return {
        "config": config_dict,
        "seed": config_dict.get("train", {}).get("seed"),
        "keras_rnnlm_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "git_commit": git_commit(PACKAGE_DIR),
        "command": sys.argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **(extra or {}),
    }


class RunMetadata(keras.callbacks.Callback):
    """Writes ``run.json`` (and appends to ``runs.jsonl`` on each start).

    Every number a run produces can be traced to its resolved config, seed,
    package version and git commit.
    """

    def __init__(self, directory, config_dict, extra=None):
        super().__init__()
        self.directory = directory
        self.config_dict = config_dict
        self.extra = extra

    def on_train_begin(self, logs=None):
        if not is_writer():  # process 0 of several writes
            return
        os.makedirs(self.directory, exist_ok=True)
        meta = run_metadata(self.config_dict, self.extra)
        atomic_write_text(
            os.path.join(self.directory, METADATA_FILE),
            json.dumps(meta, indent=2),
        )
        with open(os.path.join(self.directory, METADATA_LOG_FILE), "a") as f:
            f.write(json.dumps(meta) + "\n")


class LearningCurve(keras.callbacks.Callback):
    """Writes ``learning_curve.png``: train/valid perplexity per epoch.

    Reads the epoch history of the run's
    :class:`~keras_rnnlm.callbacks.checkpoint.TrainingCheckpoint` (so a
    resumed run plots all its epochs), or its own history.
    """

    def __init__(self, directory, checkpoint=None, train_key="ppl"):
        super().__init__()
        self.directory = directory
        self.checkpoint = checkpoint
        self.train_key = train_key
        self._history = []

    def on_epoch_end(self, epoch, logs=None):
        self._history.append({"epoch": epoch, **(logs or {})})
        if not is_writer():  # process 0 of several writes
            return
        history = self.checkpoint.history if self.checkpoint else None
        plot_learning_curve(
            history or self._history,
            os.path.join(self.directory, LEARNING_CURVE_FILE),
        )


def plot_learning_curve(history, path):
    """Plots train/valid perplexity (log scale) from a list of epoch logs."""
    import matplotlib  # loaded only when a curve is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg")

    epochs = [h["epoch"] + 1 for h in history]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("ppl", "train"), ("val_ppl", "valid")):
        values = [h.get(key) for h in history]
        if any(v is not None for v in values):
            ax.plot(epochs, values, marker="o", label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


class EpochLog(keras.callbacks.Callback):
    """``log.csv``: one row per completed epoch, no non-finite row.

    The file is rewritten atomically from the epoch history of the run's
    :class:`~keras_rnnlm.callbacks.checkpoint.TrainingCheckpoint` when
    training begins (a resumed run: the checkpoint's epochs, whatever a
    kill or a divergence left in the file) and after every epoch (place it
    after the checkpoint, which records only finite epochs that it saved).
    Columns: ``epoch``, then the sorted log keys.
    """

    def __init__(self, path, checkpoint):
        super().__init__()
        self.path = path
        self.checkpoint = checkpoint

    def on_train_begin(self, logs=None):
        if is_writer():  # process 0 of several writes
            write_epoch_log(self.path, self.checkpoint.history)

    def on_epoch_end(self, epoch, logs=None):
        if is_writer():
            write_epoch_log(self.path, self.checkpoint.history)


def write_epoch_log(path, history):
    """Writes ``history`` (a list of ``{"epoch": e, key: value}``) as CSV,
    atomically."""
    keys = sorted({k for row in history for k in row} - {"epoch"})
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["epoch", *keys])
    for row in history:
        writer.writerow([row["epoch"], *(row.get(k, "") for k in keys)])
    atomic_write_text(path, text.getvalue())


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


class NaNGuard(keras.callbacks.Callback):
    """Stops training at the first non-finite batch loss.

    The trainer then raises :class:`TrainingDivergedError` naming the
    batch and the last good checkpoint (which is left untouched: this
    callback runs before the epoch-end checkpoint is written).
    """

    def __init__(self):
        super().__init__()
        self.diverged_at = None

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.diverged_at = (self._epoch, batch, float(loss))
            self.model.stop_training = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch


class RunProgbar(keras.callbacks.ProgbarLogger):
    """Keras's progress bar, numbering epochs out of the run's total.

    The trainer calls ``fit`` once per epoch when the windows change
    length every epoch (variable BPTT), so Keras alone would print
    "Epoch 3/3" in a 4-epoch run (and nothing for the first epoch).

    Args:
        total_epochs: the run's number of epochs (``train.epochs``).
    """

    def __init__(self, total_epochs):
        super().__init__()
        self.total_epochs = int(total_epochs)

    def set_params(self, params):
        super().set_params(params)
        self.epochs = self.total_epochs
