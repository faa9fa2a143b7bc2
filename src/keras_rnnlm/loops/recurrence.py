"""Compiled time loops shared by the package's recurrent layers.

Every recurrent layer in :mod:`keras_rnnlm.layers` splits its work in two:

* the **input-side** affine maps (``x @ W + b``) for the whole sequence,
  computed as one large matrix product *before* the time loop, and
* the **recurrent** part (``h @ U`` plus elementwise gates), which is all
  that runs per time step.

This module holds the per-step loops. They are written with ``keras.ops``
only, so they run on every backend. On the TensorFlow backend the loops are
additionally wrapped in an XLA-compiled ``tf.function`` (a non-XLA TF
``while_loop`` pays tens of microseconds per op per step, which dominates
small models; one program per bucket of sequence lengths, see
:mod:`keras_rnnlm.loops.time_buckets`), while the big input and output
matrix products stay in the regular graph where TensorFlow's oneDNN
kernels are fastest. On JAX the whole train step is already
``jax.jit``-compiled, so the loops are used as they are.

The fused LSTM recurrence has a hand-written backward pass (attached with
:func:`keras_rnnlm.loops.fused_recurrence.custom_gradient`): the reverse
loop carries only ``dh`` and ``dc``; the recurrent-kernel gradient is then
**one** matrix product over all time steps instead of T small ones inside
the loop.
"""

import functools
import math

from keras import backend
from keras import ops

from keras_rnnlm.loops.fused_recurrence import custom_gradient
from keras_rnnlm.loops.loop_parts import Keep
from keras_rnnlm.loops.loop_parts import last_step
from keras_rnnlm.loops.loop_parts import loop_parts
from keras_rnnlm.loops.loop_parts import run_in_parts
from keras_rnnlm.loops.loop_parts import split_blocks
from keras_rnnlm.loops.time_buckets import BucketedLoop
from keras_rnnlm.loops.time_buckets import loop_steps


def compile_loop(fn):
    """Compiles a loop function for the active backend.

    TensorFlow: a :class:`~keras_rnnlm.loops.time_buckets.BucketedLoop`,
    an XLA-compiled ``tf.function`` compiled once per bucket of sequence
    lengths; call it through
    :func:`~keras_rnnlm.loops.loop_parts.run_in_parts`, which pads its
    time-major arguments (batch axis 1) to the bucket and passes the true
    step count, which every :func:`scan` inside runs. Other backends:
    ``fn`` unchanged (JAX jit-compiles the whole step; torch runs
    eagerly).
    """
    if backend.backend() != "tensorflow":
        return fn
    return BucketedLoop(fn)


def scan(step, init, xs, reverse=False, length=None):
    """``jax.lax.scan`` semantics on every backend.

    ``step(carry, x) -> (carry, y)`` with ``carry``, ``x`` and ``y`` flat
    tuples of tensors (any shapes). Keras's TensorFlow ``ops.scan`` requires
    ``y`` to have the carry's structure and shapes, which the LSTM loops do
    not satisfy, so TensorFlow gets a small TensorArray loop here.

    ``length`` (TensorFlow): the number of steps to run, the first ones of
    ``xs`` (forward ``t = 0 .. length-1``, reverse ``t = length-1 .. 0``);
    by default the true step count of the compiled loop being traced
    (:func:`~keras_rnnlm.loops.time_buckets.loop_steps`: its sequences are
    padded to a bucket length), else the length of ``xs``. The per-step
    outputs keep the length of ``xs``; their rows past ``length`` are not
    written (zeros under XLA).
    """
    if backend.backend() != "tensorflow":
        return ops.scan(step, init, xs, reverse=reverse)
    import tensorflow as tf  # TensorFlow backend only

    size = xs[0].shape[0]
    if size is None:
        size = tf.shape(xs[0])[0]
    n = loop_steps() if length is None else length
    if n is None:
        n = size
    # Per-step rows are read by indexing (a dynamic slice), not through a
    # TensorArray: unstacking copies the whole sequence first, which costs
    # as much as a small model's loop in a plain (non-XLA) graph.
    xs = tuple(xs)
    _, y_probe = step(init, tuple(x[0] for x in xs))
    ys_ta = tuple(
        tf.TensorArray(y.dtype, size=size, element_shape=y.shape)
        for y in y_probe
    )

    def body(i, carry, ys_ta):
        t = n - 1 - i if reverse else i
        new_carry, ys = step(carry, tuple(tf.gather(x, t) for x in xs))
        for new, old in zip(new_carry, carry):
            new.set_shape(old.shape)  # e.g. a static batch size
        carry = new_carry
        return i + 1, carry, tuple(ta.write(t, y) for ta, y in zip(ys_ta, ys))

    _, carry, ys_ta = tf.while_loop(
        lambda i, *_: i < n,
        body,
        (0, tuple(init), ys_ta),
        maximum_iterations=n,
    )
    return carry, tuple(ta.stack() for ta in ys_ta)


