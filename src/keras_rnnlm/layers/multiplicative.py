"""Multiplicative recurrent cells: mRNN, mLSTM, true mLSTM, mGRU, true mGRU.

References:

* Sutskever, Martens & Hinton (2011), "Generating Text with Recurrent
  Neural Networks" (mRNN).
* Krause, Lu, Murray & Renals (2016), "Multiplicative LSTM for sequence
  modelling", arXiv:1609.07959 (mLSTM).
* Maupomé & Meurs (2019), "Multiplicative Models for Recurrent Language
  Modeling", arXiv:1907.00455 (true mLSTM, mGRU, true mGRU; the equation
  numbers below are this paper's).

Notation: ``x`` the input, ``h`` the previous hidden state, ``*`` the
elementwise product; ``M`` the *intermediate* size (the size of ``m``),
``H`` the hidden size. Every pre-activation has a bias (where two affine
maps are summed, e.g. ``U x + V m``, one bias serves the sum; the factors
of the multiplicative product, ``W_x x`` and ``W_h h``, each have their
own).

mRNN::

    m  = (W_mx x) * (W_mh h)
    h' = tanh(W_hx x + W_hm m)

mLSTM (one intermediate state shared by the gates and the candidate, as
Krause et al. define it)::

    m       = (W_mx x) * (W_mh h)
    i, f, o = sigmoid(W_.x x + W_.m m);  u = tanh(W_ux x + W_um m)
    c'      = f * c + i * u;             h' = o * tanh(c')

The paper's eq. 11-13 print ``h_{t-1}`` where its prose says ``m``
replaces ``h_{t-1}``, and its eq. 7 prints ``sigmoid(c)`` for ``tanh(c)``:
we follow the prose and the original mLSTM.

true mLSTM (eq. 14-17; one intermediate state per gate and candidate)::

    m_k    = (W_kx x) * (W_kh h)                  k in {i, f, u, o}
    gate_k = sigmoid(U_k x + V_k m_k)  (tanh for the candidate u)

mGRU (eq. 25-27; shared intermediate state, ``r`` filters ``m``)::

    m  = (W_x x) * (W_h h)
    z  = sigmoid(U_z x + V_z m);  r = sigmoid(U_r x + V_r m)   (r: size M)
    h~ = U_h x + V_h (r * m);     h' = (1 - z) * h + z * tanh(h~)

true mGRU (eq. 22-24; eq. 23's misplaced parenthesis read as the sigmoid
of the sum)::

    m_z = (W_zx x) * (W_zh h);  m_r = (W_rx x) * (W_rh h)
    z   = sigmoid(U_z x + V_z m_z);  r = sigmoid(U_r x + V_r m_r)
    m_h = (W_x x) * (W_h (r * h));   h~ = U_h x + V_h m_h
    h'  = (1 - z) * h + z * tanh(h~)

Every cell splits its work into the **input side** (all ``W x`` / ``U x``
products and their biases, :meth:`MultiplicativeCell.project_inputs`),
which :class:`MultiplicativeRNN` computes for the whole sequence as one
matrix product before the time loop, and the **recurrent step**
(:meth:`MultiplicativeCell.step`), the only work done per time step, in a
loop compiled with XLA on TensorFlow (part of the jitted step on JAX).
On TensorFlow that loop trains with the cell's hand-written backward pass
(:mod:`keras_rnnlm.loops.multiplicative_backward`). The cells also work
one step at a time inside a plain ``keras.layers.RNN`` (the "naive" path),
with identical results. Parameter counts and the hidden size for a
parameter budget: :func:`keras_rnnlm.models.params.cell_params`,
:func:`~keras_rnnlm.models.params.solve_char_units`.
"""

import functools

import keras
from keras import initializers
from keras import ops

from keras_rnnlm.layers.rows import project_rows
from keras_rnnlm.layers.serialization import serialized_initializers
from keras_rnnlm.loops import recurrence
from keras_rnnlm.loops.fused_recurrence import FusedRecurrence
from keras_rnnlm.loops.fused_recurrence import value_of
from keras_rnnlm.loops.multiplicative_backward import block_matmul
from keras_rnnlm.loops.multiplicative_backward import hand_written_scan
from keras_rnnlm.loops.state import TrackedStateMixin
from keras_rnnlm.loops.state import state_snapshot


