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

:class:`SentenceResetMixin` gives Keras's LSTM, GRU and SimpleRNN the
package's sentence-level reset mask (``layer(x, reset=r)``, as
:class:`~keras_rnnlm.loops.fused_recurrence.FusedRecurrence`).
"""

import keras
from keras import ops
from keras import tree

from keras_rnnlm.loops.fused_recurrence import ResetCall
from keras_rnnlm.loops.recurrence import reset_recurrence


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


class SentenceResetMixin(ResetCall):
    """Mix into a Keras recurrent layer (first among the bases) whose
    cell starts from zero states (Keras's LSTM, GRU, SimpleRNN cells).

    Adds the sentence-level reset mask of the package's layers
    (arXiv:2106.08927, Section 3.1): ``layer(x, reset=r)`` with ``r``
    (batch, time), 1.0 where a sentence starts, sets the state back to
    zero before reading ``x[:, t]`` (the carried state too, at ``t = 0``)
    through :func:`~keras_rnnlm.loops.recurrence.reset_recurrence`, a
    per-step loop over the Keras cell. A call without ``reset`` is Keras's
    own, unchanged. Under a reset the layer refuses what that loop does
    not implement: ``dropout`` / ``recurrent_dropout`` (the cell's masks
    are drawn outside the loop), a Keras mask, ``go_backwards`` and
    ``unroll``.
    """

    def reset_blockers(self, mask=None):
        """What a call with a reset mask cannot run (a list of phrases)."""
        blockers = []
        for name in ("dropout", "recurrent_dropout"):
            if getattr(self.cell, name, 0.0):
                blockers.append(f"{name}={getattr(self.cell, name)}")
        return blockers + self.loop_blockers(mask)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        reset = getattr(self, "_reset_mask", None)
        if reset is None:
            return super().inner_loop(sequences, initial_state, mask, training)
        states = tree.flatten(self.states or [])
        if self.stateful and states:
            sequences = with_static_batch(sequences, states[0].shape[0])
        kwargs = {}
        if self.cell._call_has_training_arg:
            kwargs["training"] = training

        def step(x, states):
            output, new = self.cell(x[0], list(states), **kwargs)
            return output, tuple(tree.flatten(new))

        outputs, last = reset_recurrence(
            step, (sequences,), tuple(tree.flatten(initial_state)), reset
        )
        return outputs[:, -1], outputs, list(last)