def _tensors(*xs):
    """Variables read into tensors: a compiled TensorFlow loop, cached
    across models, must not be traced with (and later reference) one
    model's variables."""
    if backend.backend() != "tensorflow":
        return xs
    import tensorflow as tf  # TensorFlow backend only

    return tuple(tf.identity(x) for x in xs)


def step_entries(*weights):
    """Entries of the weight tensors (a step's multiply-adds per row, the
    measure :func:`~keras_rnnlm.loops.loop_parts.loop_parts` takes)."""
    return sum(math.prod(w.shape) for w in weights)


def _time_major(x):
    return ops.transpose(x, (1, 0, 2))


def shift_in(first, all_steps):
    """``(s_0, s_1, ..., s_{T-1})`` from ``s_0`` and ``(s_1, ..., s_T)``:
    the value each step started from, time-major."""
    return ops.concatenate([first[None], all_steps[:-1]], axis=0)


def lstm_update(z, c, units):
    """One LSTM state update from the pre-activation gates ``z`` (Keras
    order i, f, g, o): ``(h, c, (i, f, g, o))``, gates after activation.
    Its backward is :func:`lstm_update_backward`."""
    ifo = ops.sigmoid(
        ops.concatenate([z[:, : 2 * units], z[:, 3 * units :]], axis=-1)
    )
    i = ifo[:, :units]
    f = ifo[:, units : 2 * units]
    o = ifo[:, 2 * units :]
    g = ops.tanh(z[:, 2 * units : 3 * units])
    c = f * c + i * g
    h = o * ops.tanh(c)
    return h, c, (i, f, g, o)


def _lstm_step(z_x, h, c, recurrent_kernel, units):
    """One LSTM step: ``(h, c, i, f, g, o)`` (gates after activation)."""
    h, c, gates = lstm_update(z_x + ops.matmul(h, recurrent_kernel), c, units)
    return (h, c, *gates)


def _lstm_forward(proj_tm, h0, c0, recurrent_kernel):
    """Forward LSTM recurrence on time-major pre-projected inputs.

    Args:
        proj_tm: (T, B, 4H) input projections ``x @ W + b`` in Keras gate
            order i, f, c(candidate), o.
        h0, c0: (B, H) initial states.
        recurrent_kernel: (H, 4H).

    Returns:
        ``(h_all, c_all, gates_all)``: (T, B, H), (T, B, H), (T, B, 4H) with
        the gates already passed through their activations.
    """
    units = ops.shape(h0)[-1]

    def step(carry, xs):
        (h, c), (z_x,) = carry, xs
        h, c, i, f, g, o = _lstm_step(z_x, h, c, recurrent_kernel, units)
        return (h, c), (h, c, ops.concatenate([i, f, g, o], axis=-1))

    _, (h_all, c_all, gates_all) = scan(step, (h0, c0), (proj_tm,))
    return h_all, c_all, gates_all


