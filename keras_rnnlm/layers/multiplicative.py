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
The cells also work one step at a time inside a plain ``keras.layers.RNN``
(the "naive" path), with identical results.
"""

import functools

import keras
from keras import initializers
from keras import ops

from keras_rnnlm.layers import recurrence
from keras_rnnlm.layers.fused_recurrence import FusedRecurrence
from keras_rnnlm.layers.fused_recurrence import custom_gradient
from keras_rnnlm.layers.fused_recurrence import value_of
from keras_rnnlm.layers.stateful import TrackedStateMixin
from keras_rnnlm.layers.stateful import state_snapshot


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

        ``kernel`` and ``bias`` are the input side (hoisted out of the
        loop); every other weight is used by :meth:`step`, in the order of
        :attr:`step_weight_names`.
        """
        raise NotImplementedError

    #: Names of the weights :meth:`step` uses, in order.
    step_weight_names = ()

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
        return _project(inputs, self.kernel, self.bias)

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
                "kernel_initializer": initializers.serialize(
                    self.kernel_initializer
                ),
                "recurrent_initializer": initializers.serialize(
                    self.recurrent_initializer
                ),
                "intermediate_initializer": initializers.serialize(
                    self.intermediate_initializer
                ),
                "bias_initializer": initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config


def _project(x, kernel, bias):
    """The input side ``x @ kernel + bias`` (any leading dimensions)."""
    return ops.matmul(x, kernel) + bias


