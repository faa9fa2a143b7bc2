"""Best-model checkpoints and full, resumable training checkpoints.

The checkpoints of a run live in ``RUN/checkpoint/``, one folder each,
named by where the run stands: ``epoch-0003-end`` after three epochs,
``epoch-0004-batch-000000150`` in the fourth epoch after 150 of its
batches (:func:`checkpoint_name`). A folder holds
:data:`~keras_rnnlm.runs.CHECKPOINT_WEIGHTS_FILE` (weights and
optimizer), :data:`~keras_rnnlm.runs.CHECKPOINT_STATE_FILE`, a mid-epoch
checkpoint's :data:`~keras_rnnlm.runs.CHECKPOINT_ARRAYS_FILE`, the files
of callbacks (NT-ASGD's running average) and, written last,
:data:`~keras_rnnlm.runs.CHECKPOINT_MANIFEST_FILE`: where the run stands
and the size and SHA-256 of every other file. It is written whole under
a temporary name (``.tmp-NAME``) and renamed once, so a checkpoint is
there complete or not at all; the previous checkpoint is removed only
after the new one is in place (the newest two are kept). Reading one
(:func:`read_checkpoint`) verifies the manifest, the digests and that
the weights, the optimizer and the arrays are finite; a resume takes the
newest checkpoint that verifies (:func:`newest_good_checkpoint`), saying
in one line why it passed over a newer one.
"""

import json
import math
import os
import re
import shutil
import sys
import time

import keras
import numpy as np

from keras_rnnlm.callbacks.base import StatefulCallback
from keras_rnnlm.callbacks.base import host_value
from keras_rnnlm.callbacks.base import sync_model_state
from keras_rnnlm.data.download import sha256_file
from keras_rnnlm.metrics import TokenNLL
from keras_rnnlm.runs import BEST_WEIGHTS_FILE
from keras_rnnlm.runs import CHECKPOINT_ARRAYS_FILE
from keras_rnnlm.runs import CHECKPOINT_DIR
from keras_rnnlm.runs import CHECKPOINT_MANIFEST_FILE
from keras_rnnlm.runs import CHECKPOINT_STATE_FILE
from keras_rnnlm.runs import CHECKPOINT_WEIGHTS_FILE
from keras_rnnlm.runs import RunFileError
from keras_rnnlm.runs import is_writer
from keras_rnnlm.runs import local_scope
from keras_rnnlm.runs import weights_file_problem
from keras_rnnlm.runs import write_best_weights
from keras_rnnlm.runs import write_point

#: Checkpoints kept: the newest and the one before it (a fallback).
KEEP_CHECKPOINTS = 2

_NAME = re.compile(r"^epoch-(\d+)-(?:end|batch-(\d+))$")

