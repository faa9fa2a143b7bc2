"""Multi-cell LSTM (Cherian, Badola & Padmanabhan (2018), "Multi-cell LSTM
Based Neural Language Model", arXiv:1811.06477).

Each node computes its gates and input once, as a standard LSTM (eq. 1-4,
Keras gate order i, f, c, o)::

    z = x W + h U + b
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  a = tanh(z_c)

and holds ``m`` memory cells, all updated with the *same* gates (eq. 7)::

    c_k' = i * a + f * c_k            k = 1..m

A selection module turns the ``m`` cells into one effective cell ``c_eff``
and the node outputs ``h' = o * tanh(c_eff)`` (eq. 8). The state is
``[h, C]`` with ``C`` the ``m`` cells flattened to ``(batch, m * units)``
(cell ``k`` of unit ``j`` at column ``k * units + j``). The cells carry
their own values to the next step; ``c_eff`` is not written back.

Selection strategies (``strategy``), Section 4 of the paper:

* ``"mean"`` (eq. 9): ``c_eff = (1/m) sum_k c_k``.
* ``"weighted"`` (eq. 10): ``c_eff = sum_k w_k c_k`` with static weights,
  the first cell largest, each next one smaller by a constant decay. The
  paper does not say whether the decay is a ratio or a difference, nor
  whether the weights are normalised. Our reading, configurable:
  ``weighted_decay_type="geometric"`` (default): ``w_k = d ** (k - 1)``;
  ``"linear"``: ``w_k = max(0, 1 - (k - 1) d)``; ``d = weighted_decay``
  (default 0.5); ``w_1 = 1`` and no normalisation (eq. 10 has none) unless
  ``weighted_normalize=True`` (then the weights sum to 1).
* ``"random"`` (eq. 11): ``c_eff = c_K`` with ``K`` drawn uniformly from
  ``1..m``. What is drawn: with ``random_granularity="node"`` (default) an
  independent ``K`` for every batch row, every unit (node) and every time
  step; with ``"layer"`` one ``K`` per batch row and time step, shared by
  all units of the layer. The draws for a whole sequence are made once per
  call, before the time loop (from the layer's ``SeedGenerator``). At
  inference (``training=False``) the paper says nothing; by default
  (``random_inference="sample"``) the same random selection is applied
  (the paper's equation, unchanged); ``random_inference="mean"`` uses the
  expectation of the selected cell, ``mean_k c_k``, for a deterministic
  evaluation.
* ``"max"`` (eq. 12): ``c_eff = max_k c_k`` (per unit).
* ``"min_max"`` (eq. 13): ``c_eff = min_k c_k`` where ``o < o_thr``, else
  ``max_k c_k`` (per unit; ``o_thr = output_threshold``, default 0.5).
* ``"learnable_max"`` (eq. 14): ``c_eff = max_k (w_k * c_k)`` with a
  trainable weight per memory cell of every node (``cell_weights``, shape
  ``(m, units)``, initialised by ``cell_weight_initializer``, default
  U(0.9, 1.1): with equal initial weights and equal cells the tie-split
  gradient of ``max`` keeps the weights equal forever).

Initial cells (``initial_cells``): ``"zeros"`` (the paper: every state
starts at 0), ``"linspace"`` (cell ``k`` of every unit starts at
``s * (2 (k - 1) / (m - 1) - 1)``, evenly spread over ``[-s, s]``) or
``"random"`` (a fixed draw from U(-s, s) per cell and unit, made once when
the layer is built and saved with its weights); ``s =
initial_cells_scale``. ``h`` always starts at 0. A stateful layer goes
back to these values on ``reset_state()``.

What the strategies compute (proved in the README, tested in
``tests/layers/test_multicell_lstm.py``): because every cell is updated
with the same ``i, a, f``, the difference of two cells evolves as
``(c_k - c_l)' = f * (c_k - c_l)``. Cells that start equal stay equal
forever, so from the paper's all-zeros start ``mean``, ``max``,
``min_max`` and ``random`` compute *exactly* a standard LSTM with the same
weights, whatever ``m``; ``weighted`` is a standard LSTM whose output is
``o * tanh(S c)`` with ``S = sum_k w_k``; ``learnable_max`` one whose
output is ``o * tanh(c * max_k w_k)`` for ``c >= 0`` and
``o * tanh(c * min_k w_k)`` for ``c < 0``. From distinct starts the cells
keep their order and their differences shrink by ``f < 1`` every step:
``mean``, ``weighted`` and ``max`` are still exactly a standard LSTM
(started from the mean / weighted mean / largest initial cell), and the
others converge to one geometrically.

:class:`MultiCellLSTMCell` works in a plain ``keras.layers.RNN`` (the
"naive" per-step path, projections computed every step);
:class:`MultiCellLSTM` is the layer to use: the input projection
``x W + b`` is computed for the whole sequence as one matrix product
before the time loop and the loop (``h U``, gates, cells, selection) is
compiled (XLA on TensorFlow, part of the jitted step on JAX), with a
hand-written backward loop (:func:`multicell_recurrence`).
"""

