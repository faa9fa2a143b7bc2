"""Best-model checkpoints and full, resumable training checkpoints."""

import json
import math
import os
import time

import keras
import numpy as np

from keras_rnnlm.callbacks.base import StatefulCallback
from keras_rnnlm.callbacks.base import host_value
from keras_rnnlm.callbacks.base import sync_model_state
from keras_rnnlm.runs import BEST_FILE
from keras_rnnlm.runs import BEST_WEIGHTS_FILE
from keras_rnnlm.runs import CHECKPOINT_DIR
from keras_rnnlm.runs import CHECKPOINT_STATE_FILE
from keras_rnnlm.runs import CHECKPOINT_WEIGHTS_FILE
from keras_rnnlm.runs import PARTIAL_STATE_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import is_writer
from keras_rnnlm.runs import local_scope


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


def saved_progress(run_dir):
    """Where the checkpoint of the run directory ``run_dir`` stands, read
    from its files alone (no model): ``{"checkpoint": the checkpoint
    directory (absolute) or None, "epochs_done": whole epochs saved,
    "batches_done": batches of the next epoch saved (a mid-epoch
    checkpoint), "epoch_batches": that epoch's number of batches (or
    None), "stopped": whether a callback stopped training at the last
    saved epoch (NT-ASGD's stop_on_nonmono)}``."""
    directory = os.path.abspath(os.path.join(run_dir, CHECKPOINT_DIR))
    state = None
    state_path = os.path.join(directory, CHECKPOINT_STATE_FILE)
    if os.path.exists(state_path) and os.path.exists(
        os.path.join(directory, CHECKPOINT_WEIGHTS_FILE)
    ):
        with open(state_path) as f:
            state = json.load(f)
    partial = _read_partial(directory, state)
    epochs_done = 0 if state is None else int(state["epoch"]) + 1
    return {
        "checkpoint": directory if state or partial else None,
        "epochs_done": epochs_done,
        "batches_done": int(partial["batches_done"]) if partial else 0,
        "epoch_batches": partial.get("epoch_batches") if partial else None,
        "stopped": bool(state and state.get("stopped")),
    }