class MultiplicativeCell(keras.layers.Layer):
    """Base class of the multiplicative cells (see the module docstring).

    Args:
        units: hidden size ``H``.
        intermediate_size: size ``M`` of the intermediate state(s); ``None``
            uses the input size (the paper's small models; its "larger"
            models set it to ``units``).
        kernel_initializer: initializer of the input-side matrices.
        recurrent_initializer: initializer of the ``h``-side factor
            matrices (``W_h``).
        intermediate_initializer: initializer of the ``m``-side matrices
            (``V``).
        bias_initializer: initializer of every bias.
        **kwargs: base ``Layer`` arguments.

    Call arguments:
        inputs: (batch, input_dim) one time step.
        states: list of state tensors (``state_size``).
        training: unused (the cells have no dropout).
    """

    #: Number of state tensors of size ``units`` (h, or h and c).
    num_states = 1

    def __init__(
        self,
        units,
        intermediate_size=None,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="glorot_uniform",
        intermediate_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise ValueError(f"units must be positive, got {units}")
        if intermediate_size is not None and int(intermediate_size) <= 0:
            raise ValueError(
                f"intermediate_size must be positive, got {intermediate_size}"
            )
        self.units = int(units)
        self.intermediate_size = (
            None if intermediate_size is None else int(intermediate_size)
        )
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.intermediate_initializer = initializers.get(
            intermediate_initializer
        )
        self.bias_initializer = initializers.get(bias_initializer)
        self.state_size = [self.units] * self.num_states
        self.output_size = self.units

    # -- weights -------------------------------------------------------

    def _weight_shapes(self, input_dim, m):
        """``{name: (shape, kind)}`` with kind kernel/recurrent/inter/bias.

        ``kernel`` (D, K) and ``bias`` (K) are the input side (hoisted
        out of the loop); every other weight is used by :meth:`step`, in
        the order of :attr:`step_weight_names`: ``recurrent_kernel`` (H,
        R) and ``recurrent_bias`` (R), then :meth:`_intermediate_shapes`
        (K and R: :meth:`_projection_widths`).
        """
        k, r = self._projection_widths(m)
        return {
            "kernel": ((input_dim, k), "kernel"),
            "bias": ((k,), "bias"),
            "recurrent_kernel": ((self.units, r), "recurrent"),
            "recurrent_bias": ((r,), "bias"),
            **self._intermediate_shapes(m),
        }

    def _projection_widths(self, m):
        """``(K, R)``: the columns of ``kernel`` and ``recurrent_kernel``
        for intermediate size ``m``."""
        raise NotImplementedError

    def _intermediate_shapes(self, m):
        """``{name: (shape, kind)}`` of the step's weights after
        ``recurrent_kernel`` and ``recurrent_bias``, in step order."""
        raise NotImplementedError

    @property
    def step_weight_names(self):
        """Names of the weights :meth:`step` uses, in order: every weight
        of :meth:`_weight_shapes` but the input side's."""
        names = self._weight_shapes(1, 1)  # the names do not depend on sizes
        return tuple(n for n in names if n not in ("kernel", "bias"))

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        m = self.intermediate_size or input_dim
        self.resolved_intermediate_size = m
        inits = {
            "kernel": self.kernel_initializer,
            "recurrent": self.recurrent_initializer,
            "inter": self.intermediate_initializer,
            "bias": self.bias_initializer,
        }
        for name, (shape, kind) in self._weight_shapes(input_dim, m).items():
            setattr(
                self,
                name,
                self.add_weight(
                    shape=shape, initializer=inits[kind], name=name
                ),
            )
        self.built = True

    def step_weights(self):
        """The weights :meth:`step` needs, as a tuple of tensors."""
        return tuple(value_of(getattr(self, n)) for n in self.step_weight_names)

    # -- computation ---------------------------------------------------

    def project_inputs(self, inputs):
        """Input side ``x @ kernel + bias`` (any leading dimensions)."""
        return project_rows(inputs, self.kernel, self.bias)

    def step(self, projected, states, weights):
        """One time step from the projected input.

        Args:
            projected: (batch, kernel columns) row of :meth:`project_inputs`.
            states: tuple of (batch, units) state tensors.
            weights: :meth:`step_weights`.

        Returns:
            ``(output, new_states)``.
        """
        return self.step_fn(projected, tuple(states), weights, self._dims())

    def _dims(self):
        return (self.units, self.resolved_intermediate_size)

    @staticmethod
    def step_fn(projected, states, weights, dims):
        raise NotImplementedError

    def call(self, inputs, states, training=False):
        states = states if isinstance(states, (list, tuple)) else [states]
        h, new_states = self.step_fn(
            self.project_inputs(inputs),
            tuple(states),
            self.step_weights(),
            self._dims(),
        )
        return h, list(new_states)

    def get_initial_state(self, batch_size=None):
        return [
            ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
            for _ in range(self.num_states)
        ]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "intermediate_size": self.intermediate_size,
                **serialized_initializers(
                    self,
                    "kernel_initializer",
                    "recurrent_initializer",
                    "intermediate_initializer",
                    "bias_initializer",
                ),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MRNNCell(MultiplicativeCell):
    """Multiplicative RNN cell (Sutskever et al. 2011). See the module doc.

    Weights: ``kernel`` (D, M + H) = [W_mx | W_hx] and its ``bias``;
    ``recurrent_kernel`` (H, M) = W_mh, ``recurrent_bias`` (M);
    ``intermediate_kernel`` (M, H) = W_hm.
    """

    def _projection_widths(self, m):
        h = self.units
        return m + h, m

    def _intermediate_shapes(self, m):
        h = self.units
        return {"intermediate_kernel": ((m, h), "inter")}

    @staticmethod
    def step_fn(projected, states, weights, dims):
        _, m_units = dims
        (h,) = states
        w_mh, b_mh, w_hm = weights
        m = projected[:, :m_units] * (ops.matmul(h, w_mh) + b_mh)
        h = ops.tanh(projected[:, m_units:] + ops.matmul(m, w_hm))
        return h, (h,)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MLSTMCell(MultiplicativeCell):
    """Multiplicative LSTM cell (Krause et al. 2016). See the module doc.

    Weights: ``kernel`` (D, M + 4H) = [W_mx | W_ix W_fx W_ux W_ox] and its
    ``bias``; ``recurrent_kernel`` (H, M) = W_mh, ``recurrent_bias`` (M);
    ``intermediate_kernel`` (M, 4H) = [W_im W_fm W_um W_om] (Keras gate
    order i, f, c, o). State: ``[h, c]``.
    """

    num_states = 2

    def _projection_widths(self, m):
        h = self.units
        return m + 4 * h, m

    def _intermediate_shapes(self, m):
        h = self.units
        return {"intermediate_kernel": ((m, 4 * h), "inter")}

    @staticmethod
    def step_fn(projected, states, weights, dims):
        h_units, m_units = dims
        h, c = states
        w_mh, b_mh, w_m = weights
        m = projected[:, :m_units] * (ops.matmul(h, w_mh) + b_mh)
        z = projected[:, m_units:] + ops.matmul(m, w_m)
        h, c, _ = recurrence.lstm_update(z, c, h_units)
        return h, (h, c)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class TrueMLSTMCell(MultiplicativeCell):
    """True multiplicative LSTM cell (eq. 14-17). See the module doc.

    Weights: ``kernel`` (D, 4M + 4H) = [W_ix W_fx W_ux W_ox | U_i U_f U_u
    U_o] and its ``bias``; ``recurrent_kernel`` (H, 4M) = [W_ih ... W_oh],
    ``recurrent_bias`` (4M); ``intermediate_kernel`` (4, M, H) = V_i, V_f,
    V_u, V_o (each gate reads only its own intermediate state). State:
    ``[h, c]``.
    """

    num_states = 2

    def _projection_widths(self, m):
        h = self.units
        return 4 * m + 4 * h, 4 * m

    def _intermediate_shapes(self, m):
        h = self.units
        return {"intermediate_kernel": ((4, m, h), "inter")}

    @staticmethod
    def step_fn(projected, states, weights, dims):
        h_units, m_units = dims
        h, c = states
        w_h, b_h, v = weights
        m = projected[:, : 4 * m_units] * (ops.matmul(h, w_h) + b_h)
        z = projected[:, 4 * m_units :] + block_matmul(m, v)
        h, c, _ = recurrence.lstm_update(z, c, h_units)
        return h, (h, c)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MGRUCell(MultiplicativeCell):
    """Multiplicative GRU with a shared intermediate state (eq. 25-27).

    Weights: ``kernel`` (D, M + H + M + H) = [W_x | U_z | U_r | U_h] and its
    ``bias``; ``recurrent_kernel`` (H, M) = W_h, ``recurrent_bias`` (M);
    ``intermediate_kernel`` (M, H + M) = [V_z | V_r]; ``candidate_kernel``
    (M, H) = V_h. The reset gate ``r`` has the intermediate size: it
    filters ``m``.
    """

    def _projection_widths(self, m):
        h = self.units
        return 2 * m + 2 * h, m

    def _intermediate_shapes(self, m):
        h = self.units
        return {
            "intermediate_kernel": ((m, h + m), "inter"),
            "candidate_kernel": ((m, h), "inter"),
        }

    @staticmethod
    def step_fn(projected, states, weights, dims):
        h_units, m_units = dims
        (h,) = states
        w_h, b_h, v_zr, v_h = weights
        m = projected[:, :m_units] * (ops.matmul(h, w_h) + b_h)
        zr = ops.sigmoid(
            projected[:, m_units : 2 * m_units + h_units] + ops.matmul(m, v_zr)
        )
        z, r = zr[:, :h_units], zr[:, h_units:]
        cand = projected[:, 2 * m_units + h_units :] + ops.matmul(r * m, v_h)
        h = (1.0 - z) * h + z * ops.tanh(cand)
        return h, (h,)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class TrueMGRUCell(MultiplicativeCell):
    """True multiplicative GRU (eq. 22-24). See the module doc.

    Weights: ``kernel`` (D, 3M + 3H) = [W_zx W_rx W_x | U_z U_r U_h] and its
    ``bias``; ``recurrent_kernel`` (H, 2M) = [W_zh | W_rh],
    ``recurrent_bias`` (2M); ``intermediate_kernel`` (2, M, H) = V_z, V_r;
    ``reset_kernel`` (H, M) = W_h applied to ``r * h``, ``reset_bias`` (M);
    ``candidate_kernel`` (M, H) = V_h.
    """

    def _projection_widths(self, m):
        h = self.units
        return 3 * m + 3 * h, 2 * m

    def _intermediate_shapes(self, m):
        h = self.units
        return {
            "intermediate_kernel": ((2, m, h), "inter"),
            "reset_kernel": ((h, m), "recurrent"),
            "reset_bias": ((m,), "bias"),
            "candidate_kernel": ((m, h), "inter"),
        }

    @staticmethod
    def step_fn(projected, states, weights, dims):
        h_units, m_units = dims
        (h,) = states
        w_zrh, b_zrh, v_zr, w_h, b_h, v_h = weights
        m_zr = projected[:, : 2 * m_units] * (ops.matmul(h, w_zrh) + b_zrh)
        px = projected[:, 3 * m_units :]
        zr = ops.sigmoid(px[:, : 2 * h_units] + block_matmul(m_zr, v_zr))
        z, r = zr[:, :h_units], zr[:, h_units:]
        m_h = projected[:, 2 * m_units : 3 * m_units] * (
            ops.matmul(r * h, w_h) + b_h
        )
        cand = px[:, 2 * h_units :] + ops.matmul(m_h, v_h)
        h = (1.0 - z) * h + z * ops.tanh(cand)
        return h, (h,)


CELLS = {
    "mrnn": MRNNCell,
    "mlstm": MLSTMCell,
    "tmlstm": TrueMLSTMCell,
    "mgru": MGRUCell,
    "tmgru": TrueMGRUCell,
}


#: The cells with a hand-written backward pass on TensorFlow
#: (:mod:`keras_rnnlm.loops.multiplicative_backward`), by exact class: a
#: user's subclass gets the generic recomputing one.
_HAND_WRITTEN = {cls: name for name, cls in CELLS.items()}


def _bind_dims(step_fn, dims):
    def step(x, states, weights):
        return step_fn(x, states, weights, dims)

    return step


def _projecting(step_fn, dims):
    """A step that projects its raw input itself (``weights`` = kernel,
    bias, step weights): what the forward-only loop runs."""

    def step(x, states, weights):
        return step_fn(project_rows(x, *weights[:2]), states, weights[2:], dims)

    return step


@functools.cache
def _compiled_loop(cell_cls, dims, forward_only):
    """The loop :meth:`MultiplicativeRNN.fused_inner_loop` runs: ``run(xs_tm,
    states, weights) -> (ys_tm, last_states)``.

    ``forward_only`` (evaluation, scoring): each step projects its own
    input row, which stays in cache, instead of reading a precomputed
    ``(T, B, kernel columns)`` tensor (mLSTM paper size: 30 MB). Training:
    the projected inputs and, on TensorFlow, the cell's hand-written
    backward pass (every package cell has one; a user's subclass gets the
    generic recomputing one); other backends differentiate the loop.
    """
    if forward_only:
        loop = recurrence.make_fused_scan(_projecting(cell_cls.step_fn, dims))
        return functools.partial(loop, forward_only=True)
    name = _HAND_WRITTEN.get(cell_cls)
    if name is not None and keras.backend.backend() == "tensorflow":
        return hand_written_scan(name)
    return recurrence.make_fused_scan(_bind_dims(cell_cls.step_fn, dims))


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MultiplicativeRNN(FusedRecurrence, TrackedStateMixin, keras.layers.RNN):
    """``keras.layers.RNN`` over a :class:`MultiplicativeCell`, fast path.

    On the fast path the input side of the cell is computed for the whole
    sequence before the loop and only :meth:`MultiplicativeCell.step` runs
    per time step, in a compiled loop; the results equal the per-step
    ("naive") ``keras.layers.RNN`` loop, which ``fused="auto"`` uses with a
    mask, ``go_backwards`` or ``unroll`` (``fused=True`` raises there).

    Sentence-level state reset: ``layer(x, reset=r)`` with ``r`` (batch,
    time), 1.0 where a sentence starts, sets the state to zero before
    reading ``x[:, t]`` where ``r[:, t] = 1`` (the carried state included,
    at ``t = 0``), as :class:`~keras_rnnlm.layers.lstm.LSTM` does. Such a
    call runs :meth:`reset_inner_loop`, a per-step loop over the hoisted
    input projection differentiated by autodiff, not the compiled loop with
    its hand-written backward pass; a call without a mask is unchanged.

    Args:
        cell: a :class:`MultiplicativeCell` instance.
        fused: ``"auto"`` (default): the fast path when possible;
            ``True``: the fast path or a ``ValueError``; ``False``: the
            naive per-step loop. See
            :class:`~keras_rnnlm.loops.fused_recurrence.FusedRecurrence`.
        **kwargs: every ``keras.layers.RNN`` argument
            (``return_sequences``, ``return_state``, ``stateful``, ...).

    Example:

    >>> layer = MultiplicativeRNN(MLSTMCell(8), return_sequences=True)
    >>> layer(np.zeros((2, 5, 3), "float32")).shape
    (2, 5, 8)
    """

    def __init__(self, cell, fused="auto", **kwargs):
        if not isinstance(cell, MultiplicativeCell):
            raise TypeError(
                f"MultiplicativeRNN needs a MultiplicativeCell, got {cell!r}"
            )
        super().__init__(cell, **kwargs)
        self.init_fused(fused)

    def fused_inner_loop(self, sequences, initial_state, training=False):
        cell = self.cell
        # Time-major before any projection: transposing the (narrow)
        # inputs is cheaper than transposing the (wide) projections.
        xs_tm = ops.transpose(sequences, (1, 0, 2))
        weights = cell.step_weights()
        if self.forward_only:  # each step projects its own input row
            weights = (cell.kernel, cell.bias, *weights)
        else:
            xs_tm = cell.project_inputs(xs_tm)
        dtype = xs_tm.dtype
        loop = _compiled_loop(type(cell), cell._dims(), self.forward_only)
        outputs_tm, last = loop(
            xs_tm,
            tuple(state_snapshot(s, dtype) for s in initial_state),
            tuple(ops.cast(w, dtype) for w in weights),
        )
        outputs = ops.transpose(outputs_tm, (1, 0, 2))
        return last[0], outputs, list(last)

    def reset_inner_loop(self, sequences, initial_state, reset, training):
        """The cell's steps over the projected inputs with the state zeroed
        where ``reset`` (batch, time) is 1
        (:func:`~keras_rnnlm.loops.recurrence.reset_recurrence`, a
        per-step loop differentiated by autodiff: the hand-written backward
        passes take no mask)."""
        cell = self.cell
        projected = cell.project_inputs(sequences)
        dtype = projected.dtype
        weights = tuple(ops.cast(w, dtype) for w in cell.step_weights())
        dims = cell._dims()

        def step(x, states):
            return cell.step_fn(x[0], states, weights, dims)

        outputs, last = recurrence.reset_recurrence(
            step,
            (projected,),
            tuple(state_snapshot(s, dtype) for s in initial_state),
            reset,
        )
        return last[0], outputs, list(last)