def _lstm_forward_only(proj_tm, h0, c0, recurrent_kernel):
    """The forward recurrence without the saved states and gates that the
    backward pass needs: ``(h_all, h_T, c_T)``."""
    units = ops.shape(h0)[-1]

    def step(carry, xs):
        (h, c), (z_x,) = carry, xs
        h, c = _lstm_step(z_x, h, c, recurrent_kernel, units)[:2]
        return (h, c), (h,)

    (h_t, c_t), (h_all,) = scan(step, (h0, c0), (proj_tm,))
    return h_all, h_t, c_t


def lstm_update_backward(dh, dc_next, c, c_prev, gates, units):
    """Backward of one LSTM state update ``c = f c_prev + i g``,
    ``h = o tanh(c)`` (gates after activation, Keras order i, f, g, o).

    Args:
        dh: total gradient reaching ``h``; dc_next: gradient reaching ``c``
            from the next step.

    Returns:
        ``(dz, dc_prev)``: the gradient of the pre-activation gates and of
        the previous cell state.
    """
    i = gates[:, :units]
    f = gates[:, units : 2 * units]
    g = gates[:, 2 * units : 3 * units]
    o = gates[:, 3 * units :]
    tc = ops.tanh(c)
    dc = dc_next + dh * o * (1.0 - tc * tc)
    dz = ops.concatenate(
        [
            dc * g * i * (1.0 - i),
            dc * c_prev * f * (1.0 - f),
            dc * i * (1.0 - g * g),
            dh * tc * o * (1.0 - o),
        ],
        axis=-1,
    )
    return dz, dc * f


def _lstm_backward(
    h0, c0, recurrent_kernel, c_all, gates_all, dh_out, dh_t, dc_t
):
    """Reverse loop of the LSTM recurrence (see :func:`_lstm_forward`).

    Returns ``(dz_all, dh0, dc0)``: the gradient with respect to the
    pre-activation gates at every step (which is also the gradient of the
    input projections) and of the initial states.
    """
    units = ops.shape(h0)[-1]
    c_prev_all = shift_in(c0, c_all)
    rk_t = ops.transpose(recurrent_kernel)

    def step(carry, inputs):
        dh_next, dc_next = carry
        dh_o, c, c_prev, gates = inputs
        dz, dc_prev = lstm_update_backward(
            dh_o + dh_next, dc_next, c, c_prev, gates, units
        )
        return (ops.matmul(dz, rk_t), dc_prev), (dz,)

    (dh0, dc0), (dz_all,) = scan(
        step,
        (dh_t, dc_t),
        (dh_out, c_all, c_prev_all, gates_all),
        reverse=True,
    )
    return dz_all, dh0, dc0


@functools.cache
def _compiled():
    return (
        compile_loop(_lstm_forward),
        compile_loop(_lstm_backward),
        compile_loop(_lstm_forward_only),
    )