import functools

import keras
from keras import initializers
from keras import ops

from keras_rnnlm.layers.rows import project_rows
from keras_rnnlm.layers.serialization import serialized_initializers
from keras_rnnlm.loops import recurrence
from keras_rnnlm.loops.fused_recurrence import FUSED_MODES
from keras_rnnlm.loops.fused_recurrence import FusedRecurrence
from keras_rnnlm.loops.fused_recurrence import custom_gradient
from keras_rnnlm.loops.fused_recurrence import value_of
from keras_rnnlm.loops.loop_parts import Keep
from keras_rnnlm.loops.loop_parts import last_step
from keras_rnnlm.loops.loop_parts import loop_parts
from keras_rnnlm.loops.loop_parts import run_in_parts
from keras_rnnlm.loops.loop_parts import split_blocks
from keras_rnnlm.loops.state import TrackedStateMixin
from keras_rnnlm.loops.state import state_snapshot

STRATEGIES = ("mean", "weighted", "random", "max", "min_max", "learnable_max")
INITIAL_CELLS = ("zeros", "linspace", "random")


def static_cell_weights(
    num_cells, decay, decay_type="geometric", normalize=False
):
    """The static weights of the ``weighted`` strategy (eq. 10), a list.

    ``geometric``: ``w_k = decay ** (k - 1)``; ``linear``:
    ``w_k = max(0, 1 - (k - 1) * decay)``; optionally normalised to sum 1.
    """
    if decay_type == "geometric":
        w = [float(decay) ** k for k in range(num_cells)]
    elif decay_type == "linear":
        w = [max(0.0, 1.0 - k * float(decay)) for k in range(num_cells)]
    else:
        raise ValueError(
            "weighted_decay_type must be 'geometric' or 'linear', got "
            f"{decay_type!r}"
        )
    if normalize:
        total = sum(w)
        w = [v / total for v in w]
    return w


def initial_cell_values(num_cells, units, mode, scale, seed=None):
    """(m, units) initial cell values for ``initial_cells`` ``mode``
    (``None`` for ``zeros``)."""
    if mode == "zeros":
        return None
    if mode == "linspace":
        if num_cells == 1:
            col = ops.zeros((1, 1))
        else:
            col = ops.reshape(
                ops.linspace(-float(scale), float(scale), num_cells),
                (num_cells, 1),
            )
        return ops.tile(col, (1, units))
    if mode == "random":
        return keras.random.uniform(
            (num_cells, units), -float(scale), float(scale), seed=seed
        )
    raise ValueError(f"initial_cells must be one of {INITIAL_CELLS}: {mode!r}")


def _select(cells, o, noise, weights, spec):
    """The selection module: (B, m, H) cells -> (B, H) ``c_eff``."""
    strategy, num_cells, static_w, threshold = spec
    if strategy == "mean":
        return ops.mean(cells, axis=1)
    if strategy == "weighted":
        w = ops.convert_to_tensor(static_w, dtype=cells.dtype)
        return ops.einsum("bmh,m->bh", cells, w)
    if strategy == "max":
        return ops.max(cells, axis=1)
    if strategy == "min_max":
        return ops.where(
            o < threshold, ops.min(cells, axis=1), ops.max(cells, axis=1)
        )
    if strategy == "learnable_max":
        return ops.max(cells * ops.expand_dims(weights[1], 0), axis=1)
    if strategy == "random":
        # noise ~ U[0, 1): index floor(noise * m), one-hot over the cells.
        index = ops.minimum(
            ops.cast(ops.floor(noise * num_cells), "int32"), num_cells - 1
        )
        pick = ops.one_hot(index, num_cells, axis=1, dtype=cells.dtype)
        return ops.sum(cells * pick, axis=1)
    raise ValueError(f"Unknown strategy {strategy!r}")