def _read_partial(directory, epoch_state):
    """The mid-epoch checkpoint state of the epoch after ``epoch_state``'s
    (``None`` if there is none, or one left over from an older epoch)."""
    path = os.path.join(directory, PARTIAL_STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        partial = json.load(f)
    expected = 0 if epoch_state is None else epoch_state["epoch"] + 1
    if partial["epoch"] != expected:
        return None  # left over from an older epoch
    return partial


def _remove_quietly(*paths):
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


class BestCheckpoint(StatefulCallback):
    """Saves the weights whenever the monitored value improves.

    Writes ``<directory>/best.weights.h5`` (model weights only) and
    ``best.json`` (epoch and value). Place after Validation. With
    several processes every one tracks the best value, process 0 writes
    (:func:`~keras_rnnlm.runs.is_writer`).

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
            tmp = self.path + ".tmp.weights.h5"
            try:
                os.makedirs(self.directory, exist_ok=True)
                with local_scope():  # process 0 alone
                    self.model.save_weights(tmp)
                os.replace(tmp, self.path)
                atomic_write_text(
                    os.path.join(self.directory, BEST_FILE),
                    json.dumps(
                        {"epoch": epoch, self.monitor: self.best}, indent=2
                    ),
                )
            except OSError as e:
                _remove_quietly(tmp)
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
    progress bar) writes, atomically, to ``<directory>/checkpoint/``:

    * ``last.weights.h5``: model weights **and optimizer state** (iteration
      count, momenta; Keras saves the compiled optimizer with the weights);
    * ``state.json``: the finished epoch, the epoch-log history, every
      :class:`StatefulCallback`'s state, the data stream's state and the
      random-number state: every ``keras.random.SeedGenerator`` state of
      the model's layers (dropout masks), which ``save_weights`` does not
      store; without it a resumed run would redraw the first epoch's
      masks.

    **Mid-epoch checkpoints** (``every_steps`` / ``every_minutes``; epochs
    of WikiText-103, or of WikiText-2 on one CPU core, take hours): during
    an epoch, every ``every_steps`` batches or ``every_minutes`` minutes,
    it also writes ``partial-K.weights.h5`` (weights and optimizer),
    ``partial-K.npz`` (every non-trainable variable of the model -- the
    recurrent state carried to the next batch, the seed generators, AR/TAR
    buffers -- and the metrics' running totals of the epoch) and
    ``partial.json`` (the epoch, the number of batches done, the callbacks'
    states, e.g. NT-ASGD's running average, and the epoch progress of
    callbacks with ``get_epoch_progress``), the JSON last: it names the
    files of its own save, so a kill in the middle of a save leaves the
    previous consistent one. The epoch's checkpoint removes them. A run
    resumed from one continues the epoch at the next batch with the same
    carried state, dropout masks, windows and averages: its weights and
    its epoch log equal an uninterrupted run's (tested).

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

    :meth:`restore` loads the newest checkpoint into a freshly built,
    compiled model and returns the epoch to continue from (``initial_epoch``
    of ``fit``); :attr:`resume_batches` is the number of that epoch's
    batches already done (0 after an epoch checkpoint).

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
        self._unconfirmed = None
        self._pending = None
        self._pending_metrics = None
        self._epoch = 0
        self._counter = 0
        self._saved_at = None
        self._since = 0
        self._clock = time.monotonic()

    @property
    def weights_path(self):
        return os.path.join(self.directory, CHECKPOINT_WEIGHTS_FILE)

    @property
    def state_path(self):
        return os.path.join(self.directory, CHECKPOINT_STATE_FILE)

    @property
    def partial_state_path(self):
        return os.path.join(self.directory, PARTIAL_STATE_FILE)

    def _stateful(self):
        return [c for c in self.callbacks if isinstance(c, StatefulCallback)]

    def _progress(self):
        return [c for c in self.callbacks if hasattr(c, "get_epoch_progress")]

    # -- epoch checkpoints -------------------------------------------------
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
        state = {
            "epoch": epoch,
            "history": history,
            "callbacks": {c.state_key: c.get_state() for c in self._stateful()},
            "stream": self.stream.get_state() if self.stream else None,
            "seed_generators": seed_generator_states(self.model),
            # a callback (NT-ASGD's stop_on_nonmono) ended the run here
            "stopped": bool(self.model.stop_training) and self.diverged is None,
        }
        # Both files are written in full to temporary names first, then
        # renamed over the old pair (weights, then the state naming them):
        # a failed write (read-only or full disk) leaves the previous
        # checkpoint whole, and only a kill between the two renames can
        # pair the new weights with the previous state (one epoch re-run).
        if not is_writer():
            self.history = history
            self._unconfirmed = None
            return
        tmp = self.weights_path + ".tmp.weights.h5"
        state_tmp = self.state_path + ".tmp"
        try:
            os.makedirs(self.directory, exist_ok=True)
            with local_scope():  # process 0 alone
                self.model.save_weights(tmp)
            with open(state_tmp, "w") as f:
                f.write(json.dumps(state, indent=2))
            os.replace(tmp, self.weights_path)
            os.replace(state_tmp, self.state_path)
        except OSError as e:
            _remove_quietly(tmp, state_tmp)
            raise CheckpointWriteError(
                f"Could not write the checkpoint of epoch {epoch + 1} to "
                f"{self.directory}: {e}. The previous checkpoint is kept; "
                "free space or fix the permissions and resume."
            ) from e
        self.history = history
        self._unconfirmed = None
        self._remove_partials()

    def _diverge(self, epoch, what):
        if self.diverged is None:  # the first sign
            self.diverged = (int(epoch), what)
        self.model.stop_training = True

    def newest(self):
        """A description of the newest checkpoint on disk (``None`` if
        there is none): what a resume starts from."""
        partial = None
        state = None
        if self.exists():
            with open(self.state_path) as f:
                state = json.load(f)
        partial = self._read_partial(state)
        if partial is not None:
            return (
                f"{os.path.join(self.directory, partial['weights'])} (epoch "
                f"{partial['epoch'] + 1} after {partial['batches_done']} "
                "batches)"
            )
        if state is not None:
            last = state["history"][-1] if state["history"] else {}
            val = last.get("val_loss")
            tail = f", val_loss {val:.4f}" if val is not None else ""
            return (
                f"{self.weights_path} (end of epoch {state['epoch'] + 1}{tail})"
            )
        return None

    def exists(self):
        return os.path.exists(self.state_path) and os.path.exists(
            self.weights_path
        )

    # -- mid-epoch checkpoints ---------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        self._since = 0
        self._clock = time.monotonic()
        pending, self._pending = self._pending, None
        if pending is not None and pending["epoch"] == epoch:
            self._apply_partial_arrays(pending)
            for c in self._progress():
                if c.state_key in pending["progress"]:
                    c.set_epoch_progress(pending["progress"][c.state_key])

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
        """:func:`saved_progress` of the run, with the number of batches
        of a mid-epoch checkpoint's epoch from the stream."""
        progress = saved_progress(os.path.dirname(self.directory))
        if (
            progress["batches_done"]
            and progress["epoch_batches"] is None
            and self.stream is not None
            and self.stream.epoch == progress["epochs_done"]
        ):
            progress["epoch_batches"] = self.stream.start + len(self.stream)
        return progress

    def _confirm(self, good):
        tag, previous = self._unconfirmed
        self._unconfirmed = None
        if not is_writer():
            return
        if good:
            self._remove_partials(keep=tag)
            return
        # exploded weights: the previous checkpoint is the newest again
        if previous is None:
            _remove_quietly(self.partial_state_path)
        else:
            atomic_write_text(self.partial_state_path, previous)
        self._remove_tag(tag)

    def _remove_tag(self, tag):
        """Removes the files of the mid-epoch checkpoint ``tag``."""
        if os.path.isdir(self.directory):
            for name in os.listdir(self.directory):
                if f"{tag}." in name:
                    _remove_quietly(os.path.join(self.directory, name))

    def _save_partial(self, batches_done):
        self._saved_at = (self._epoch, int(batches_done))
        self._counter += 1
        tag = f"partial-{self._counter}"
        weights = f"{tag}.weights.h5"
        arrays = f"{tag}.npz"
        try:
            self._write_partial(batches_done, tag, weights, arrays)
        except OSError as e:
            self._counter -= 1
            self._remove_tag(tag)
            _remove_quietly(self.partial_state_path + ".tmp")
            raise CheckpointWriteError(
                f"Could not write a mid-epoch checkpoint to "
                f"{self.directory}: {e}. The previous checkpoint is kept; "
                "free space or fix the permissions and resume."
            ) from e

    def _write_partial(self, batches_done, tag, weights, arrays):
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
        if not is_writer():
            self._unconfirmed = (tag, None)
            return
        os.makedirs(self.directory, exist_ok=True)
        previous = None
        if os.path.exists(self.partial_state_path):
            with open(self.partial_state_path) as f:
                previous = f.read()
        with local_scope():  # process 0 alone
            self.model.save_weights(os.path.join(self.directory, weights))
        np.savez(os.path.join(self.directory, arrays), **values)
        callbacks = {}
        for c in self._stateful():
            get = getattr(c, "get_partial_state", None)
            callbacks[c.state_key] = (
                get(self.directory, tag) if get else c.get_state()
            )
        state = {
            "epoch": self._epoch,
            "batches_done": int(batches_done),
            "epoch_batches": self.stream.start + len(self.stream),
            "counter": self._counter,
            "weights": weights,
            "arrays": arrays,
            "history": self.history,
            "callbacks": callbacks,
            "progress": {
                c.state_key: c.get_epoch_progress() for c in self._progress()
            },
            "stream": {
                **self.stream.get_state(),
                "epoch": self._epoch,
                "start": int(batches_done),
            },
        }
        atomic_write_text(self.partial_state_path, json.dumps(state, indent=2))
        # the previous checkpoint's files stay until the next batch
        # confirms this one (:meth:`_confirm`)
        self._unconfirmed = (tag, previous)

    def _remove_partials(self, keep=None):
        if not os.path.isdir(self.directory):
            return
        if keep is None and os.path.exists(self.partial_state_path):
            os.remove(self.partial_state_path)
        for name in os.listdir(self.directory):
            if "partial-" in name and (keep is None or f"{keep}." not in name):
                os.remove(os.path.join(self.directory, name))

    def _read_partial(self, epoch_state):
        return _read_partial(self.directory, epoch_state)

    def _load_partial_arrays(self, partial):
        path = os.path.join(self.directory, partial["arrays"])
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
        return path, arrays

    @staticmethod
    def _check_arrays(path, arrays, prefix, variables):
        n = sum(1 for k in arrays if k.startswith(prefix))
        if n != len(variables):
            kind = "metric" if prefix == "m" else "non-trainable"
            raise ValueError(
                f"{path} holds {n} {kind} variables but the model has "
                f"{len(variables)}: was the model config changed since the "
                "checkpoint?"
            )
        out = []
        for i, v in enumerate(variables):
            value = arrays[f"{prefix}{i}"]
            if tuple(value.shape) != tuple(v.shape):
                raise ValueError(
                    f"{path}: variable {v.path} has shape {v.shape}, the "
                    f"checkpoint {value.shape}: was the model config "
                    "changed since the checkpoint?"
                )
            out.append((v, value.astype(v.dtype)))
        return out

    def _apply_partial_arrays(self, partial):
        path, arrays = self._load_partial_arrays(partial)
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
        # Every metric of a run accumulates sums (Keras's loss tracker:
        # total / count; the token metrics: Kahan-summed total / count
        # with their compensations), so adding them continues the sums.
        path, arrays = self._pending_metrics
        self._pending_metrics = None
        sync_model_state(self.model)
        for v, value in self._check_arrays(
            path, arrays, "m", self.model.metrics_variables
        ):
            v.assign(v.value + value)

    # -- resume --------------------------------------------------------------
    def restore(self, model):
        """Loads the newest checkpoint; returns the next epoch to run (0 if
        none) and sets :attr:`resume_batches`."""
        state = None
        if self.exists():
            with open(self.state_path) as f:
                state = json.load(f)
        partial = self._read_partial(state)
        self.resume_batches = 0
        if state is None and partial is None:
            return 0
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        source = partial or state
        if partial is not None:
            model.load_weights(os.path.join(self.directory, partial["weights"]))
            self._counter = int(partial["counter"])
            # The non-trainable variables (carried state, seed generators)
            # and the metrics' totals are applied when the epoch begins,
            # after the epoch-begin resets.
            self._pending = partial
            self.resume_batches = int(partial["batches_done"])
        else:
            model.load_weights(self.weights_path)
            set_seed_generator_states(model, state.get("seed_generators", {}))
        for c in self._stateful():
            if c.state_key in source["callbacks"]:
                c.set_state(source["callbacks"][c.state_key])
        if self.stream is not None and source.get("stream"):
            self.stream.set_state(source["stream"])
        self.history = source["history"]
        if partial is not None:
            return int(partial["epoch"])
        return int(state["epoch"]) + 1