def lstm_recurrence(
    proj, h0, c0, recurrent_kernel, forward_only=False, time_major=False
):
    """Runs the LSTM recurrence over pre-projected inputs.

    Args:
        proj: (B, T, 4H) ``x @ kernel + bias`` for the whole sequence, Keras
            gate order (i, f, c, o).
        h0, c0: (B, H) initial states.
        recurrent_kernel: (H, 4H) tensor (already weight-dropped if the
            caller uses DropConnect).
        forward_only: skip saving the per-step cell states and gates that
            the hand-written backward pass reads (see
            :func:`set_forward_only`). Same outputs. On TensorFlow the
            result is then not differentiable through the fast path;
            on JAX it is (plain ``lax.scan`` autodiff).
        time_major: ``proj`` is (T, B, 4H) and ``outputs`` (T, B, H):
            the loops' own layout, so neither is transposed here (a
            caller that projects time-major inputs transposes the
            narrower input instead of the projection).

    Returns:
        ``(outputs, h_T, c_T)`` with ``outputs`` of shape (B, T, H)
        ((T, B, H) if ``time_major``). Differentiable with respect to
        all four arguments.
    """
    forward, backward, forward_only_loop = _compiled()
    parts = loop_parts(
        proj.shape[1 if time_major else 0], step_entries(recurrent_kernel)
    )

    def to_loop(x):  # the caller's layout <-> the loops' time-major one
        return x if time_major else _time_major(x)

    if forward_only:
        h_all, h_t, c_t = run_in_parts(
            forward_only_loop,
            parts,
            _tensors(to_loop(proj), h0, c0, recurrent_kernel),
            (1, 0, 0, None),
            (1, 0, 0),
        )
        return to_loop(h_all), h_t, c_t

    @custom_gradient
    def _run(proj, h0, c0, recurrent_kernel):
        # The compiled loops never see a gradient tape: the gradient is the
        # hand-written one below (stop_gradient keeps TF from building a
        # differentiable variant of the XLA function).
        sg = ops.stop_gradient
        proj_tm = to_loop(proj)
        # the cell states and gates stay as row blocks: only the reverse
        # loop reads them, block by block
        h_all, c_all, gates_all = run_in_parts(
            forward,
            parts,
            (sg(proj_tm), sg(h0), sg(c0), sg(recurrent_kernel)),
            (1, 0, 0, None),
            (1, Keep(1), Keep(1)),
        )
        outputs = to_loop(h_all)
        h_t, c_t = h_all[-1], last_step(c_all)

        def grad(upstream):
            d_out, d_ht, d_ct = upstream
            dz_all, dh0, dc0 = run_in_parts(
                backward,
                parts,
                (
                    h0,
                    c0,
                    recurrent_kernel,
                    c_all,
                    gates_all,
                    to_loop(d_out),
                    d_ht,
                    d_ct,
                ),
                (0, 0, None, 1, 1, 1, 0, 0),
                (1, 0, 0),
            )
            h_prev = shift_in(h0, h_all)
            n = ops.shape(h0)[-1]
            d_rk = ops.matmul(
                ops.transpose(ops.reshape(h_prev, (-1, n))),
                ops.reshape(dz_all, (-1, 4 * n)),
            )
            return to_loop(dz_all), dh0, dc0, d_rk

        return (outputs, h_t, c_t), grad

    return _run(proj, h0, c0, recurrent_kernel)


def _zeros_for_none(grads, likes):
    return tuple(
        ops.zeros_like(like) if g is None else g
        for g, like in zip(grads, likes)
    )


def _scan_forward(step, xs_tm, states, weights):
    """Forward loop saving every step's states; ``step(x, s, w) -> (y, s)``."""

    def body(carry, inputs):
        y, new = step(inputs[0], carry, weights)
        return tuple(new), (y, *new)

    _, (ys, *states_all) = scan(body, tuple(states), (xs_tm,))
    return ys, tuple(states_all)


def _scan_forward_only(step, xs_tm, states, weights):
    """Forward loop keeping only the last states: ``(ys, last_states)``."""

    def body(carry, inputs):
        y, new = step(inputs[0], carry, weights)
        return tuple(new), (y,)

    last, (ys,) = scan(body, tuple(states), (xs_tm,))
    return ys, tuple(last)


