"""Best-model checkpoints and full, resumable training checkpoints."""

import json
import math
import os

import keras
import numpy as np

from keras_rnnlm.callbacks.base import StatefulCallback


def atomic_write_text(path, text):
    """Writes ``text`` to ``path`` via a temporary file and a rename."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class BestCheckpoint(StatefulCallback):
    """Saves the weights whenever the monitored value improves.

    Writes ``<directory>/best.weights.h5`` (model weights only) and
    ``best.json`` (epoch and value). Place after Validation.

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
        return os.path.join(self.directory, "best.weights.h5")

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or not math.isfinite(float(value)):
            return
        if self.best is None or float(value) < self.best:
            self.best, self.best_epoch = float(value), int(epoch)
            os.makedirs(self.directory, exist_ok=True)
            tmp = self.path + ".tmp.weights.h5"
            self.model.save_weights(tmp)
            os.replace(tmp, self.path)
            atomic_write_text(
                os.path.join(self.directory, "best.json"),
                json.dumps({"epoch": epoch, self.monitor: self.best}, indent=2),
            )


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

    After every epoch (it must be the last callback of the list) writes,
    atomically, to ``<directory>/checkpoint/``:

    * ``last.weights.h5``: model weights **and optimizer state** (iteration
      count, momenta; Keras saves the compiled optimizer with the weights);
    * ``state.json``: the finished epoch, the epoch-log history, every
      :class:`StatefulCallback`'s state, the data stream's state and the
      random-number state: every ``keras.random.SeedGenerator`` state of
      the model's layers (dropout masks), which ``save_weights`` does not
      store; without it a resumed run would redraw the first epoch's
      masks.

    :meth:`restore` loads them into a freshly built, compiled model and
    returns the epoch to continue from (``initial_epoch`` of ``fit``).

    Args:
        directory: run directory.
        callbacks: the other callbacks of the run (their states are saved).
        stream: the training data stream (``get_state``/``set_state``).
    """

    def __init__(self, directory, callbacks=(), stream=None):
        super().__init__()
        self.directory = os.path.join(directory, "checkpoint")
        self.callbacks = list(callbacks)
        self.stream = stream
        self.history = []

    @property
    def weights_path(self):
        return os.path.join(self.directory, "last.weights.h5")

    @property
    def state_path(self):
        return os.path.join(self.directory, "state.json")

    def _stateful(self):
        return [c for c in self.callbacks if isinstance(c, StatefulCallback)]

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        if not all(math.isfinite(float(v)) for v in logs.values()):
            return  # diverged: keep the last good checkpoint untouched
        self.history.append(
            {"epoch": epoch, **{k: float(v) for k, v in logs.items()}}
        )
        os.makedirs(self.directory, exist_ok=True)
        tmp = self.weights_path + ".tmp.weights.h5"
        self.model.save_weights(tmp)
        state = {
            "epoch": epoch,
            "history": self.history,
            "callbacks": {c.state_key: c.get_state() for c in self._stateful()},
            "stream": self.stream.get_state() if self.stream else None,
            "seed_generators": seed_generator_states(self.model),
        }
        # Weights first, then the state that points at them: a kill between
        # the two renames leaves the previous consistent pair or a newer
        # weights file with the older state (re-running one epoch).
        os.replace(tmp, self.weights_path)
        atomic_write_text(self.state_path, json.dumps(state, indent=2))

    def exists(self):
        return os.path.exists(self.state_path) and os.path.exists(
            self.weights_path
        )

    def restore(self, model):
        """Loads the checkpoint; returns the next epoch to run (0 if none)."""
        if not self.exists():
            return 0
        with open(self.state_path) as f:
            state = json.load(f)
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(self.weights_path)
        for c in self._stateful():
            if c.state_key in state["callbacks"]:
                c.set_state(state["callbacks"][c.state_key])
        set_seed_generator_states(model, state.get("seed_generators", {}))
        if self.stream is not None and state.get("stream"):
            self.stream.set_state(state["stream"])
        self.history = state["history"]
        return int(state["epoch"]) + 1