# What every checkpoint's state holds, and a mid-epoch one's too.
_STATE_KEYS = ("epoch", "history", "callbacks", "stream")
_MID_EPOCH_KEYS = ("batches_done", "progress")


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a read-only or full disk); the
    previous checkpoint is kept as the newest."""


def finite_logs(logs):
    """Whether every value of the epoch or batch logs is finite."""
    return all(math.isfinite(float(v)) for v in (logs or {}).values())


def finite_training_state(model):
    """Whether every weight of ``model`` and every variable of its
    optimizer (momenta, averages, iteration count) is finite. With
    several processes every one must call it (the carried state is
    gathered, :func:`~keras_rnnlm.callbacks.base.host_value`)."""
    variables = list(model.weights)
    if model.optimizer is not None and model.optimizer.built:
        variables += list(model.optimizer.variables)
    for v in variables:
        if "float" not in str(v.dtype):
            continue
        if not np.all(np.isfinite(host_value(v))):
            return False
    return True


# -- the checkpoint folders --------------------------------------------------


def checkpoint_name(epochs_done, batches_done=0):
    """The folder of the checkpoint after ``epochs_done`` whole epochs and
    ``batches_done`` batches of the next one: ``epoch-0003-end``,
    ``epoch-0004-batch-000000150``."""
    if batches_done:
        return f"epoch-{epochs_done + 1:04d}-batch-{int(batches_done):09d}"
    return f"epoch-{epochs_done:04d}-end"


def _position(name):
    """``(epochs_done, batches_done)`` of a checkpoint folder's name, or
    ``None`` for another name."""
    m = _NAME.match(name)
    if m is None:
        return None
    if m[2] is None:
        return int(m[1]), 0
    return int(m[1]) - 1, int(m[2])


def checkpoints(run_dir):
    """The checkpoint folders of ``run_dir``, newest first (whatever their
    contents: :func:`read_checkpoint` checks them)."""
    directory = os.path.join(run_dir, CHECKPOINT_DIR)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [
        (_position(name), name)
        for name in names
        if _position(name) is not None
        and os.path.isdir(os.path.join(directory, name))
    ]
    return [os.path.join(directory, name) for _, name in sorted(found)[::-1]]


def _read_json(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunFileError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: not a JSON object")
    return data


def _write_json(path, data):
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=2))
        f.flush()
        os.fsync(f.fileno())


def _file_entry(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())  # on disk before the manifest vouches for it
    return {"bytes": os.path.getsize(path), "sha256": sha256_file(path)}


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # a system that cannot open directories
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_checkpoint(path):
    """The manifest and the state of the checkpoint folder ``path``,
    verified: the manifest lists the weights and the state, every file it
    lists has its size and SHA-256, the weights and optimizer variables
    and the arrays are finite, and the state has its keys. Raises
    :class:`~keras_rnnlm.runs.RunFileError` naming the first file that
    fails."""
    manifest_path = os.path.join(path, CHECKPOINT_MANIFEST_FILE)
    if not os.path.exists(manifest_path):
        raise RunFileError(
            f"{manifest_path}: missing (written last: the checkpoint is "
            "incomplete)"
        )
    manifest = _read_json(manifest_path)
    files = manifest.get("files")
    needed = (CHECKPOINT_WEIGHTS_FILE, CHECKPOINT_STATE_FILE)
    if not isinstance(files, dict) or any(n not in files for n in needed):
        raise RunFileError(
            f"{manifest_path}: does not list the checkpoint's "
            f"{' and '.join(needed)}"
        )
    for name, entry in files.items():
        file = os.path.join(path, name)
        entry = entry if isinstance(entry, dict) else {}
        try:
            size = os.path.getsize(file)
            digest = sha256_file(file) if size == entry.get("bytes") else None
        except FileNotFoundError:
            raise RunFileError(f"{file}: missing") from None
        except OSError as e:
            raise RunFileError(f"{file}: {e.strerror or e}") from None
        if size != entry.get("bytes"):
            raise RunFileError(
                f"{file}: {size} bytes, not the {entry.get('bytes')} that "
                f"{CHECKPOINT_MANIFEST_FILE} records (a truncated or "
                "replaced file)"
            )
        if digest != entry.get("sha256"):
            raise RunFileError(
                f"{file}: its SHA-256 is not the one "
                f"{CHECKPOINT_MANIFEST_FILE} records (a corrupt file)"
            )
    weights = os.path.join(path, CHECKPOINT_WEIGHTS_FILE)
    problem = weights_file_problem(weights)
    if problem:
        raise RunFileError(f"{weights}: {problem}")
    if CHECKPOINT_ARRAYS_FILE in files:
        _check_finite_arrays(os.path.join(path, CHECKPOINT_ARRAYS_FILE))
    state_path = os.path.join(path, CHECKPOINT_STATE_FILE)
    state = _read_json(state_path)
    keys = _STATE_KEYS + (
        _MID_EPOCH_KEYS if manifest.get("batches_done") else ()
    )
    for key in keys:
        if key not in state:
            raise RunFileError(f"{state_path}: lacks {key!r}")
    return manifest, state


def _check_finite_arrays(path):
    try:
        with np.load(path) as f:
            bad = [
                k
                for k in f.files
                if f[k].dtype.kind == "f" and not np.all(np.isfinite(f[k]))
            ]
    except (OSError, ValueError, KeyError) as e:
        raise RunFileError(f"{path}: not a readable array file ({e})") from e
    if bad:
        raise RunFileError(f"{path}: non-finite values in {bad[0]}")


def newest_good_checkpoint(run_dir, say=None):
    """``(path, manifest, state)`` of the newest checkpoint of ``run_dir``
    that :func:`read_checkpoint` verifies, or ``None`` when there is none.
    A newer one that fails is passed over, in one line to ``say`` (if
    given); when every one fails, the newest one's
    :class:`~keras_rnnlm.runs.RunFileError` is raised."""
    failed = []
    for path in checkpoints(run_dir):
        try:
            manifest, state = read_checkpoint(path)
        except RunFileError as e:
            failed.append(e)
            continue
        if failed and say is not None:
            for e in failed:
                say(f"passing over a bad checkpoint: {e}; using {path}")
        return path, manifest, state
    if failed:
        raise RunFileError(
            f"{failed[0]}; no checkpoint of {run_dir} is whole: start over "
            "with --no-resume"
        )
    return None


def saved_progress(run_dir):
    """Where the newest checkpoint of the run directory ``run_dir``
    stands, from its name and manifest alone (nothing is verified or
    loaded): ``{"checkpoint": its folder (absolute) or None,
    "epochs_done": whole epochs done, "batches_done": batches of the next
    epoch done (a mid-epoch checkpoint), "epoch_batches": that epoch's
    number of batches (or None), "stopped": whether a callback stopped
    training at the last epoch (NT-ASGD's stop_on_nonmono)}``."""
    found = checkpoints(os.path.abspath(run_dir))
    if not found:
        return {
            "checkpoint": None,
            "epochs_done": 0,
            "batches_done": 0,
            "epoch_batches": None,
            "stopped": False,
        }
    path = found[0]
    epochs_done, batches_done = _position(os.path.basename(path))
    try:
        manifest = _read_json(os.path.join(path, CHECKPOINT_MANIFEST_FILE))
    except RunFileError:
        manifest = {}
    return {
        "checkpoint": path,
        "epochs_done": epochs_done,
        "batches_done": batches_done,
        "epoch_batches": manifest.get("epoch_batches"),
        "stopped": bool(manifest.get("stopped")),
    }


def checkpoint_history(run_dir):
    """The epoch history (one dict an epoch) of the newest good checkpoint
    of ``run_dir``; ``[]`` without one."""
    try:
        found = newest_good_checkpoint(run_dir)
    except RunFileError:
        return []
    return [] if found is None else list(found[2]["history"])


def _remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


def tidy_checkpoints(run_dir, resumed=None):
    """Removes what killed writes left in ``run_dir``'s checkpoints
    (``.tmp-*``, ``.old-*`` folders) and all but the newest
    :data:`KEEP_CHECKPOINTS` folders; with ``resumed`` (the folder a
    resume starts from), the newer ones first (they failed to verify:
    :func:`newest_good_checkpoint`). For the run's writer."""
    directory = os.path.join(run_dir, CHECKPOINT_DIR)
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith((".tmp-", ".old-")):
            _remove_tree(os.path.join(directory, name))
    found = checkpoints(run_dir)
    if resumed is not None and resumed in found:
        for path in found[: found.index(resumed)]:
            _remove_tree(path)
        found = found[found.index(resumed) :]
    for path in found[KEEP_CHECKPOINTS:]:
        _remove_tree(path)


class BestCheckpoint(StatefulCallback):
    """Saves the weights whenever the monitored value improves.

    Writes ``<directory>/best.weights.h5`` (model weights only) and
    ``best.json`` (epoch, value and SHA-256; the weights before them are
    kept as ``best.previous.weights.h5``:
    :func:`~keras_rnnlm.runs.write_best_weights`). Place after
    Validation. With several processes every one tracks the best value,
    process 0 writes (:func:`~keras_rnnlm.runs.is_writer`).

    Args:
        directory: run directory.
        monitor: log key (default ``val_loss``), lower is better.
    """

    state_attributes = ("best", "best_epoch")

    def __init__(self, directory, monitor="val_loss"):
        super().__init__()
        self.directory = directory
        self.monitor = monitor
        self.best = None
        self.best_epoch = None

    @property
    def path(self):
        return os.path.join(self.directory, BEST_WEIGHTS_FILE)

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or not math.isfinite(float(value)):
            return
        if self.best is None or float(value) < self.best:
            self.best, self.best_epoch = float(value), int(epoch)
            if not is_writer():
                return
            try:
                os.makedirs(self.directory, exist_ok=True)
                with local_scope():  # process 0 alone
                    write_best_weights(
                        self.directory,
                        self.model.save_weights,
                        {"epoch": int(epoch), self.monitor: self.best},
                    )
            except OSError as e:
                raise CheckpointWriteError(
                    f"Could not write the best weights to {self.path}: {e}"
                ) from e


def _seed_generators(model):
    # Keyed by position in the (deterministic) layer walk plus name: layer
    # paths are not set in functional models and cell names repeat.
    layers = model._flatten_layers(include_self=True)
    for k, layer in enumerate(layers):
        for i, sg in enumerate(getattr(layer, "_seed_generators", ())):
            yield f"{k}:{layer.name}/{i}", sg


def seed_generator_states(model):
    """``{key: state list}`` of every SeedGenerator of ``model``'s layers."""
    return {
        key: keras.ops.convert_to_numpy(sg.state.value).tolist()
        for key, sg in _seed_generators(model)
    }


def set_seed_generator_states(model, states):
    """Restores :func:`seed_generator_states`; unknown keys are errors."""
    generators = dict(_seed_generators(model))
    unknown = set(states) - set(generators)
    if unknown:
        raise ValueError(
            f"Checkpoint has seed generators {sorted(unknown)} that the "
            "model does not have: was the model config changed?"
        )
    for key, value in states.items():
        sg = generators[key]
        sg.state.assign(np.asarray(value, dtype=sg.state.dtype))


class TrainingCheckpoint(keras.callbacks.Callback):
    """Everything needed to resume a run after it is killed.

    After every epoch (it must be the last callback of the list but the
    epoch log, the signal handler and the progress bar) writes a
    checkpoint folder (see the module's docstring), ``epoch-NNNN-end``:

    * the model weights **and optimizer state** (iteration count,
      momenta; Keras saves the compiled optimizer with the weights);
    * ``state.json``: the finished epoch, the epoch-log history, every
      :class:`StatefulCallback`'s state (a callback with
      ``get_checkpoint_state(folder)`` writes its own files into the
      folder, and gets them back with ``set_checkpoint_state(state,
      folder)``), the data stream's state and the random-number state:
      every ``keras.random.SeedGenerator`` state of the model's layers
      (dropout masks), which ``save_weights`` does not store; without it
      a resumed run would redraw the first epoch's masks;
    * the manifest, written last.

    **Mid-epoch checkpoints** (``every_steps`` / ``every_minutes``; epochs
    of WikiText-103, or of WikiText-2 on one CPU core, take hours): during
    an epoch, every ``every_steps`` batches or ``every_minutes`` minutes,
    it also writes a folder ``epoch-NNNN-batch-BBBBBBBBB`` with the
    weights and optimizer, ``arrays.npz`` (every non-trainable variable
    of the model -- the recurrent state carried to the next batch, the
    seed generators, AR/TAR buffers -- and the metrics' running totals of
    the epoch) and a ``state.json`` that adds the number of batches done
    and the epoch progress of callbacks with ``get_epoch_progress``. A
    run resumed from one continues the epoch at the next batch with the
    same carried state, dropout masks, windows and averages: its weights
    and its epoch log equal an uninterrupted run's (tested).

    **Only good states are kept.** A checkpoint is written only when the
    logs since the previous one are finite and so are the model's weights
    and the optimizer's variables. A mid-epoch checkpoint is confirmed by
    the next batch, whose loss is computed with its weights: if that loss
    is not finite (exploded but finite weights), the checkpoint is removed
    and the previous one is the newest again. When the state is not
    finite :attr:`diverged` says where and training stops. A write that
    fails (read-only or full disk) removes its own files and raises
    :class:`CheckpointWriteError`: the newest checkpoint on disk is always
    a whole one.

    :meth:`restore` loads the newest good checkpoint
    (:func:`newest_good_checkpoint`) into a freshly built, compiled model
    and returns the epoch to continue from (``initial_epoch`` of ``fit``);
    :attr:`resume_batches` is the number of that epoch's batches already
    done (0 after an epoch checkpoint).

    **Several processes** (``keras.distribution.initialize``): every
    process runs the checks and gathers what a checkpoint holds (the
    batch-sharded carried state comes from all of them), process 0 alone
    writes and removes files (:func:`~keras_rnnlm.runs.is_writer`), and
    every process restores from the same files.

    Args:
        directory: run directory.
        callbacks: the other callbacks of the run (the states of the
            :class:`StatefulCallback` ones are saved; those with
            ``get_epoch_progress``/``set_epoch_progress`` also have their
            partial-epoch progress saved in mid-epoch checkpoints).
        stream: the training data stream (``get_state``/``set_state``; its
            ``set_epoch(epoch, start)`` serves an epoch from a window on).
        every_steps: mid-epoch checkpoint every this many batches.
        every_minutes: mid-epoch checkpoint every this many minutes.
    """

    def __init__(
        self,
        directory,
        callbacks=(),
        stream=None,
        every_steps=None,
        every_minutes=None,
    ):
        super().__init__()
        self.run_dir = directory
        self.directory = os.path.join(directory, CHECKPOINT_DIR)
        self.callbacks = list(callbacks)
        self.stream = stream
        self.every_steps = None if every_steps is None else int(every_steps)
        self.every_minutes = (
            None if every_minutes is None else float(every_minutes)
        )
        if (self.every_steps or self.every_minutes) and stream is None:
            raise ValueError(
                "Mid-epoch checkpoints need the training stream (to know "
                "where in the epoch to resume)."
            )
        self.history = []
        self.resume_batches = 0
        self.diverged = None
        self._unconfirmed = None  # the newest mid-epoch checkpoint's folder
        self._pending = None  # (folder, state) of the checkpoint resumed
        self._pending_metrics = None
        self._epoch = 0
        self._saved_at = None
        self._since = 0
        self._clock = time.monotonic()

    def _stateful(self):
        return [c for c in self.callbacks if isinstance(c, StatefulCallback)]

    def _progress(self):
        return [c for c in self.callbacks if hasattr(c, "get_epoch_progress")]

    # -- writing a checkpoint folder -------------------------------------------
    def _write(self, name, kind, what, state, arrays=None, manifest=None):
        """Writes the checkpoint folder ``name`` whole (``kind``: the
        prefix of its named points, :data:`~keras_rnnlm.runs.
        WRITE_POINTS`); returns its path."""
        final = os.path.join(self.directory, name)
        tmp = os.path.join(self.directory, f".tmp-{name}")
        aside = os.path.join(self.directory, f".old-{name}")
        try:
            _remove_tree(tmp)
            os.makedirs(tmp)
            with local_scope():  # process 0 alone
                self.model.save_weights(
                    os.path.join(tmp, CHECKPOINT_WEIGHTS_FILE)
                )
            write_point(f"{kind}.weights")
            if arrays is not None:
                np.savez(os.path.join(tmp, CHECKPOINT_ARRAYS_FILE), **arrays)
                write_point(f"{kind}.arrays")
            state["callbacks"] = self._callback_states(tmp)
            own = {CHECKPOINT_WEIGHTS_FILE, CHECKPOINT_ARRAYS_FILE}
            if set(os.listdir(tmp)) - own:
                write_point(f"{kind}.files")
            _write_json(os.path.join(tmp, CHECKPOINT_STATE_FILE), state)
            write_point(f"{kind}.state")
            files = {
                n: _file_entry(os.path.join(tmp, n))
                for n in sorted(os.listdir(tmp))
            }
            _write_json(
                os.path.join(tmp, CHECKPOINT_MANIFEST_FILE),
                {**(manifest or {}), "files": files},
            )
            _fsync_dir(tmp)
            write_point(f"{kind}.manifest")
            if os.path.exists(final):  # a checkpoint passed over, redone
                _remove_tree(aside)
                os.rename(final, aside)
            os.rename(tmp, final)
            _fsync_dir(self.directory)
            write_point(f"{kind}.renamed")
            _remove_tree(aside)
        except OSError as e:
            _remove_tree(tmp)
            raise CheckpointWriteError(
                f"Could not write {what} to {final}: {e}. The previous "
                "checkpoint is kept; free space or fix the permissions and "
                "resume."
            ) from e
        return final

    def _callback_states(self, folder):
        states = {}
        for c in self._stateful():
            get = getattr(c, "get_checkpoint_state", None)
            states[c.state_key] = get(folder) if get else c.get_state()
        return states

    def _prune(self, kind):
        """Removes all but the newest :data:`KEEP_CHECKPOINTS`."""
        for path in checkpoints(self.run_dir)[KEEP_CHECKPOINTS:]:
            _remove_tree(path)
        write_point(f"{kind}.pruned")

    # -- epoch checkpoints -----------------------------------------------------
    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        if not finite_logs(logs):
            # diverged: keep the last good checkpoint untouched
            self._diverge(epoch, "the epoch's logs")
            return
        if not finite_training_state(self.model):
            self._diverge(epoch, "the weights or optimizer state at its end")
            return
        history = [
            *self.history,
            {"epoch": epoch, **{k: float(v) for k, v in logs.items()}},
        ]
        # a callback (NT-ASGD's stop_on_nonmono) ended the run here
        stopped = bool(self.model.stop_training) and self.diverged is None
        state = {
            "epoch": epoch,
            "history": history,
            "stream": self.stream.get_state() if self.stream else None,
            "seed_generators": seed_generator_states(self.model),
            "stopped": stopped,
        }
        if is_writer():
            self._write(
                checkpoint_name(epoch + 1),
                "checkpoint",
                f"the checkpoint of epoch {epoch + 1}",
                state,
                manifest={
                    "epochs_done": epoch + 1,
                    "batches_done": 0,
                    "epoch_batches": None,
                    "stopped": stopped,
                },
            )
            self._prune("checkpoint")
        self.history = history
        self._unconfirmed = None

    def _diverge(self, epoch, what):
        if self.diverged is None:  # the first sign
            self.diverged = (int(epoch), what)
        self.model.stop_training = True

    def newest(self):
        """A description of the newest good checkpoint on disk (``None``
        if there is none): what a resume starts from."""
        try:
            found = newest_good_checkpoint(self.run_dir)
        except RunFileError:
            return None
        if found is None:
            return None
        path, manifest, state = found
        if manifest.get("batches_done"):
            return (
                f"{path} (epoch {state['epoch'] + 1} after "
                f"{state['batches_done']} batches)"
            )
        last = state["history"][-1] if state["history"] else {}
        val = last.get("val_loss")
        tail = f", val_loss {val:.4f}" if val is not None else ""
        return f"{path} (end of epoch {state['epoch'] + 1}{tail})"

    # -- mid-epoch checkpoints ---------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        self._since = 0
        self._clock = time.monotonic()
        pending, self._pending = self._pending, None
        if pending is not None and pending[1]["epoch"] == epoch:
            folder, state = pending
            self._apply_partial_arrays(folder)
            for c in self._progress():
                if c.state_key in state["progress"]:
                    c.set_epoch_progress(state["progress"][c.state_key])

    def on_train_batch_end(self, batch, logs=None):
        if self._pending_metrics is not None:
            self._merge_metric_totals()
        if self._unconfirmed is not None:
            # this batch's loss was computed with the weights of the last
            # mid-epoch checkpoint: it confirms or discards them
            good = finite_logs(logs)
            self._confirm(good)
            if not good:
                self._diverge(self._epoch, f"the logs of batch {batch}")
        if not (self.every_steps or self.every_minutes):
            return
        self._since += 1
        due = (self.every_steps and self._since >= self.every_steps) or (
            self.every_minutes
            and time.monotonic() - self._clock >= 60.0 * self.every_minutes
        )
        if not due or batch + 1 >= len(self.stream):
            return  # the epoch's own checkpoint follows the last batch
        self._since = 0
        self._clock = time.monotonic()
        if not finite_logs(logs):
            return
        sync_model_state(self.model)
        if not finite_training_state(self.model):
            self._diverge(self._epoch, f"the weights after batch {batch}")
            return
        self._save_partial(self.stream.start + batch + 1)

    def save_batch(self, batch, logs=None):
        """Writes a mid-epoch checkpoint after batch ``batch`` (index in
        the ``fit`` call) now, as :meth:`on_train_batch_end` does when one
        is due (an interrupted run: :class:`~keras_rnnlm.callbacks.
        interrupt.StopOnSignal`); nothing when this batch's is written
        already, when the run has no stream or when the logs or the state
        are not finite (the newest checkpoint stays the previous one)."""
        if self.stream is None:
            return
        done = self.stream.start + batch + 1
        if self._saved_at == (self._epoch, done) or not finite_logs(logs):
            return
        sync_model_state(self.model)
        if not finite_training_state(self.model):
            self._diverge(self._epoch, f"the weights after batch {batch}")
            return
        self._save_partial(done)

    def progress(self):
        """:func:`saved_progress` of the run."""
        return saved_progress(self.run_dir)

    def _confirm(self, good):
        folder, self._unconfirmed = self._unconfirmed, None
        if not is_writer():
            return
        if good:
            self._prune("mid_epoch_checkpoint")
        else:  # exploded weights: the previous checkpoint is the newest
            _remove_tree(folder)

    def _save_partial(self, batches_done):
        self._saved_at = (self._epoch, int(batches_done))
        # gathered in every process (collectives), written by one
        values = {
            **{
                f"v{i}": host_value(v)
                for i, v in enumerate(self.model.non_trainable_variables)
            },
            **{
                f"m{i}": host_value(v)
                for i, v in enumerate(self.model.metrics_variables)
            },
        }
        name = checkpoint_name(self._epoch, batches_done)
        if not is_writer():
            self._unconfirmed = name
            return
        epoch_batches = self.stream.start + len(self.stream)
        state = {
            "epoch": self._epoch,
            "batches_done": int(batches_done),
            "epoch_batches": epoch_batches,
            "history": self.history,
            "progress": {
                c.state_key: c.get_epoch_progress() for c in self._progress()
            },
            "stream": {
                **self.stream.get_state(),
                "epoch": self._epoch,
                "start": int(batches_done),
            },
        }
        # the previous checkpoint stays until the next batch confirms this
        # one (:meth:`_confirm`)
        self._unconfirmed = self._write(
            name,
            "mid_epoch_checkpoint",
            "a mid-epoch checkpoint",
            state,
            arrays=values,
            manifest={
                "epochs_done": self._epoch,
                "batches_done": int(batches_done),
                "epoch_batches": epoch_batches,
                "stopped": False,
            },
        )

    @staticmethod
    def _check_arrays(path, arrays, prefix, variables):
        n = sum(1 for k in arrays if k.startswith(prefix))
        if n != len(variables):
            kind = "metric" if prefix == "m" else "non-trainable"
            raise RunFileError(
                f"{path} holds {n} {kind} variables but the model has "
                f"{len(variables)}: was the model config changed since the "
                "checkpoint?"
            )
        out = []
        for i, v in enumerate(variables):
            value = arrays[f"{prefix}{i}"]
            if tuple(value.shape) != tuple(v.shape):
                raise RunFileError(
                    f"{path}: variable {v.path} has shape {v.shape}, the "
                    f"checkpoint {value.shape}: was the model config "
                    "changed since the checkpoint?"
                )
            out.append((v, value.astype(v.dtype)))
        return out

    def _apply_partial_arrays(self, folder):
        path = os.path.join(folder, CHECKPOINT_ARRAYS_FILE)
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
        pairs = self._check_arrays(
            path, arrays, "v", self.model.non_trainable_variables
        )
        for v, value in pairs:
            v.assign(value)
        self._pending_metrics = (
            path,
            {k: a for k, a in arrays.items() if k.startswith("m")},
        )

    def _merge_metric_totals(self):
        # On TensorFlow the compiled metrics are built by the first train
        # step, after ``on_epoch_begin``; so the totals of the batches
        # before the kill are added after the resumed epoch's first batch.
        # Every metric of a run accumulates sums: Keras's loss tracker
        # (total / count: added), the token metrics (Kahan-summed total /
        # count with their compensations: the first batch's sum is added
        # to the saved sum as the uninterrupted run's Kahan step adds it,
        # so the epoch's figures are the same to the bit).
        path, arrays = self._pending_metrics
        self._pending_metrics = None
        sync_model_state(self.model)
        saved = self._check_arrays(
            path, arrays, "m", self.model.metrics_variables
        )
        saved = {id(v): value for v, value in saved}
        merged = set()
        for acc, comp in _kahan_sums(self.model):
            if id(acc) not in saved or id(comp) not in saved:
                continue
            total, compensation = saved[id(acc)], saved[id(comp)]
            y = host_value(acc).astype(total.dtype) - compensation
            t = total + y
            acc.assign(t)
            comp.assign((t - total) - y)
            merged |= {id(acc), id(comp)}
        for v in self.model.metrics_variables:
            if id(v) in saved and id(v) not in merged:
                v.assign(v.value + saved[id(v)])

    # -- resume --------------------------------------------------------------
    def restore(self, model):
        """Loads the newest good checkpoint (passing over, in one line on
        stderr, a newer one that does not verify); returns the next epoch
        to run (0 if none) and sets :attr:`resume_batches`. Raises
        :class:`~keras_rnnlm.runs.RunFileError` when there are
        checkpoints but none is good, or one does not fit ``model``."""
        self.resume_batches = 0
        found = newest_good_checkpoint(self.run_dir, say=_say)
        if found is None:
            self._refuse_older_layout()
            if is_writer():
                tidy_checkpoints(self.run_dir)
            return 0
        folder, manifest, state = found
        if is_writer():
            tidy_checkpoints(self.run_dir, resumed=folder)
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        weights = os.path.join(folder, CHECKPOINT_WEIGHTS_FILE)
        try:
            model.load_weights(weights)
        except ValueError as e:
            raise RunFileError(
                f"{weights}: does not fit the model of the run's config "
                f"({str(e).splitlines()[0]})"
            ) from e
        mid_epoch = bool(manifest.get("batches_done"))
        if mid_epoch:
            # The non-trainable variables (carried state, seed generators)
            # and the metrics' totals are applied when the epoch begins,
            # after the epoch-begin resets.
            self._pending = (folder, state)
            self.resume_batches = int(state["batches_done"])
        else:
            set_seed_generator_states(model, state.get("seed_generators", {}))
        for c in self._stateful():
            if c.state_key not in state["callbacks"]:
                continue
            set_saved = getattr(c, "set_checkpoint_state", None)
            if set_saved is not None:
                set_saved(state["callbacks"][c.state_key], folder)
            else:
                c.set_state(state["callbacks"][c.state_key])
        if self.stream is not None and state.get("stream"):
            self.stream.set_state(state["stream"])
        self.history = list(state["history"])
        self._saved_at = None
        if mid_epoch:
            return int(state["epoch"])
        return int(state["epoch"]) + 1

    def _refuse_older_layout(self):
        older = [
            n
            for n in ("last.weights.h5", "state.json", "partial.json")
            if os.path.exists(os.path.join(self.directory, n))
        ]
        if older:
            raise RunFileError(
                f"{self.directory} holds a checkpoint in a layout this "
                f"version does not resume ({', '.join(older)}; no checkpoint "
                "folders): start over with --no-resume"
            )


def _kahan_sums(model):
    """``(sum, compensation)`` of every Kahan sum of ``model``'s compiled
    token metrics (:class:`~keras_rnnlm.metrics.TokenNLL`)."""
    for metric in model.metrics:
        # Keras gathers the compiled metrics in one container metric
        for m in (metric, *getattr(metric, "metrics", ())):
            if isinstance(m, TokenNLL):
                yield m.total, m.total_c
                yield m.count, m.count_c


def _say(message):
    print(message, file=sys.stderr)
