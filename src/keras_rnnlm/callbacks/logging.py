"""Run bookkeeping: metadata, learning curves, divergence guard."""

import csv
import io
import json
import math
import os
import sys
import time

import keras

from keras_rnnlm._environment import environment
from keras_rnnlm._environment import git_commit
from keras_rnnlm._version import PACKAGE_DIR
from keras_rnnlm._version import __version__
from keras_rnnlm.callbacks.base import StatefulCallback
from keras_rnnlm.callbacks.base import host_value
from keras_rnnlm.callbacks.base import sync_model_state
from keras_rnnlm.metrics import TokenNLL
from keras_rnnlm.runs import LEARNING_CURVE_FILE
from keras_rnnlm.runs import METADATA_FILE
from keras_rnnlm.runs import METADATA_LOG_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import is_writer
from keras_rnnlm.runs import write_point


def run_metadata(config_dict, extra=None):
    """Config, seed, versions, commit and command line of a run, and
    its environment (libraries, CPU: :func:`~keras_rnnlm._environment.
    environment`)."""
    return {
        "config": config_dict,
        "seed": config_dict.get("train", {}).get("seed"),
        "keras_rnnlm_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "git_commit": git_commit(PACKAGE_DIR),
        "command": sys.argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": environment(),
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


class LearningCurve(StatefulCallback):
    """Writes ``learning_curve.png``: the training perplexity of every
    window of batches (about ``points_per_epoch`` windows an epoch) and
    the validation perplexity at every evaluation (``val_ppl`` in the
    epoch's logs), against the epoch, titled with the run's name.

    A training point is the token-weighted mean NLL of its window's
    batches (as a perplexity), read from the model's compiled
    :class:`~keras_rnnlm.metrics.TokenNLL` (the difference of its
    running totals since the previous point), not Keras's running epoch
    mean: a one-epoch run shows how its loss fell. A model trained with
    a sampled softmax plots its sampled perplexity (over the candidates).

    The points are the callback's state (:attr:`points`): list it among
    the run's :class:`~keras_rnnlm.callbacks.checkpoint.
    TrainingCheckpoint` callbacks, before the checkpoint in the fit's
    list, and a resumed run (from an epoch or a mid-epoch checkpoint)
    plots every point of the run.

    Args:
        directory: run directory (the PNG's folder).
        title: the plot's title (the trainer: the run's name).
        points_per_epoch: training points an epoch (fewer when an epoch
            has fewer batches: then one a batch).
    """

    state_attributes = ("points",)

    def __init__(self, directory, title=None, points_per_epoch=50):
        super().__init__()
        self.directory = directory
        self.title = title
        self.points_per_epoch = max(1, int(points_per_epoch))
        self.points = []
        self._epoch = 0
        self._start = 0  # batches of the epoch done before this fit call
        self._done = 0  # batches of the epoch done
        self._last = 0  # batches of the epoch done at the last point
        self._mark = (0.0, 0.0)  # the metric's (total, count) then
        self._before = None  # a resumed epoch's totals before the kill

    # -- the epoch's progress, saved by mid-epoch checkpoints -------------
    def get_epoch_progress(self):
        metric = token_metric(self.model)
        totals = metric_totals(metric, self.model) if metric else (0.0, 0.0)
        return {
            "done": self._done,
            "last": self._last,
            "mark": list(self._mark),
            "totals": list(totals),
        }

    def set_epoch_progress(self, progress):
        self._start = self._done = int(progress["done"])
        self._last = int(progress["last"])
        self._mark = tuple(float(v) for v in progress["mark"])
        self._before = tuple(float(v) for v in progress["totals"])

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        self._start = self._done = self._last = 0
        self._mark = (0.0, 0.0)
        self._before = None

    def on_train_batch_end(self, batch, logs=None):
        self._done += 1
        steps = self._start + int(self.params.get("steps") or 0)
        window = max(1, math.ceil(steps / self.points_per_epoch))
        # A resumed epoch's metric totals are its first batch's alone
        # until the checkpoint (after this callback in the list) adds
        # those of the batches before the kill, at the end of that batch.
        before = self._before if batch == 0 else None
        if self._done - self._last >= window:
            self._add_train_point(steps, before)

    def on_epoch_end(self, epoch, logs=None):
        steps = max(
            self._done, self._start + int(self.params.get("steps") or 0)
        )
        if self._done > self._last:
            self._add_train_point(steps)
        logs = logs or {}
        if logs.get("val_ppl") is not None:
            self.points.append(
                {
                    "epoch": float(epoch + 1),
                    "split": "valid",
                    "ppl": float(logs["val_ppl"]),
                }
            )
        if is_writer():  # process 0 of several writes
            plot_learning_curve(
                self.points,
                os.path.join(self.directory, LEARNING_CURVE_FILE),
                self.title,
            )

    def _add_train_point(self, steps, before=None):
        metric = token_metric(self.model)
        if metric is None:
            return
        total, count = metric_totals(metric, self.model)
        if before is not None:
            total, count = total + before[0], count + before[1]
        tokens = count - self._mark[1]
        if tokens <= 0:
            return
        nll = (total - self._mark[0]) / tokens
        split = "train (sampled)" if getattr(metric, "prefix", "") else "train"
        self.points.append(
            {
                "epoch": self._epoch + self._done / max(steps, 1),
                "split": split,
                "ppl": _safe_exp(nll),
                "tokens": tokens,
            }
        )
        self._last = self._done
        self._mark = (total, count)


def _safe_exp(x):
    return math.exp(x) if x < 700 else math.inf


def token_metric(model):
    """The model's compiled :class:`~keras_rnnlm.metrics.TokenNLL` (the
    package's token metric, ``lm_metrics``), or ``None``."""
    for metric in model.metrics:
        # Keras gathers the compiled metrics in one container metric
        for m in (metric, *getattr(metric, "metrics", ())):
            if isinstance(m, TokenNLL):
                return m
    return None


def metric_totals(metric, model):
    """``(total NLL, tokens)`` summed by a :class:`~keras_rnnlm.metrics.
    TokenNLL` since its last reset (its Kahan sums, compensated)."""
    sync_model_state(model)
    total = float(host_value(metric.total)) - float(host_value(metric.total_c))
    count = float(host_value(metric.count)) - float(host_value(metric.count_c))
    return total, count


def learning_curve_figure(points, title=None):
    """The figure of :class:`LearningCurve`'s ``points``: perplexity (log
    scale) against the epoch, a line a split (training windows, then the
    validations with markers)."""
    from matplotlib.figure import Figure  # loaded only when a curve is drawn

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    splits = list(dict.fromkeys(p["split"] for p in points))
    for split in splits:
        xs = [p["epoch"] for p in points if p["split"] == split]
        ys = [p["ppl"] for p in points if p["split"] == split]
        if split == "valid":
            ax.plot(xs, ys, marker="o", label=split)
        else:
            ax.plot(
                xs,
                ys,
                marker="." if len(xs) <= 100 else None,
                linewidth=1.0,
                label=split,
            )
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity")
    ax.set_yscale("log")
    ax.set_xlim(left=0)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title)
    if splits:
        ax.legend()
    fig.tight_layout()
    return fig


def plot_learning_curve(points, path, title=None):
    """Writes :func:`learning_curve_figure` to ``path`` (PNG, atomically;
    the title also in the PNG's ``Title`` text field)."""
    fig = learning_curve_figure(points, title)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, metadata={"Title": title or ""})
    os.replace(tmp, path)


class EpochLog(keras.callbacks.Callback):
    """``log.csv``: one row per completed epoch, no non-finite row.

    The file is rewritten atomically from the epoch history of the run's
    :class:`~keras_rnnlm.callbacks.checkpoint.TrainingCheckpoint` when
    training begins (a resumed run: the checkpoint's epochs, whatever a
    kill or a divergence left in the file) and after every epoch (place it
    after the checkpoint, which records only finite epochs that it saved);
    the trainer rewrites it too when it finds a run complete (a kill after
    the last checkpoint, before the log).
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
            write_point("log.written")


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
