"""Recurrent state that survives Keras's stateless (JAX) training loops.

``keras.layers.RNN(stateful=True)`` keeps its carried state in variables
that are deliberately *not* tracked by the layer (so they are not saved
with the weights). On TensorFlow the compiled train/test steps assign them
in place and the state is carried from batch to batch. On JAX, however,
``fit`` / ``evaluate`` / ``predict_on_batch`` run ``stateless_call`` over
the model's tracked variables only, so the state assignments are dropped
and every batch silently starts from the zero state (truncated BPTT
without carried state; streaming evaluation wrong by several percent).

:class:`TrackedStateMixin` tracks the state variables as non-trainable
variables of the layer, so every backend threads them through its
compiled steps, while keeping them out of saved weights (their shape
depends on the batch size, and a trained model must load into models of
any batch size).
"""

import keras
from keras import tree


class TrackedStateMixin:
    """Mix into a ``keras.layers.RNN`` subclass (before the Keras class)."""

    def _create_state_variables(self, batch_size):
        super()._create_state_variables(batch_size)
        locked = self._tracker.locked
        self._tracker.unlock()
        try:
            for v in tree.flatten(self.states):
                self._track_variable(v)
        finally:
            if locked:
                self._tracker.lock()

    def _saved_variables(self):
        state_ids = {id(v) for v in tree.flatten(self.states or [])}
        return [
            v
            for v in self._trainable_variables + self._non_trainable_variables
            if id(v) not in state_ids
        ]

    def save_own_variables(self, store):
        for i, v in enumerate(self._saved_variables()):
            store[f"{i}"] = v

    def load_own_variables(self, store):
        variables = self._saved_variables()
        if len(store.keys()) != len(variables):
            raise ValueError(
                f"Layer '{self.name}' expected {len(variables)} variables, "
                f"but the weights file lists {len(store.keys())}"
            )
        for i, v in enumerate(variables):
            v.assign(store[f"{i}"])


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class KerasLSTM(TrackedStateMixin, keras.layers.LSTM):
    """``keras.layers.LSTM`` (Keras's own loop) with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class GRU(TrackedStateMixin, keras.layers.GRU):
    """``keras.layers.GRU`` with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class SimpleRNN(TrackedStateMixin, keras.layers.SimpleRNN):
    """``keras.layers.SimpleRNN`` with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class RNN(TrackedStateMixin, keras.layers.RNN):
    """``keras.layers.RNN`` over any cell, with tracked state."""