def _step_full(x, h, c_flat, weights, spec):
    """One step; returns ``(h', C', z)`` with ``z`` the gate
    pre-activations (kept by the forward loop for the backward pass)."""
    num_cells = spec[1]
    units = h.shape[-1]
    z = x[:, : 4 * units] + ops.matmul(h, weights[0])
    i = ops.sigmoid(z[:, :units])
    f = ops.sigmoid(z[:, units : 2 * units])
    a = ops.tanh(z[:, 2 * units : 3 * units])
    o = ops.sigmoid(z[:, 3 * units :])
    cells = ops.reshape(c_flat, (-1, num_cells, units))
    cells = ops.expand_dims(i * a, 1) + ops.expand_dims(f, 1) * cells
    noise = x[:, 4 * units :] if spec[0] == "random" else None
    c_eff = _select(cells, o, noise, weights, spec)
    h = o * ops.tanh(c_eff)
    return h, ops.reshape(cells, (-1, num_cells * units)), z


def multicell_step(x, states, weights, spec):
    """One time step of the multi-cell LSTM from its projected input.

    Args:
        x: (B, 4H) ``x W + b`` of this step, followed (strategy
            ``random`` only) by (B, H) uniform noise in [0, 1).
        states: ``(h, C)``, (B, H) and (B, m * H).
        weights: ``(recurrent_kernel,)`` plus ``cell_weights`` (m, H) for
            ``learnable_max``.
        spec: ``(strategy, m, static weights or None, o_thr)``.

    Returns:
        ``(h', (h', C'))``.
    """
    h, c, _ = _step_full(x, states[0], states[1], weights, spec)
    return h, (h, c)


def _tie_split(values, target):
    """Mask of ``values == target`` over the cells, divided by the number
    of ties (the gradient autodiff gives ``max``/``min``)."""
    mask = ops.cast(ops.equal(values, ops.expand_dims(target, 1)), values.dtype)
    return mask / ops.sum(mask, axis=1, keepdims=True)


def _selection_grad(cells, o, noise, weights, spec):
    """``d c_eff / d cells`` as (B, m, H) weights, and for
    ``learnable_max`` the (B, m, H) factor of ``d c_eff / d cell_weights``.
    """
    strategy, num_cells, static_w, threshold = spec
    if strategy == "mean":
        return ops.ones_like(cells) / num_cells, None
    if strategy == "weighted":
        w = ops.convert_to_tensor(static_w, dtype=cells.dtype)
        return ops.ones_like(cells) * ops.reshape(w, (1, -1, 1)), None
    if strategy == "max":
        return _tie_split(cells, ops.max(cells, axis=1)), None
    if strategy == "min_max":
        low = _tie_split(cells, ops.min(cells, axis=1))
        high = _tie_split(cells, ops.max(cells, axis=1))
        return ops.where(ops.expand_dims(o < threshold, 1), low, high), None
    if strategy == "learnable_max":
        w = ops.expand_dims(weights[1], 0)
        scaled = cells * w
        mask = _tie_split(scaled, ops.max(scaled, axis=1))
        return mask * w, mask * cells
    if strategy == "random":
        index = ops.minimum(
            ops.cast(ops.floor(noise * num_cells), "int32"), num_cells - 1
        )
        return ops.one_hot(index, num_cells, axis=1, dtype=cells.dtype), None
    raise ValueError(f"Unknown strategy {strategy!r}")


def _mc_forward(xs_tm, h0, c0, weights, spec):
    """Forward loop; saves h, the cells and the gate pre-activations."""

    def step(carry, inputs):
        h, c, z = _step_full(inputs[0], carry[0], carry[1], weights, spec)
        return (h, c), (h, c, z)

    _, (h_all, c_all, z_all) = recurrence.scan(step, (h0, c0), (xs_tm,))
    return h_all, c_all, z_all


