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

from keras_rnnlm.layers.recurrence import lstm_recurrence
from keras_rnnlm.layers.stateful import TrackedStateMixin
from keras_rnnlm.layers.stateful import state_snapshot


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class LSTM(TrackedStateMixin, keras.layers.LSTM):
    """LSTM layer whose input projection is hoisted out of the time loop.

    Same arguments, weights and results as ``keras.layers.LSTM`` (weights can
    be copied between the two), but on the fast path:

    * ``x @ kernel + bias`` is computed for the whole sequence as one matrix
      product before the loop;
    * the loop (only ``h @ recurrent_kernel`` and the gates) is compiled
      (XLA on TensorFlow, part of the jitted step on JAX) and has a
      hand-written backward pass
      (:func:`keras_rnnlm.layers.recurrence.lstm_recurrence`).

    The fast path needs the standard activations (tanh / sigmoid), no
    ``dropout`` / ``recurrent_dropout`` (use the package's locked dropout and
    weight-dropped layers instead), no mask, ``go_backwards=False`` and
    ``unroll=False``; otherwise the layer falls back to Keras's generic loop
    and says nothing, since the result is identical.

    Subclasses change the recurrent kernel used for a call by overriding
    :meth:`recurrent_kernel_for_call` (weight drop uses this), keeping the
    fast path.

    Args:
        units: Positive integer, dimensionality of the output space.
        fused: ``True`` / ``"auto"`` (default) to use the fast path when the
            configuration allows it, ``False`` to always use Keras's
            generic per-step cell (for comparison and debugging).
        **kwargs: Every argument of ``keras.layers.LSTM``.

    Example:

    >>> layer = LSTM(8, return_sequences=True)
    >>> layer(np.zeros((2, 5, 3), "float32")).shape
    (2, 5, 8)
    """

    def __init__(self, units, fused="auto", **kwargs):
        super().__init__(units, **kwargs)
        if fused not in (True, False, "auto"):
            raise ValueError(
                f"`fused` must be True, False or 'auto'. Received: {fused}"
            )
        self.fused = fused
        # Runtime mode, not configuration: see recurrence.set_forward_only.
        self.forward_only = False

    def recurrent_kernel_for_call(self, training=False):
        """The (units, 4 * units) recurrent kernel used in this call."""
        return self.cell.recurrent_kernel

    def _fast_path_ok(self, mask):
        cell = self.cell
        return (
            self.fused is not False
            and mask is None
            and not self.go_backwards
            and not self.unroll
            and not cell.dropout
            and not cell.recurrent_dropout
            and cell.activation is activations.tanh
            and cell.recurrent_activation is activations.sigmoid
        )

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if not self._fast_path_ok(mask):
            return self._generic_inner_loop(
                sequences, initial_state, mask, training
            )
        proj = self.input_projection(sequences)
        h0, c0 = (state_snapshot(s, proj.dtype) for s in initial_state)
        rk = self.recurrent_kernel_tensor(training, proj.dtype)
        outputs, h_t, c_t = lstm_recurrence(
            proj, h0, c0, rk, forward_only=self.forward_only
        )
        return h_t, outputs, [h_t, c_t]

    def input_projection(self, sequences):
        """``x @ kernel + bias`` for the whole sequence (the fast path's
        hoisted input product), (batch, time, 4 * units)."""
        proj = ops.matmul(sequences, self.cell.kernel)
        if self.cell.use_bias:
            proj = proj + self.cell.bias
        return proj

    def recurrent_kernel_tensor(self, training, dtype):
        """This call's recurrent kernel (weight-dropped by subclasses) as a
        tensor of ``dtype``."""
        return ops.cast(_value(self.recurrent_kernel_for_call(training)), dtype)

    def _generic_inner_loop(self, sequences, initial_state, mask, training):
        # keras.layers.RNN's per-step cell loop (skips LSTM's cuDNN attempt).
        return keras.layers.RNN.inner_loop(
            self, sequences, initial_state, mask, training
        )

    def get_config(self):
        config = super().get_config()
        config["fused"] = self.fused
        return config


def _value(x):
    return x.value if isinstance(x, keras.Variable) else x