def _scan_backward(step, xs_tm, states, weights, states_all, d_ys, d_last):
    """Reverse loop: each step's vector-Jacobian product, recomputed.

    TensorFlow only (a tape inside the compiled loop body): the per-step
    forward is recomputed from the saved states, so nothing but the states
    crosses the XLA boundary (TensorFlow's own while-loop gradient would
    need TensorLists there, which XLA does not support).
    """
    import tensorflow as tf  # TensorFlow backend only

    prev_all = tuple(shift_in(s0, s) for s0, s in zip(states, states_all))
    n_states = len(states)

    def body(carry, inputs):
        d_states, d_weights = carry[:n_states], carry[n_states:]
        x, dy, prev = inputs[0], inputs[1], inputs[2:]
        with tf.GradientTape() as tape:
            tape.watch([x, *prev, *weights])
            y, new = step(x, tuple(prev), weights)
        grads = tape.gradient(
            [y, *new],
            [x, *prev, *weights],
            output_gradients=[dy, *d_states],
        )
        grads = _zeros_for_none(grads, (x, *prev, *weights))
        dx, d_prev = grads[0], grads[1 : 1 + n_states]
        d_w = grads[1 + n_states :]
        new_dw = tuple(a + b for a, b in zip(d_weights, d_w))
        return (*d_prev, *new_dw), (dx,)

    init = (*d_last, *(ops.zeros_like(w) for w in weights))
    carry, (dxs,) = scan(body, init, (xs_tm, d_ys, *prev_all), reverse=True)
    return dxs, carry[:n_states], carry[n_states:]


def _flat(loop):
    """``loop`` returning one flat tuple (a pair ``(ys, states)`` or a
    triple ``(dxs, d_states, d_weights)`` flattened), for
    :func:`~keras_rnnlm.loops.loop_parts.run_in_parts`."""

    def run(*args):
        out = []
        for part in loop(*args):
            out.extend(part if isinstance(part, tuple) else (part,))
        return tuple(out)

    return run


def make_fused_scan(step):
    """A compiled, differentiable loop for a recurrent step function.

    Args:
        step: ``step(x_t, states, weights) -> (y_t, new_states)`` written
            with ``keras.ops``; ``x_t`` is one time step of the projected
            inputs, ``states`` and ``weights`` tuples of tensors.

    Returns:
        ``run(xs_tm, states, weights, forward_only=False) -> (ys_tm,
        last_states)`` for time-major ``xs_tm``; differentiable with
        respect to all three. ``forward_only=True`` keeps no per-step
        states for a backward pass (on TensorFlow: not differentiable).
        On TensorFlow the forward and the backward loops are XLA-compiled
        and the backward pass recomputes each step's vector-Jacobian
        product (:func:`_scan_backward`); on JAX it is ``lax.scan`` with
        JAX's own autodiff (the step is jitted with the train step).
    """
    if backend.backend() != "tensorflow":

        def run_plain(xs_tm, states, weights, forward_only=False):
            return _scan_forward_only(step, xs_tm, states, weights)

        return run_plain

    forward = compile_loop(_flat(functools.partial(_scan_forward, step)))
    backward = compile_loop(_flat(functools.partial(_scan_backward, step)))
    forward_only_loop = compile_loop(
        _flat(functools.partial(_scan_forward_only, step))
    )

    def run(xs_tm, states, weights, forward_only=False):
        states, weights = tuple(states), tuple(weights)
        n_s = len(states)
        parts = loop_parts(xs_tm.shape[1], step_entries(*weights))
        if forward_only:
            ys, *last = run_in_parts(
                forward_only_loop,
                parts,
                (
                    _tensors(xs_tm)[0],
                    _tensors(*states),
                    _tensors(*weights),
                ),
                (1, 0, None),
                (1,) + (0,) * n_s,
            )
            return ys, tuple(last)

        @custom_gradient
        def _run(xs_tm, *flat):
            st, w = flat[:n_s], flat[n_s:]
            sg = ops.stop_gradient
            # the inputs are split once for both loops, and the per-step
            # states that only the reverse loop reads stay as row blocks
            xs_blocks = split_blocks(sg(xs_tm), parts, 1)
            ys, *states_all = run_in_parts(
                forward,
                parts,
                (xs_blocks, tuple(sg(s) for s in st), tuple(sg(v) for v in w)),
                (1, 0, None),
                (1,) + (Keep(1),) * n_s,
            )
            states_all = tuple(states_all)
            last = tuple(last_step(s) for s in states_all)

            def grad(upstream):
                d_ys, *d_last = upstream
                return run_in_parts(
                    backward,
                    parts,
                    (xs_blocks, st, w, states_all, d_ys, tuple(d_last)),
                    (1, 0, None, 1, 1, 0),
                    (1,) + (0,) * n_s + (None,) * len(w),
                )

            return (ys, *last), grad

        ys, *last = _run(xs_tm, *states, *weights)
        return ys, tuple(last)

    return run