def _mc_backward(
    xs_tm, h0, c0, weights, h_all, c_all, z_all, d_out, d_h, d_c, spec
):
    """Reverse loop of the multi-cell recurrence.

    Returns ``(dz_all, dh0, dc0, d_cell_weights)``; ``dz_all`` is the
    gradient of the gate pre-activations (= of the input projections).
    """
    num_cells = spec[1]
    units = h0.shape[-1]
    c_prev_all = recurrence.shift_in(c0, c_all)
    rk_t = ops.transpose(weights[0])
    learnable = spec[0] == "learnable_max"

    def step(carry, inputs):
        dh_next, dc_next, dw = carry
        dh_o, x, z, c, c_prev = inputs
        i = ops.sigmoid(z[:, :units])
        f = ops.sigmoid(z[:, units : 2 * units])
        a = ops.tanh(z[:, 2 * units : 3 * units])
        o = ops.sigmoid(z[:, 3 * units :])
        cells = ops.reshape(c, (-1, num_cells, units))
        noise = x[:, 4 * units :] if spec[0] == "random" else None
        c_eff = _select(cells, o, noise, weights, spec)
        pick, w_factor = _selection_grad(cells, o, noise, weights, spec)
        dh = dh_o + dh_next
        tc = ops.tanh(c_eff)
        dc_eff = dh * o * (1.0 - tc * tc)
        d_cells = ops.reshape(dc_next, (-1, num_cells, units))
        d_cells = d_cells + ops.expand_dims(dc_eff, 1) * pick
        if learnable:
            dw = dw + ops.sum(ops.expand_dims(dc_eff, 1) * w_factor, axis=0)
        prev = ops.reshape(c_prev, (-1, num_cells, units))
        d_ia = ops.sum(d_cells, axis=1)
        d_f = ops.sum(d_cells * prev, axis=1)
        dz = ops.concatenate(
            [
                d_ia * a * i * (1.0 - i),
                d_f * f * (1.0 - f),
                d_ia * i * (1.0 - a * a),
                dh * tc * o * (1.0 - o),
            ],
            axis=-1,
        )
        d_c_prev = d_cells * ops.expand_dims(f, 1)
        return (
            ops.matmul(dz, rk_t),
            ops.reshape(d_c_prev, (-1, num_cells * units)),
            dw,
        ), (dz,)

    dw0 = ops.zeros_like(weights[1]) if learnable else ops.zeros((), h0.dtype)
    (dh0, dc0, dw), (dz_all,) = recurrence.scan(
        step,
        (d_h, d_c, dw0),
        (d_out, xs_tm, z_all, c_all, c_prev_all),
        reverse=True,
    )
    return dz_all, dh0, dc0, dw


@functools.cache
def _compiled_recurrence(spec):
    forward = recurrence.compile_loop(functools.partial(_mc_forward, spec=spec))
    backward = recurrence.compile_loop(
        functools.partial(_mc_backward, spec=spec)
    )
    return forward, backward