def _block_matmul(m, blocks):
    """(..., K*M) x (K, M, N) block-diagonal product -> (..., K*N).

    One matrix product per block, concatenated: in the compiled loops
    (paper-size true mLSTM, batch 32) this is ~2x faster per step than one
    batched ``einsum`` over the blocks, and K times fewer FLOPs than a dense
    block-diagonal matrix.
    """
    k, mm, _ = blocks.shape
    parts = [m[..., i * mm : (i + 1) * mm] for i in range(k)]
    return ops.concatenate(
        [ops.matmul(part, blocks[i]) for i, part in enumerate(parts)], axis=-1
    )


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MRNNCell(MultiplicativeCell):
    """Multiplicative RNN cell (Sutskever et al. 2011). See the module doc.

    Weights: ``kernel`` (D, M + H) = [W_mx | W_hx] and its ``bias``;
    ``recurrent_kernel`` (H, M) = W_mh, ``recurrent_bias`` (M);
    ``intermediate_kernel`` (M, H) = W_hm.
    """

    step_weight_names = (
        "recurrent_kernel",
        "recurrent_bias",
        "intermediate_kernel",
    )

    def _weight_shapes(self, d, m):
        h = self.units
        return {
            "kernel": ((d, m + h), "kernel"),
            "bias": ((m + h,), "bias"),
            "recurrent_kernel": ((h, m), "recurrent"),
            "recurrent_bias": ((m,), "bias"),
            "intermediate_kernel": ((m, h), "inter"),
        }

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
    step_weight_names = (
        "recurrent_kernel",
        "recurrent_bias",
        "intermediate_kernel",
    )

    def _weight_shapes(self, d, m):
        h = self.units
        return {
            "kernel": ((d, m + 4 * h), "kernel"),
            "bias": ((m + 4 * h,), "bias"),
            "recurrent_kernel": ((h, m), "recurrent"),
            "recurrent_bias": ((m,), "bias"),
            "intermediate_kernel": ((m, 4 * h), "inter"),
        }

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
    step_weight_names = (
        "recurrent_kernel",
        "recurrent_bias",
        "intermediate_kernel",
    )

    def _weight_shapes(self, d, m):
        h = self.units
        return {
            "kernel": ((d, 4 * m + 4 * h), "kernel"),
            "bias": ((4 * m + 4 * h,), "bias"),
            "recurrent_kernel": ((h, 4 * m), "recurrent"),
            "recurrent_bias": ((4 * m,), "bias"),
            "intermediate_kernel": ((4, m, h), "inter"),
        }

    @staticmethod
    def step_fn(projected, states, weights, dims):
        h_units, m_units = dims
        h, c = states
        w_h, b_h, v = weights
        m = projected[:, : 4 * m_units] * (ops.matmul(h, w_h) + b_h)
        z = projected[:, 4 * m_units :] + _block_matmul(m, v)
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

    step_weight_names = (
        "recurrent_kernel",
        "recurrent_bias",
        "intermediate_kernel",
        "candidate_kernel",
    )

    def _weight_shapes(self, d, m):
        h = self.units
        return {
            "kernel": ((d, 2 * m + 2 * h), "kernel"),
            "bias": ((2 * m + 2 * h,), "bias"),
            "recurrent_kernel": ((h, m), "recurrent"),
            "recurrent_bias": ((m,), "bias"),
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

    step_weight_names = (
        "recurrent_kernel",
        "recurrent_bias",
        "intermediate_kernel",
        "reset_kernel",
        "reset_bias",
        "candidate_kernel",
    )

    def _weight_shapes(self, d, m):
        h = self.units
        return {
            "kernel": ((d, 3 * m + 3 * h), "kernel"),
            "bias": ((3 * m + 3 * h,), "bias"),
            "recurrent_kernel": ((h, 2 * m), "recurrent"),
            "recurrent_bias": ((2 * m,), "bias"),
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
        zr = ops.sigmoid(px[:, : 2 * h_units] + _block_matmul(m_zr, v_zr))
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


def _bind_dims(step_fn, dims):
    def step(x, states, weights):
        return step_fn(x, states, weights, dims)

    return step


def _rows(t):
    """(T, B, N) -> (T * B, N)."""
    return ops.reshape(t, (-1, ops.shape(t)[-1]))


def _outer_sum(a_all, b_all):
    """``sum_t a_t^T b_t`` over all steps and rows: one matrix product."""
    return ops.matmul(ops.transpose(_rows(a_all)), _rows(b_all))


def _inter(m, w):
    """``m V``: a dense (M, N) matrix, or block-diagonal (K, M, N) blocks
    (one intermediate state per gate, as in the true mLSTM / mGRU)."""
    return _block_matmul(m, w) if len(w.shape) == 3 else ops.matmul(m, w)


def _inter_transpose(w):
    """``V^T`` in :func:`_inter`'s layout (``dz V^T = _inter(dz, V^T)``);
    taken once, outside the reverse loops."""
    return (
        ops.transpose(w, (0, 2, 1)) if len(w.shape) == 3 else ops.transpose(w)
    )


def _inter_grad(m_all, dz_all, w):
    """Gradient of :func:`_inter`'s ``V`` summed over all steps and rows."""
    if len(w.shape) == 3:  # per block: ~2x faster than one einsum
        k, mm, n = w.shape
        return ops.stack(
            [
                _outer_sum(
                    m_all[..., i * mm : (i + 1) * mm],
                    dz_all[..., i * n : (i + 1) * n],
                )
                for i in range(k)
            ]
        )
    return _outer_sum(m_all, dz_all)


# Hand-written backward passes (TensorFlow). For each cell: a forward loop
# saving the gates and intermediate states, a reverse loop carrying only
# the state gradients, and a ``finish`` turning the per-step gradients into
# the gradients of the projected inputs, the initial states and the
# weights (one product per weight over all steps). ``a`` is a cell's
# h-side factor ``h W + b``, ``m = (W x) * a`` its intermediate state.


def _mlstm_forward(proj_tm, h0, c0, w_mh, b_mh, w_m):
    """Saves ``(h_all, c_all, gates_all, a_all, m_all)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_mh)[-1]

    def body(carry, xs):
        (h, c), (p,) = carry, xs
        a = ops.matmul(h, w_mh) + b_mh
        m = p[:, :m_units] * a
        h, c, gates = recurrence.lstm_update(
            p[:, m_units:] + _inter(m, w_m), c, h_units
        )
        return (h, c), (h, c, ops.concatenate(gates, axis=-1), a, m)

    return recurrence.scan(body, (h0, c0), (proj_tm,))[1]


def _mlstm_backward(proj_tm, h0, c0, w_mh, w_m, saved, d_ys, dh_t, dc_t):
    """Carries ``(dh, dc)``; returns ``(dz_all, dm_all, da_all, dh0,
    dc0)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_mh)[-1]
    _, c_all, gates_all, _, _ = saved
    w_mh_t, w_m_t = ops.transpose(w_mh), _inter_transpose(w_m)

    def body(carry, xs):
        dh_next, dc_next = carry
        dh_o, c, c_prev, gates, p = xs
        dz, dc_prev = recurrence.lstm_update_backward(
            dh_o + dh_next, dc_next, c, c_prev, gates, h_units
        )
        dm = _inter(dz, w_m_t)
        da = dm * p[:, :m_units]
        return (ops.matmul(da, w_mh_t), dc_prev), (dz, dm, da)

    c_prev_all = recurrence.shift_in(c0, c_all)
    (dh0, dc0), (dz_all, dm_all, da_all) = recurrence.scan(
        body,
        (dh_t, dc_t),
        (d_ys, c_all, c_prev_all, gates_all, proj_tm),
        reverse=True,
    )
    return dz_all, dm_all, da_all, dh0, dc0


def _mlstm_finish(backward, xs_tm, states, weights, saved, d_ys, d_last):
    h0, c0 = states
    w_mh, _, w_m = weights
    h_all, _, _, a_all, m_all = saved
    dz_all, dm_all, da_all, dh0, dc0 = backward(
        xs_tm, h0, c0, w_mh, w_m, saved, d_ys, *d_last
    )
    d_weights = (
        _outer_sum(recurrence.shift_in(h0, h_all), da_all),
        ops.sum(_rows(da_all), axis=0),
        _inter_grad(m_all, dz_all, w_m),
    )
    d_pm = dm_all * a_all  # d(W_mx x) = dm * a
    return ops.concatenate([d_pm, dz_all], axis=-1), (dh0, dc0), d_weights


def _mgru_forward(proj_tm, h0, w_h, b_h, v_zr, v_h):
    """Saves ``(h_all, a_all, m_all, zr_all, u_all)``, ``u = tanh(h~)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_h)[-1]

    def body(carry, xs):
        (h,), (p,) = carry, xs
        a = ops.matmul(h, w_h) + b_h
        m = p[:, :m_units] * a
        zr = ops.sigmoid(
            p[:, m_units : 2 * m_units + h_units] + ops.matmul(m, v_zr)
        )
        z, r = zr[:, :h_units], zr[:, h_units:]
        u = ops.tanh(p[:, 2 * m_units + h_units :] + ops.matmul(r * m, v_h))
        h = (1.0 - z) * h + z * u
        return (h,), (h, a, m, zr, u)

    return recurrence.scan(body, (h0,), (proj_tm,))[1]


def _mgru_backward(proj_tm, h0, w_h, v_zr, v_h, saved, d_ys, dh_t):
    """Carries ``dh``; returns ``(dzr_all, dcand_all, dm_all, da_all,
    dh0)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_h)[-1]
    h_all, _, m_all, zr_all, u_all = saved
    w_h_t, v_zr_t, v_h_t = (ops.transpose(w) for w in (w_h, v_zr, v_h))

    def body(carry, xs):
        (dh_next,) = carry
        dh_o, h_prev, m, zr, u, p = xs
        z, r = zr[:, :h_units], zr[:, h_units:]
        dh = dh_o + dh_next
        dcand = dh * z * (1.0 - u * u)
        dq = ops.matmul(dcand, v_h_t)
        dzr = ops.concatenate(
            [dh * (u - h_prev) * z * (1.0 - z), dq * m * r * (1.0 - r)],
            axis=-1,
        )
        dm = dq * r + ops.matmul(dzr, v_zr_t)
        da = dm * p[:, :m_units]
        dh_prev = dh * (1.0 - z) + ops.matmul(da, w_h_t)
        return (dh_prev,), (dzr, dcand, dm, da)

    (dh0,), per_step = recurrence.scan(
        body,
        (dh_t,),
        (d_ys, recurrence.shift_in(h0, h_all), m_all, zr_all, u_all, proj_tm),
        reverse=True,
    )
    return (*per_step, dh0)


