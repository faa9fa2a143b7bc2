"""Hand-written backward passes of the multiplicative cells (TensorFlow).

The cells and the layer are in :mod:`keras_rnnlm.layers.multiplicative`
(see its docstring for the equations). On TensorFlow,
:class:`~keras_rnnlm.layers.multiplicative.MultiplicativeRNN` trains every
package cell through :func:`hand_written_scan` rather than the generic
:func:`keras_rnnlm.loops.recurrence.make_fused_scan`, whose backward
recomputes each step's forward and its vector-Jacobian product, weight
gradients included, inside the reverse loop.

For each cell there are three functions:

* a **forward loop** (``_<cell>_forward``) that saves, per step, the states
  and what the backward needs (gates, intermediate states);
* a **reverse loop** (``_<cell>_backward``) that carries only the state
  gradients and does the per-step products with the transposed weights;
* a **finish** (``_<cell>_finish``) that turns the per-step gradients into
  the gradients of the projected inputs, the initial states and the
  weights, each weight's as one matrix product over all ``T * B`` rows.

Notation: ``a`` is a cell's h-side factor ``h W + b``, ``m = (W x) * a``
its intermediate state. The true mLSTM is the mLSTM with ``4M``
intermediate units and a block-diagonal intermediate kernel, so it shares
the mLSTM's three functions (the blocks go through ``_inter*``). The
passes are tested against autodiff of the per-step Keras loop.
"""

import functools

from keras import ops

from keras_rnnlm.loops import recurrence
from keras_rnnlm.loops.fused_recurrence import custom_gradient
from keras_rnnlm.loops.loop_parts import Keep
from keras_rnnlm.loops.loop_parts import last_step
from keras_rnnlm.loops.loop_parts import loop_parts
from keras_rnnlm.loops.loop_parts import run_in_parts
from keras_rnnlm.loops.loop_parts import split_blocks
from keras_rnnlm.loops.loop_parts import whole


def block_matmul(m, blocks):
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


def _rows(t):
    """(T, B, N) -> (T * B, N)."""
    return ops.reshape(t, (-1, ops.shape(t)[-1]))


def _outer_sum(a_all, b_all):
    """``sum_t a_t^T b_t`` over all steps and rows: one matrix product."""
    return ops.matmul(ops.transpose(_rows(a_all)), _rows(b_all))


def _inter(m, w):
    """``m V``: a dense (M, N) matrix, or block-diagonal (K, M, N) blocks
    (one intermediate state per gate, as in the true mLSTM / mGRU)."""
    return block_matmul(m, w) if len(w.shape) == 3 else ops.matmul(m, w)


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
    h_all, _, _, a_all, m_all = (whole(s) for s in saved)
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
    h_all, a_all, m_all, zr_all, _ = (whole(s) for s in saved)
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
    h_all, a_all, m_all = (whole(s) for s in saved)
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
    h_all, a_zr_all, m_zr_all, zr_all, a_h_all, m_h_all, _ = (
        whole(s) for s in saved
    )
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


#: ``cell name -> (forward loop, reverse loop, finish)``; the names are
#: those of :data:`keras_rnnlm.layers.multiplicative.CELLS`. The forward
#: loop's saved tensors stay as it returned them (row blocks, padded to the
#: bucket length: :class:`~keras_rnnlm.loops.loop_parts.Blocks`) for the
#: reverse loop; the finish reads the ones it needs whole
#: (:func:`~keras_rnnlm.loops.loop_parts.whole`).
HAND_WRITTEN = {
    "mrnn": (_mrnn_forward, _mrnn_backward, _mrnn_finish),
    "mlstm": (_mlstm_forward, _mlstm_backward, _mlstm_finish),
    "tmlstm": (_mlstm_forward, _mlstm_backward, _mlstm_finish),
    "mgru": (_mgru_forward, _mgru_backward, _mgru_finish),
    "tmgru": (_tmgru_forward, _tmgru_backward, _tmgru_finish),
}


def _backward_in_parts(backward, parts, n_states):
    """``backward`` run as ``parts`` concurrent row blocks
    (:func:`~keras_rnnlm.loops.loop_parts.run_in_parts`). Every reverse
    loop here takes ``(xs_tm, *states, *weights, saved, d_ys, *d_last)``
    (time-major, batch-major, shared, time-major, time-major, batch-major)
    and returns its per-step gradients (time-major) and then the initial
    states' (batch-major)."""

    def run(*args):
        n_w = len(args) - 3 - 2 * n_states
        return run_in_parts(
            backward,
            parts,
            args,
            (1,) + (0,) * n_states + (None,) * n_w + (1, 1) + (0,) * n_states,
            lambda n: (1,) * (n - n_states) + (0,) * n_states,
        )

    return run


@functools.cache
def _compiled_pair(forward, backward):
    return recurrence.compile_loop(forward), recurrence.compile_loop(backward)


def hand_written_scan(name):
    """The training loop of cell ``name`` (a key of :data:`HAND_WRITTEN`)
    with its hand-written backward pass: ``run(xs_tm, states, weights) ->
    (ys_tm, last_states)``, differentiable with respect to all three.

    ``xs_tm`` are the time-major projected inputs, ``states`` the initial
    states and ``weights`` the cell's step weights, as
    :meth:`~keras_rnnlm.layers.multiplicative.MultiplicativeCell.step`
    takes them.
    """
    forward_fn, backward_fn, finish = HAND_WRITTEN[name]
    forward, backward = _compiled_pair(forward_fn, backward_fn)

    def run(xs_tm, states, weights):
        n_s, n_w = len(states), len(weights)
        parts = loop_parts(xs_tm.shape[1], recurrence.step_entries(*weights))

        @custom_gradient
        def _run(xs_tm, *flat):
            sg = ops.stop_gradient
            # the inputs are split (and padded) once for both loops, and
            # the saved tensors (all time-major) stay as the forward loop's
            # row blocks for the reverse loop
            xs_blocks = split_blocks(sg(xs_tm), parts, 1)
            saved = run_in_parts(
                forward,
                parts,
                (xs_blocks, *(sg(v) for v in flat)),
                (1,) + (0,) * n_s + (None,) * n_w,
                lambda n: (Keep(1),) * n,
            )
            last = tuple(last_step(s) for s in saved[:n_s])

            def grad(upstream):
                d_ys, *d_last = upstream
                d_xs, d_states, d_weights = finish(
                    _backward_in_parts(backward, parts, n_s),
                    xs_blocks,
                    flat[:n_s],
                    flat[n_s:],
                    saved,
                    d_ys,
                    d_last,
                )
                return (d_xs, *d_states, *d_weights)

            return (whole(saved[0]), *last), grad

        ys, *last = _run(xs_tm, *states, *weights)
        return ys, tuple(last)

    return run