def multicell_recurrence(xs_tm, h0, c0, weights, spec):
    """The multi-cell recurrence over time-major projected inputs, with a
    hand-written backward pass.

    Args:
        xs_tm: (T, B, 4H [+ H noise]) inputs of :func:`multicell_step`.
        h0, c0: (B, H), (B, m * H) initial states.
        weights: ``(recurrent_kernel[, cell_weights])``.
        spec: see :func:`multicell_step`.

    Returns:
        ``(outputs_tm, h_T, C_T)``; differentiable with respect to
        ``xs_tm`` (the noise columns get zero gradient), ``h0``, ``c0`` and
        the weights. The reverse loop carries ``dh`` and the ``m`` cells'
        gradients; the recurrent-kernel gradient is one matrix product over
        all steps after it.
    """
    forward, backward = _compiled_recurrence(spec)
    weights = tuple(weights)
    n_w = len(weights)
    # concurrent row blocks, as every fused loop (keras_rnnlm.loops.loop_parts)
    parts = loop_parts(xs_tm.shape[1], recurrence.step_entries(weights[0]))

    @custom_gradient
    def _run(xs_tm, h0, c0, *weights):
        sg = ops.stop_gradient
        # the inputs are split once for both loops; the cells and the gate
        # pre-activations stay as row blocks (only the reverse loop reads
        # them)
        xs_blocks = split_blocks(sg(xs_tm), parts, 1)
        h_all, c_all, z_all = run_in_parts(
            forward,
            parts,
            (xs_blocks, sg(h0), sg(c0), tuple(sg(w) for w in weights)),
            (1, 0, 0, None),
            (1, Keep(1), Keep(1)),
        )
        h_t, c_t = h_all[-1], last_step(c_all)

        def grad(upstream):
            d_out, d_ht, d_ct = upstream
            dz_all, dh0, dc0, dw = run_in_parts(
                backward,
                parts,
                (xs_blocks, h0, c0, weights, h_all, c_all, z_all)
                + (d_out, d_ht, d_ct),
                (1, 0, 0, None, 1, 1, 1, 1, 0, 0),
                (1, 0, 0, None),  # the cell weights' gradient: summed
            )
            units = h0.shape[-1]
            h_prev = recurrence.shift_in(h0, h_all)
            d_rk = ops.matmul(
                ops.transpose(ops.reshape(h_prev, (-1, units))),
                ops.reshape(dz_all, (-1, 4 * units)),
            )
            extra = xs_tm.shape[-1] - 4 * units
            d_xs = dz_all
            if extra:
                d_xs = ops.concatenate(
                    [dz_all, ops.zeros_like(xs_tm[..., 4 * units :])], axis=-1
                )
            d_weights = (d_rk, dw) if n_w == 2 else (d_rk,)
            return (d_xs, dh0, dc0, *d_weights)

        return (h_all, h_t, c_t), grad

    return _run(xs_tm, h0, c0, *weights)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MultiCellLSTMCell(keras.layers.Layer):
    """Multi-cell LSTM cell (see the module docstring for the equations).

    Weights: ``kernel`` (D, 4H), ``recurrent_kernel`` (H, 4H), ``bias``
    (4H), laid out as in ``keras.layers.LSTMCell`` (weights copy between
    the two); ``cell_weights`` (m, H) for ``learnable_max``;
    ``initial_cells`` (m, H, not trainable) for ``linspace`` / ``random``
    initial cells.

    Args:
        units: number of nodes ``H``.
        num_cells: memory cells per node ``m`` (paper: 2-50, default 10).
        strategy: one of :data:`STRATEGIES`.
        weighted_decay: decay of the static weights (``weighted``).
        weighted_decay_type: ``geometric`` or ``linear``.
        weighted_normalize: make the static weights sum to 1.
        output_threshold: ``o_thr`` of ``min_max``.
        random_granularity: ``node`` or ``layer`` (``random``).
        random_inference: ``sample`` or ``mean`` (``random``, at
            ``training=False``).
        initial_cells: one of :data:`INITIAL_CELLS`.
        initial_cells_scale: ``s`` of ``linspace`` / ``random``.
        kernel_initializer, recurrent_initializer, bias_initializer: as in
            ``keras.layers.LSTMCell``.
        unit_forget_bias: add 1 to the forget-gate bias at init.
        cell_weight_initializer: init of ``cell_weights``.
        seed: seed of the random selection and of ``random`` initial
            cells.
        **kwargs: base ``Layer`` arguments.

    Call arguments:
        inputs: (B, D) one time step.
        states: ``[h, C]``.
        training: selects the inference rule of ``random``.

    Example:

    >>> rnn = keras.layers.RNN(MultiCellLSTMCell(8, num_cells=4))
    >>> rnn(np.zeros((2, 5, 3), "float32")).shape
    (2, 8)
    """

    def __init__(
        self,
        units,
        num_cells=10,
        strategy="max",
        weighted_decay=0.5,
        weighted_decay_type="geometric",
        weighted_normalize=False,
        output_threshold=0.5,
        random_granularity="node",
        random_inference="sample",
        initial_cells="zeros",
        initial_cells_scale=0.1,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        cell_weight_initializer=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(units) <= 0 or int(num_cells) <= 0:
            raise ValueError(
                f"units and num_cells must be positive: {units}, {num_cells}"
            )
        if strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {STRATEGIES}, got {strategy!r}"
            )
        if random_granularity not in ("node", "layer"):
            raise ValueError(
                "random_granularity must be 'node' or 'layer', got "
                f"{random_granularity!r}"
            )
        if random_inference not in ("sample", "mean"):
            raise ValueError(
                "random_inference must be 'sample' or 'mean', got "
                f"{random_inference!r}"
            )
        if initial_cells not in INITIAL_CELLS:
            raise ValueError(
                f"initial_cells must be one of {INITIAL_CELLS}, got "
                f"{initial_cells!r}"
            )
        self.units = int(units)
        self.num_cells = int(num_cells)
        self.strategy = strategy
        self.weighted_decay = float(weighted_decay)
        self.weighted_decay_type = weighted_decay_type
        self.weighted_normalize = bool(weighted_normalize)
        # Validates the decay type early.
        self.static_weights = static_cell_weights(
            self.num_cells,
            self.weighted_decay,
            weighted_decay_type,
            self.weighted_normalize,
        )
        self.output_threshold = float(output_threshold)
        self.random_granularity = random_granularity
        self.random_inference = random_inference
        self.initial_cells = initial_cells
        self.initial_cells_scale = float(initial_cells_scale)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.cell_weight_initializer = initializers.get(
            cell_weight_initializer
            or initializers.RandomUniform(0.9, 1.1, seed=seed)
        )
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.state_size = [self.units, self.num_cells * self.units]
        self.output_size = self.units

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        h = self.units
        self.kernel = self.add_weight(
            shape=(input_dim, 4 * h),
            initializer=self.kernel_initializer,
            name="kernel",
        )
        self.recurrent_kernel = self.add_weight(
            shape=(h, 4 * h),
            initializer=self.recurrent_initializer,
            name="recurrent_kernel",
        )
        if self.unit_forget_bias:
            base = self.bias_initializer

            def bias_initializer(shape, dtype=None):
                return ops.concatenate(
                    [
                        base((h,), dtype=dtype),
                        initializers.get("ones")((h,), dtype=dtype),
                        base((2 * h,), dtype=dtype),
                    ]
                )

        else:
            bias_initializer = self.bias_initializer
        self.bias = self.add_weight(
            shape=(4 * h,), initializer=bias_initializer, name="bias"
        )
        if self.strategy == "learnable_max":
            self.cell_weights = self.add_weight(
                shape=(self.num_cells, h),
                initializer=self.cell_weight_initializer,
                name="cell_weights",
            )
        if self.initial_cells != "zeros":
            values = initial_cell_values(
                self.num_cells,
                h,
                self.initial_cells,
                self.initial_cells_scale,
                seed=self.seed,
            )
            self.initial_cells_value = self.add_weight(
                shape=(self.num_cells, h),
                initializer=lambda shape, dtype=None: ops.cast(values, dtype),
                trainable=False,
                name="initial_cells",
            )
        self.built = True

    # -- pieces shared by the naive and the fused path ------------------

    def project_inputs(self, inputs):
        """``x W + b`` (any leading dimensions; the bias fused into the
        product, :func:`~keras_rnnlm.layers.rows.project_rows`)."""
        return project_rows(inputs, self.kernel, self.bias)

    def step_weights(self):
        """The weights the time step uses, as a tuple of tensors."""
        w = (value_of(self.recurrent_kernel),)
        if self.strategy == "learnable_max":
            w += (value_of(self.cell_weights),)
        return w

    def samples(self, training):
        """Whether the random selection draws at this call."""
        return self.strategy == "random" and (
            training or self.random_inference == "sample"
        )

    def step_spec(self, training):
        """Hashable description of the step (see :func:`multicell_step`)."""
        strategy = self.strategy
        if strategy == "random" and not self.samples(training):
            strategy = "mean"
        static_w = (
            tuple(self.static_weights) if strategy == "weighted" else None
        )
        return (strategy, self.num_cells, static_w, self.output_threshold)

    def selection_noise(self, shape, dtype):
        """U[0, 1) draws for the random selection; ``shape`` ends with the
        units (broadcast from 1 with ``random_granularity="layer"``)."""
        shape = tuple(shape)
        draw = shape[:-1] + (
            (1,) if self.random_granularity == "layer" else (self.units,)
        )
        u = keras.random.uniform(draw, dtype=dtype, seed=self.seed_generator)
        return ops.broadcast_to(u, shape)

    def call(self, inputs, states, training=False):
        h, c = states
        x = self.project_inputs(inputs)
        if self.samples(training):
            noise = self.selection_noise(ops.shape(h), x.dtype)
            x = ops.concatenate([x, noise], axis=-1)
        out, new_states = multicell_step(
            x,
            (h, c),
            tuple(ops.cast(w, x.dtype) for w in self.step_weights()),
            self.step_spec(training),
        )
        return out, list(new_states)

    def get_initial_state(self, batch_size=None):
        h0 = ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
        if self.initial_cells == "zeros" or not self.built:
            c0 = ops.zeros(
                (batch_size, self.num_cells * self.units),
                dtype=self.compute_dtype,
            )
        else:
            cells = value_of(self.initial_cells_value)
            flat = ops.reshape(
                ops.cast(cells, self.compute_dtype),
                (1, self.num_cells * self.units),
            )
            c0 = ops.tile(flat, (batch_size, 1))
        return [h0, c0]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "num_cells": self.num_cells,
                "strategy": self.strategy,
                "weighted_decay": self.weighted_decay,
                "weighted_decay_type": self.weighted_decay_type,
                "weighted_normalize": self.weighted_normalize,
                "output_threshold": self.output_threshold,
                "random_granularity": self.random_granularity,
                "random_inference": self.random_inference,
                "initial_cells": self.initial_cells,
                "initial_cells_scale": self.initial_cells_scale,
                **serialized_initializers(
                    self,
                    "kernel_initializer",
                    "recurrent_initializer",
                    "bias_initializer",
                ),
                "unit_forget_bias": self.unit_forget_bias,
                **serialized_initializers(self, "cell_weight_initializer"),
                "seed": self.seed,
            }
        )
        return config


