"""Shared protocol of the package's callbacks.

Callbacks that hold run state (best value so far, annealing counters,
averaged weights ...) implement ``get_state() -> dict`` (JSON-serialisable)
and ``set_state(dict)``; :class:`~keras_rnnlm.callbacks.checkpoint.
TrainingCheckpoint` stores them beside the weights so a resumed run
continues exactly. Callbacks hold no model, tensor or file handle at
construction time (Keras Tuner deep-copies callbacks per trial).
"""

import keras
import numpy as np


def sync_model_state(model):
    """Makes ``model``'s variables current before a callback reads or
    writes them in the middle of an epoch.

    Keras's JAX trainer keeps the training state outside the variables
    during an epoch (it even purges their values) and only syncs at epoch
    boundaries; :meth:`jax_state_sync` writes the current state back and
    makes the next step re-read it, so a variable read here sees this
    step's value and an assignment here reaches the next step. A no-op on
    the other backends (their steps update the variables in place).
    """
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()


def host_value(variable):
    """The whole value of ``variable`` as a NumPy array.

    With several processes (``keras.distribution.initialize``) a
    batch-sharded variable, the carried recurrent state, spans devices of
    other processes: its blocks are gathered from every process
    (``process_allgather``), a collective that every process must reach
    at the same point, in the same order. Replicated and local values are
    read directly.
    """
    value = variable.value if hasattr(variable, "value") else variable
    if getattr(value, "is_fully_addressable", True):
        return np.asarray(keras.ops.convert_to_numpy(value))
    from jax.experimental import multihost_utils  # a multi-process JAX array

    return np.asarray(multihost_utils.process_allgather(value, tiled=True))


class StatefulCallback(keras.callbacks.Callback):
    """A callback whose state survives a resume.

    Subclasses list the attribute names to save in ``state_attributes``.
    """

    state_attributes = ()

    @property
    def state_key(self):
        return type(self).__name__

    def get_state(self):
        return {k: getattr(self, k) for k in self.state_attributes}

    def set_state(self, state):
        for k in self.state_attributes:
            if k in state:
                setattr(self, k, state[k])