def _mgru_finish(backward, xs_tm, states, weights, saved, d_ys, d_last):
    (h0,) = states
    w_h, _, v_zr, v_h = weights
    h_all, a_all, m_all, zr_all, _ = saved
    dzr_all, dcand_all, dm_all, da_all, dh0 = backward(
        xs_tm, h0, w_h, v_zr, v_h, saved, d_ys, d_last[0]
    )
    r_all = zr_all[..., ops.shape(h0)[-1] :]
    d_weights = (
        _outer_sum(recurrence.shift_in(h0, h_all), da_all),
        ops.sum(_rows(da_all), axis=0),
        _outer_sum(m_all, dzr_all),
        _outer_sum(r_all * m_all, dcand_all),
    )
    d_xs = ops.concatenate([dm_all * a_all, dzr_all, dcand_all], axis=-1)
    return d_xs, (dh0,), d_weights


def _mrnn_forward(proj_tm, h0, w_mh, b_mh, w_hm):
    """Saves ``(h_all, a_all, m_all)``."""
    m_units = ops.shape(w_mh)[-1]

    def body(carry, xs):
        (h,), (p,) = carry, xs
        a = ops.matmul(h, w_mh) + b_mh
        m = p[:, :m_units] * a
        h = ops.tanh(p[:, m_units:] + ops.matmul(m, w_hm))
        return (h,), (h, a, m)

    return recurrence.scan(body, (h0,), (proj_tm,))[1]