def set_forward_only(layer, enabled=True):
    """Switches the fused loops of ``layer`` (a model or a layer, and every
    layer inside it) to forward-only mode, or back.

    In forward-only mode the fused recurrences keep nothing for a backward
    pass (the LSTM loop saves no per-step cell states and gates), which
    makes evaluation and scoring cheaper. Only for models that are never
    differentiated: the package's :class:`~keras_rnnlm.evaluation.Evaluator`
    and scoring / export graphs switch their own models; a training or
    dynamic-evaluation model must not be switched (on TensorFlow its
    gradients would fail).

    Returns:
        The number of layers switched (those with a ``forward_only``
        attribute).
    """
    n = 0
    for sub in layer._flatten_layers(include_self=True, recursive=True):
        if hasattr(sub, "forward_only"):
            sub.forward_only = bool(enabled)
            n += 1
    return n


def reset_recurrence(step, xs, states, reset, initial=None):
    """A recurrence whose state goes back to its initial value where a
    sentence starts (sentence-level training, arXiv:2106.08927, Sec. 3.1).

    The one loop every recurrent layer of the package runs for a call with
    a reset mask: a per-step :func:`scan`, differentiated by the backend's
    autodiff (the fused loops' hand-written backward passes take no mask).
    Before reading ``xs[:, t]``, the state of row ``b`` is set to
    ``initial`` where ``reset[b, t] = 1`` (at ``t = 0`` too: the reset
    replaces the initial or carried ``states``); elsewhere it is carried
    unchanged (multiplied by exactly 1).

    Args:
        step: ``step(x_t, states) -> (y_t, new_states)``; ``x_t`` the tuple
            of this step's rows of ``xs``, ``states`` a tuple of tensors.
        xs: tuple of batch-major (B, T, ...) inputs (projected).
        states: tuple of (B, N) states at ``t = 0``.
        reset: (B, T), 1.0 where a sentence starts, else 0.0.
        initial: tuple of the states a reset restores, each broadcastable
            to its state's shape ((1, N) for one value for every row);
            ``None``: zeros.

    Returns:
        ``(outputs, last_states)``: (B, T, N) outputs ``y_t`` and the tuple
        of the states after the last step.
    """
    states = tuple(states)
    dtype = states[0].dtype
    keep = 1.0 - ops.cast(reset, dtype)
    keep_tm = ops.expand_dims(ops.transpose(keep, (1, 0)), -1)
    xs_tm = tuple(ops.swapaxes(x, 0, 1) for x in xs)

    def body(carry, inputs):
        *x, k = inputs
        if initial is None:
            carry = tuple(s * k for s in carry)
        else:
            carry = tuple(
                s * k + ops.cast(s0, dtype) * (1.0 - k)
                for s, s0 in zip(carry, initial)
            )
        y, new = step(tuple(x), carry)
        return tuple(new), (y,)

    last, (ys,) = scan(body, states, (*xs_tm, keep_tm))
    return ops.swapaxes(ys, 0, 1), tuple(last)


def lstm_reset_recurrence(proj, h0, c0, recurrent_kernel, reset):
    """:func:`lstm_recurrence` with the state zeroed where ``reset``
    (B, T) is 1 (see :func:`reset_recurrence`, whose per-step autodiff
    loop it runs); same arguments and results."""
    units = ops.shape(h0)[-1]

    def step(x, states):
        h, c = states
        h, c, _ = lstm_update(x[0] + ops.matmul(h, recurrent_kernel), c, units)
        return h, (h, c)

    outputs, (h_t, c_t) = reset_recurrence(step, (proj,), (h0, c0), reset)
    return outputs, h_t, c_t
