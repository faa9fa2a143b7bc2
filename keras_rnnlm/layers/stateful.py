"""Recurrent state that survives Keras's stateless (JAX) training loops.

``keras.layers.RNN(stateful=True)`` keeps its carried state in variables
that are deliberately *not* tracked by the layer (so they are not saved
with the weights). On TensorFlow the compiled train/test steps assign them
in place and the state is carried from batch to batch. On JAX, however,
``fit`` / ``evaluate`` / ``predict_on_batch`` run ``stateless_call`` over
the model's tracked variables only, so the state assignments are dropped
and every batch silently starts from the zero state (truncated BPTT
without carried state; streaming evaluation wrong by several percent).

:class:`TrackedStateMixin` lists the state variables among the layer's
(non-trainable) variables, like seed-generator states, so every backend
threads them through its compiled steps, while they stay out of the
weights (parameter counts, saved weights: their shape depends on the batch
size, and a trained model must load into models of any batch size).
"""

import keras
from keras import ops
from keras import tree


def state_snapshot(state, dtype=None):
    """The value of a carried-state variable as a new tensor.

    The fused loops' hand-written backward passes keep the initial state
    for later; handing them the state *variable* (which the layer then
    overwrites with the final state) made eager-mode gradients read the
    final state instead of the initial one (wrong gradients with
    ``run_eagerly=True``; compiled steps were unaffected).
    """
    if isinstance(state, keras.Variable):
        state = state.value
    return ops.copy(ops.convert_to_tensor(state, dtype=dtype))


def with_static_batch(x, batch):
    """``x`` with its unknown leading (batch) dimension set to ``batch``
    (a stateful layer's batch is its carried state's)."""
    if x.shape[0] is not None:
        return x
    return ops.reshape(
        x, [batch, *(-1 if d is None else d for d in x.shape[1:])]
    )


class TrackedStateMixin:
    """Mix into a ``keras.layers.RNN`` subclass (before the Keras class).

    Adds the carried-state variables to ``layer.variables`` (hence to
    ``non_trainable_variables``, which the JAX trainer threads through its
    compiled steps), the way Keras lists seed-generator states: they are
    not *weights*, so ``count_params``, ``summary`` and saved weights are
    unchanged (a model loads into models of any batch size).
    """

    def inner_loop(self, sequences, initial_state, mask, training=False):
        # Keras's TF trainer may trace the step with an unknown batch size;
        # with a carried state of batch 1 the loop's state then broadcasts
        # from (1, H) to (None, H) and tf.while_loop rejects it. A stateful
        # layer's batch size is its state's: make it static.
        states = tree.flatten(self.states or [])
        if self.stateful and states:
            sequences = with_static_batch(sequences, states[0].shape[0])
        return super().inner_loop(sequences, initial_state, mask, training)

    @property
    def variables(self):
        variables = super().variables
        seen = {id(v) for v in variables}
        return variables + [
            v for v in tree.flatten(self.states or []) if id(v) not in seen
        ]


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