def _mrnn_backward(proj_tm, h0, w_mh, w_hm, saved, d_ys, dh_t):
    """Carries ``dh``; returns ``(dpre_all, dm_all, da_all, dh0)``."""
    m_units = ops.shape(w_mh)[-1]
    w_mh_t, w_hm_t = ops.transpose(w_mh), ops.transpose(w_hm)

    def body(carry, xs):
        (dh_next,) = carry
        dh_o, h, p = xs
        dpre = (dh_o + dh_next) * (1.0 - h * h)
        dm = ops.matmul(dpre, w_hm_t)
        da = dm * p[:, :m_units]
        return (ops.matmul(da, w_mh_t),), (dpre, dm, da)

    (dh0,), per_step = recurrence.scan(
        body, (dh_t,), (d_ys, saved[0], proj_tm), reverse=True
    )
    return (*per_step, dh0)


def _mrnn_finish(backward, xs_tm, states, weights, saved, d_ys, d_last):
    (h0,) = states
    w_mh, _, w_hm = weights
    h_all, a_all, m_all = saved
    dpre_all, dm_all, da_all, dh0 = backward(
        xs_tm, h0, w_mh, w_hm, saved, d_ys, d_last[0]
    )
    d_weights = (
        _outer_sum(recurrence.shift_in(h0, h_all), da_all),
        ops.sum(_rows(da_all), axis=0),
        _outer_sum(m_all, dpre_all),
    )
    d_pm = dm_all * a_all  # d(W_mx x) = dm * a
    return ops.concatenate([d_pm, dpre_all], axis=-1), (dh0,), d_weights


