"""A drop-in ``keras.layers.LSTM`` with a fast fused recurrence.

Reference: Hochreiter & Schmidhuber (1997); the gate equations are those of
``keras.layers.LSTM`` (Keras gate order i, f, c, o):

    z_t = x_t W + h_{t-1} U + b
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  g = tanh(z_c)
    c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t)
"""

import keras
from keras import activations
from keras import ops

from keras_rnnlm.layers.rows import project_rows
from keras_rnnlm.loops.fused_recurrence import FusedRecurrence
from keras_rnnlm.loops.fused_recurrence import value_of
from keras_rnnlm.loops.recurrence import lstm_recurrence
from keras_rnnlm.loops.recurrence import lstm_reset_recurrence
from keras_rnnlm.loops.state import TrackedStateMixin
from keras_rnnlm.loops.state import state_snapshot


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class LSTM(FusedRecurrence, TrackedStateMixin, keras.layers.LSTM):
    """LSTM layer whose input projection is hoisted out of the time loop.

    Same arguments, weights and results as ``keras.layers.LSTM`` (weights can
    be copied between the two), but on the fast path:

    * ``x @ kernel + bias`` is computed for the whole sequence as one matrix
      product before the loop;
    * the loop (only ``h @ recurrent_kernel`` and the gates) is compiled
      (XLA on TensorFlow, part of the jitted step on JAX) and has a
      hand-written backward pass
      (:func:`keras_rnnlm.loops.recurrence.lstm_recurrence`).

    The fast path needs the standard activations (tanh / sigmoid), no
    ``dropout`` / ``recurrent_dropout`` (use the package's locked dropout and
    weight-dropped layers instead), no mask, ``go_backwards=False`` and
    ``unroll=False``; otherwise ``fused="auto"`` falls back to Keras's
    generic loop (same results) and ``fused=True`` raises.

    Subclasses change the recurrent kernel used for a call by overriding
    :meth:`recurrent_kernel_for_call` (weight drop uses this), keeping the
    fast path.

    Sentence-level state reset: ``layer(x, reset=r)`` with ``r`` (batch,
    time), 1.0 where a sentence starts, sets the state to its initial
    (zero) value before reading ``x[:, t]`` where ``r[:, t] = 1`` (the
    carried state included, at ``t = 0``). A call with a reset mask runs a
    per-step loop differentiated by autodiff
    (:func:`~keras_rnnlm.loops.recurrence.lstm_reset_recurrence` over the
    hoisted input projection, with the call's recurrent kernel,
    weight-dropped or not), not the fused loop with its hand-written
    backward pass; a call without one is unchanged.

    Args:
        units: Positive integer, dimensionality of the output space.
        fused: ``"auto"`` (default): the fast path when the configuration
            allows it, else Keras's generic per-step cell; ``True``: the
            fast path, a ``ValueError`` if the configuration does not allow
            it; ``False``: always the generic cell (for comparison and
            debugging). See
            :class:`~keras_rnnlm.loops.fused_recurrence.FusedRecurrence`.
        **kwargs: Every argument of ``keras.layers.LSTM``.

    Example:

    >>> layer = LSTM(8, return_sequences=True)
    >>> layer(np.zeros((2, 5, 3), "float32")).shape
    (2, 5, 8)
    """

    def __init__(self, units, fused="auto", **kwargs):
        super().__init__(units, **kwargs)
        self.init_fused(fused)

    def reset_inner_loop(self, sequences, initial_state, reset, training):
        """The LSTM over ``sequences`` with the state zeroed where
        ``reset`` (batch, time) is 1; ``(last, outputs, [h, c])``."""
        proj = self.input_projection(sequences)
        rk = self.recurrent_kernel_tensor(training, proj.dtype)
        h0, c0 = (state_snapshot(s, proj.dtype) for s in initial_state)
        outputs, h_t, c_t = lstm_reset_recurrence(proj, h0, c0, rk, reset)
        return h_t, outputs, [h_t, c_t]

    def recurrent_kernel_for_call(self, training=False):
        """The (units, 4 * units) recurrent kernel used in this call."""
        return self.cell.recurrent_kernel

    def fast_path_blockers(self, mask=None):
        blockers = super().fast_path_blockers(mask)
        cell = self.cell
        if cell.dropout:
            blockers.append(f"dropout={cell.dropout}")
        if cell.recurrent_dropout:
            blockers.append(f"recurrent_dropout={cell.recurrent_dropout}")
        if cell.activation is not activations.tanh:
            blockers.append("an activation other than tanh")
        if cell.recurrent_activation is not activations.sigmoid:
            blockers.append("a recurrent_activation other than sigmoid")
        return blockers

    def fused_inner_loop(self, sequences, initial_state, training=False):
        # Time-major from the input on, the loops' layout: the input is
        # transposed (features wide), not its projection (4 x units wide),
        # and between two such layers the output's transpose and the next
        # input's cancel where nothing stands between them (evaluation).
        proj = self.input_projection(ops.transpose(sequences, (1, 0, 2)))
        h0, c0 = (state_snapshot(s, proj.dtype) for s in initial_state)
        rk = self.recurrent_kernel_tensor(training, proj.dtype)
        outputs, h_t, c_t = lstm_recurrence(
            proj, h0, c0, rk, forward_only=self.forward_only, time_major=True
        )
        return h_t, ops.transpose(outputs, (1, 0, 2)), [h_t, c_t]

    def input_projection(self, sequences):
        """``x @ kernel + bias`` for the whole sequence (the fast path's
        hoisted input product), ``(..., 4 * units)`` for ``(...,
        features)`` inputs; over the flattened rows
        (:func:`~keras_rnnlm.layers.rows.project_rows`: the bias fused
        into the product on TensorFlow)."""
        cell = self.cell
        return project_rows(
            sequences, cell.kernel, cell.bias if cell.use_bias else None
        )

    def recurrent_kernel_tensor(self, training, dtype):
        """This call's recurrent kernel (weight-dropped by subclasses) as a
        tensor of ``dtype``."""
        return ops.cast(
            value_of(self.recurrent_kernel_for_call(training)), dtype
        )

    def generic_inner_loop(self, sequences, initial_state, mask, training):
        # keras.layers.RNN's per-step cell loop (skips LSTM's cuDNN attempt).
        return keras.layers.RNN.inner_loop(
            self, sequences, initial_state, mask, training
        )
