"""Shared protocol of the package's callbacks.

Callbacks that hold run state (best value so far, annealing counters,
averaged weights ...) implement ``get_state() -> dict`` (JSON-serialisable)
and ``set_state(dict)``; :class:`~keras_rnnlm.callbacks.checkpoint.
TrainingCheckpoint` stores them beside the weights so a resumed run
continues exactly. Callbacks hold no model, tensor or file handle at
construction time (Keras Tuner deep-copies callbacks per trial).
"""

import keras


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