#: Constructor arguments of the cell that the layer takes too.
CELL_ARGS = (
    "num_cells",
    "strategy",
    "weighted_decay",
    "weighted_decay_type",
    "weighted_normalize",
    "output_threshold",
    "random_granularity",
    "random_inference",
    "initial_cells",
    "initial_cells_scale",
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
    "unit_forget_bias",
    "cell_weight_initializer",
    "seed",
)


def _bind(spec):
    def step(x, states, weights):
        return multicell_step(x, states, weights, spec)

    return step


@functools.cache
def _compiled_loop(spec):
    return recurrence.make_fused_scan(_bind(spec))


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MultiCellLSTM(FusedRecurrence, TrackedStateMixin, keras.layers.RNN):
    """Multi-cell LSTM layer with the fast path (see the module docstring).

    On the fast path ``x W + b`` is one matrix product over the whole
    sequence, the random-selection noise (strategy ``random``) is drawn
    once per call for every step, and only the recurrent step runs in the
    compiled loop. ``fused=False`` uses Keras's per-step loop over
    :class:`MultiCellLSTMCell` instead (identical results, the random draws
    aside), and so does ``fused="auto"`` with a mask, ``go_backwards`` or
    ``unroll`` (``fused=True`` raises there).

    Sentence-level state reset: ``layer(x, reset=r)`` with ``r`` (batch,
    time), 1.0 where a sentence starts, sets the state back to its initial
    value (``h = 0`` and the ``initial_cells``) before reading ``x[:, t]``
    where ``r[:, t] = 1`` (the carried state included, at ``t = 0``), for
    every selection strategy. Such a call runs :meth:`reset_inner_loop`, a
    per-step loop differentiated by autodiff, not the hand-written backward
    loop; a call without a mask is unchanged.

    Args:
        units: number of nodes.
        fused: ``"auto"`` (default): the fast path with the hand-written
            backward loop (:func:`multicell_recurrence`) when possible;
            ``True``: the same, or a ``ValueError`` where the fast path is
            impossible; ``"autodiff"``: like ``"auto"``, but the fast path
            is differentiated by
            :func:`keras_rnnlm.loops.recurrence.make_fused_scan`
            (per-step recomputed vector-Jacobian products); ``False``:
            Keras's per-step loop over the cell. See
            :class:`~keras_rnnlm.loops.fused_recurrence.FusedRecurrence`.
        num_cells, strategy, ...: every argument of
            :class:`MultiCellLSTMCell` (see :data:`CELL_ARGS`), by
            keyword, with the cell's defaults.
        **kwargs: ``keras.layers.RNN`` arguments (``return_sequences``,
            ``return_state``, ``stateful``, ``name``, ...).

    Example:

    >>> layer = MultiCellLSTM(8, num_cells=4, strategy="max",
    ...                       return_sequences=True)
    >>> layer(np.zeros((2, 5, 3), "float32")).shape
    (2, 5, 8)
    """

    fused_modes = (*FUSED_MODES, "autodiff")

    def __init__(self, units, *, fused="auto", **kwargs):
        # The cell's arguments, with the cell's defaults (one place).
        cell_args = {n: kwargs.pop(n) for n in CELL_ARGS if n in kwargs}
        cell = MultiCellLSTMCell(
            units,
            **cell_args,
            dtype=kwargs.get("dtype"),
            name="multicell_lstm_cell",
        )
        super().__init__(cell, **kwargs)
        self.units = cell.units
        for name in CELL_ARGS:
            setattr(self, name, getattr(cell, name))
        self.init_fused(fused)

    def reset_state(self):
        """Back to ``h = 0`` and the configured initial cells."""
        if self.states is None:
            return
        batch = self.states[0].shape[0]
        for var, value in zip(self.states, self.cell.get_initial_state(batch)):
            var.assign(ops.cast(value, var.dtype))

    def fused_inner_loop(self, sequences, initial_state, training=False):
        cell = self.cell
        projected = cell.project_inputs(sequences)
        if cell.samples(training):
            noise = cell.selection_noise(
                tuple(ops.shape(projected)[:-1]) + (cell.units,),
                projected.dtype,
            )
            projected = ops.concatenate([projected, noise], axis=-1)
        states = tuple(
            state_snapshot(s, projected.dtype) for s in initial_state
        )
        weights = tuple(
            ops.cast(w, projected.dtype) for w in cell.step_weights()
        )
        xs_tm = ops.transpose(projected, (1, 0, 2))
        spec = cell.step_spec(training)
        if self.fused == "autodiff" or self.forward_only:
            outputs_tm, last = _compiled_loop(spec)(
                xs_tm, states, weights, forward_only=self.forward_only
            )
        else:
            outputs_tm, *last = multicell_recurrence(
                xs_tm, *states, weights, spec
            )
        outputs = ops.transpose(outputs_tm, (1, 0, 2))
        return last[0], outputs, list(last)

    def reset_inner_loop(self, sequences, initial_state, reset, training):
        """The steps of the fast path (same projection, same noise draws)
        with the state back to ``h = 0`` and the configured initial cells
        where ``reset`` (batch, time) is 1
        (:func:`~keras_rnnlm.loops.recurrence.reset_recurrence`, a
        per-step loop differentiated by autodiff: the hand-written backward
        loop takes no mask)."""
        cell = self.cell
        projected = cell.project_inputs(sequences)
        dtype = projected.dtype
        if cell.samples(training):
            noise = cell.selection_noise(
                tuple(ops.shape(projected)[:-1]) + (cell.units,), dtype
            )
            projected = ops.concatenate([projected, noise], axis=-1)
        weights = tuple(ops.cast(w, dtype) for w in cell.step_weights())
        spec = cell.step_spec(training)
        initial = None
        if cell.initial_cells != "zeros":
            initial = tuple(cell.get_initial_state(1))

        def step(x, states):
            return multicell_step(x[0], states, weights, spec)

        outputs, last = recurrence.reset_recurrence(
            step,
            (projected,),
            tuple(state_snapshot(s, dtype) for s in initial_state),
            reset,
            initial=initial,
        )
        return last[0], outputs, list(last)

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        for name in ("units", *CELL_ARGS):
            config[name] = cell_config[name]
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