def _tmgru_forward(proj_tm, h0, w_zrh, b_zrh, v_zr, w_h, b_h, v_h):
    """Saves ``(h_all, a_zr, m_zr, zr, a_h, m_h, u)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_h)[-1]

    def body(carry, xs):
        (h,), (p,) = carry, xs
        a_zr = ops.matmul(h, w_zrh) + b_zrh
        m_zr = p[:, : 2 * m_units] * a_zr
        px = p[:, 3 * m_units :]
        zr = ops.sigmoid(px[:, : 2 * h_units] + _inter(m_zr, v_zr))
        z, r = zr[:, :h_units], zr[:, h_units:]
        a_h = ops.matmul(r * h, w_h) + b_h
        m_h = p[:, 2 * m_units : 3 * m_units] * a_h
        u = ops.tanh(px[:, 2 * h_units :] + ops.matmul(m_h, v_h))
        h = (1.0 - z) * h + z * u
        return (h,), (h, a_zr, m_zr, zr, a_h, m_h, u)

    return recurrence.scan(body, (h0,), (proj_tm,))[1]


def _tmgru_backward(proj_tm, h0, w_zrh, v_zr, w_h, v_h, saved, d_ys, dh_t):
    """Carries ``dh``; returns ``(dzr_all, dcand_all, dm_zr_all, da_zr_all,
    dm_h_all, da_h_all, dh0)``."""
    h_units = ops.shape(h0)[-1]
    m_units = ops.shape(w_h)[-1]
    h_all, _, _, zr_all, _, _, u_all = saved
    w_zrh_t, w_h_t, v_h_t = (ops.transpose(w) for w in (w_zrh, w_h, v_h))
    v_zr_t = _inter_transpose(v_zr)

    def body(carry, xs):
        (dh_next,) = carry
        dh_o, h_prev, zr, u, p = xs
        z, r = zr[:, :h_units], zr[:, h_units:]
        dh = dh_o + dh_next
        dcand = dh * z * (1.0 - u * u)
        dm_h = ops.matmul(dcand, v_h_t)
        da_h = dm_h * p[:, 2 * m_units : 3 * m_units]
        d_rh = ops.matmul(da_h, w_h_t)
        dzr = ops.concatenate(
            [
                dh * (u - h_prev) * z * (1.0 - z),
                d_rh * h_prev * r * (1.0 - r),
            ],
            axis=-1,
        )
        dm_zr = _inter(dzr, v_zr_t)
        da_zr = dm_zr * p[:, : 2 * m_units]
        dh_prev = dh * (1.0 - z) + d_rh * r + ops.matmul(da_zr, w_zrh_t)
        return (dh_prev,), (dzr, dcand, dm_zr, da_zr, dm_h, da_h)

    (dh0,), per_step = recurrence.scan(
        body,
        (dh_t,),
        (d_ys, recurrence.shift_in(h0, h_all), zr_all, u_all, proj_tm),
        reverse=True,
    )
    return (*per_step, dh0)


def _tmgru_finish(backward, xs_tm, states, weights, saved, d_ys, d_last):
    (h0,) = states
    w_zrh, _, v_zr, w_h, _, v_h = weights
    h_all, a_zr_all, m_zr_all, zr_all, a_h_all, m_h_all, _ = saved
    dzr_all, dcand_all, dm_zr_all, da_zr_all, dm_h_all, da_h_all, dh0 = (
        backward(xs_tm, h0, w_zrh, v_zr, w_h, v_h, saved, d_ys, d_last[0])
    )
    h_prev_all = recurrence.shift_in(h0, h_all)
    r_all = zr_all[..., ops.shape(h0)[-1] :]
    d_weights = (
        _outer_sum(h_prev_all, da_zr_all),
        ops.sum(_rows(da_zr_all), axis=0),
        _inter_grad(m_zr_all, dzr_all, v_zr),
        _outer_sum(r_all * h_prev_all, da_h_all),
        ops.sum(_rows(da_h_all), axis=0),
        _outer_sum(m_h_all, dcand_all),
    )
    d_xs = ops.concatenate(
        [
            dm_zr_all * a_zr_all,
            dm_h_all * a_h_all,
            dzr_all,
            dcand_all,
        ],
        axis=-1,
    )
    return d_xs, (dh0,), d_weights


#: Cells with a hand-written backward pass on TensorFlow: ``cell class ->
#: (forward loop, reverse loop, finish)``, see :func:`_hand_written_scan`.
#: The true mLSTM is the mLSTM with ``4M`` intermediate units and a
#: block-diagonal intermediate kernel: it shares the mLSTM's three (the
#: blocks go through ``_inter*``).
_HAND_WRITTEN = {
    MRNNCell: (_mrnn_forward, _mrnn_backward, _mrnn_finish),
    MLSTMCell: (_mlstm_forward, _mlstm_backward, _mlstm_finish),
    MGRUCell: (_mgru_forward, _mgru_backward, _mgru_finish),
    TrueMGRUCell: (_tmgru_forward, _tmgru_backward, _tmgru_finish),
    TrueMLSTMCell: (_mlstm_forward, _mlstm_backward, _mlstm_finish),
}


@functools.cache
def _compiled_pair(forward, backward):
    return recurrence.compile_loop(forward), recurrence.compile_loop(backward)


def _hand_written_scan(cell_cls):
    """A cell's training loop with a hand-written backward pass
    (TensorFlow): ``run(xs_tm, states, weights) -> (ys_tm, last_states)``,
    differentiable with respect to all three.

    The generic loop's backward (:func:`recurrence.make_fused_scan`)
    recomputes every step's forward and its vector-Jacobian product,
    weight gradients included, inside the loop. Here the forward loop
    saves the gates and intermediate states, the reverse loop carries only
    the state gradients and does the input-side products, and each weight
    gradient is then one matrix product over all ``T * B`` rows. Tested
    against autodiff of the per-step Keras loop.
    """
    forward_fn, backward_fn, finish = _HAND_WRITTEN[cell_cls]
    forward, backward = _compiled_pair(forward_fn, backward_fn)

    def run(xs_tm, states, weights):
        n_s = len(states)

        @custom_gradient
        def _run(xs_tm, *flat):
            sg = ops.stop_gradient
            saved = forward(*(sg(v) for v in (xs_tm, *flat)))
            last = tuple(s[-1] for s in saved[:n_s])

            def grad(upstream):
                d_ys, *d_last = upstream
                d_xs, d_states, d_weights = finish(
                    backward,
                    xs_tm,
                    flat[:n_s],
                    flat[n_s:],
                    saved,
                    d_ys,
                    d_last,
                )
                return (d_xs, *d_states, *d_weights)

            return (saved[0], *last), grad

        ys, *last = _run(xs_tm, *states, *weights)
        return ys, tuple(last)

    return run


def _projecting(step_fn, dims):
    """A step that projects its raw input itself (``weights`` = kernel,
    bias, step weights): what the forward-only loop runs."""

    def step(x, states, weights):
        return step_fn(_project(x, *weights[:2]), states, weights[2:], dims)

    return step


@functools.cache
def _compiled_loop(cell_cls, dims, forward_only):
    """The loop :meth:`MultiplicativeRNN.inner_loop` runs: ``run(xs_tm,
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
    if cell_cls in _HAND_WRITTEN and keras.backend.backend() == "tensorflow":
        return _hand_written_scan(cell_cls)
    return recurrence.make_fused_scan(_bind_dims(cell_cls.step_fn, dims))


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MultiplicativeRNN(FusedRecurrence, TrackedStateMixin, keras.layers.RNN):
    """``keras.layers.RNN`` over a :class:`MultiplicativeCell`, fast path.

    On the fast path the input side of the cell is computed for the whole
    sequence before the loop and only :meth:`MultiplicativeCell.step` runs
    per time step, in a compiled loop; the results equal the per-step
    ("naive") ``keras.layers.RNN`` loop, which ``fused="auto"`` uses with a
    mask, ``go_backwards`` or ``unroll`` (``fused=True`` raises there).

    Args:
        cell: a :class:`MultiplicativeCell` instance.
        fused: ``"auto"`` (default): the fast path when possible;
            ``True``: the fast path or a ``ValueError``; ``False``: the
            naive per-step loop. See
            :class:`~keras_rnnlm.layers.fused_recurrence.FusedRecurrence`.
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


def count_params(cell, units, input_dim, intermediate_size=None):
    """Parameter count of one cell, without building it.

    Args:
        cell: a key of :data:`CELLS` or ``"lstm"`` / ``"gru"`` (Keras
            layers with one bias vector, ``reset_after=False`` for GRU).
        units: hidden size.
        input_dim: input size.
        intermediate_size: ``M`` (``None``: ``input_dim``).
    """
    h, d = units, input_dim
    m = intermediate_size or d
    if cell == "lstm":
        return 4 * h * (d + h + 1)
    if cell == "gru":
        return 3 * h * (d + h + 1)
    if cell not in CELLS:
        raise ValueError(f"Unknown cell {cell!r}; known {sorted(CELLS)}")
    shapes = CELLS[cell](units)._weight_shapes(d, m)
    total = 0
    for shape, _ in shapes.values():
        n = 1
        for s in shape:
            n *= s
        total += n
    return total


def model_params(cell, units, vocab_size, intermediate_size=None):
    """Parameters of a one-layer character model: one-hot input, ``cell``,
    softmax output (``units * vocab + vocab``)."""
    return (
        count_params(cell, units, vocab_size, intermediate_size)
        + units * vocab_size
        + vocab_size
    )


def solve_units(cell, target, vocab_size, intermediate_size=None):
    """The hidden size whose one-layer model is closest to ``target``
    parameters (see :func:`model_params`); how the paper matches models."""
    best, best_err = 1, None
    for units in range(1, 20000):
        n = model_params(cell, units, vocab_size, intermediate_size)
        err = abs(n - target)
        if best_err is None or err < best_err:
            best, best_err = units, err
        if n > target:
            break
    return best
