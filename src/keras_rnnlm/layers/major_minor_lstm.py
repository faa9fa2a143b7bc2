"""Major-Minor LSTM (MMLSTM) layer.

Reference: Shuang, Li, Gu, Loo & Su (2020), "Major-Minor Long Short-Term
Memory for Word-Level Language Model", IEEE Transactions on Neural
Networks and Learning Systems 31(10), doi:10.1109/TNNLS.2019.2947563;
Section IV-C, eq. (21)-(22) and Fig. 2.

A layer of total size ``S`` is split by the Major proportion ``r`` into two
independent LSTMs whose outputs are concatenated:

* the **Major** LSTM, ``round(r * S)`` units (round half up), reads the
  output of the previous layer;
* the **Minor** LSTM, ``S - round(r * S)`` units, reads the word embeddings
  (``minor_input="embedding"``, the paper's MMLM-1, its main model) or the
  previous layer's output too (``"previous"``, MMLM-2);
* output ``h = [h_major, h_minor]`` (Major first), size ``S``.

Neither branch sees the other's state: the recurrent matrix of the layer is
block diagonal (``U_major``, ``U_minor``), with ``r^2 S^2 + (1 - r)^2 S^2``
instead of ``S^2`` recurrent weights per gate, and the Minor branch's
features are not correlated with the Major's through a shared recurrence.

Each branch is the package's fused weight-dropped LSTM
(:class:`~keras_rnnlm.layers.weight_drop_lstm.WeightDropLSTM`), both with
the same DropConnect rate on their recurrent kernels (the paper ties the
Major and Minor regularisation), each drawing its own mask once per call.
With ``r = 1`` there is no Minor branch and the layer is exactly a
``WeightDropLSTM(S)`` (same weights, same outputs; same masks with the
same seed).

State: ``[h_major, c_major, h_minor, c_minor]`` (``[h_major, c_major]``
without a Minor branch). With ``stateful=True`` the branches carry their
state across calls in their own (tracked) state variables, so the state is
threaded through the compiled steps of every backend (JAX included) and
``reset_state()`` zeroes both branches.

Fused branches (``fuse_branches``): the two recurrences can also run as
ONE fused LSTM loop of ``S`` units whose recurrent matrix is the block-
diagonal ``[[U_major, 0], [0, U_minor]]`` (gates interleaved per branch,
each branch's input projection computed separately and hoisted). Same
function, same weights, same weight-drop masks, same gradients (the zero
blocks get no update); it costs ``2 r (1 - r) S^2`` extra multiply-adds
per step and gate but halves the number of sequential loop steps, which is
what bounds a GPU. ``"auto"`` (default) therefore fuses on the JAX backend
and keeps the two loops, with fewer FLOPs, on TensorFlow (timings in
``bench/RESULTS.md``). ``fuse_branches=True`` fuses on every backend.

Seeds: the Major branch uses ``seed`` (weight-drop mask) and the
initializers as given; the Minor branch uses ``seed + MINOR_SEED_OFFSET``
and copies of integer-seeded initializers with their seed shifted by the
same offset, so that branches of equal shape never start equal.
"""

import math

import keras
from keras import initializers
from keras import ops

from keras_rnnlm.layers.serialization import serialized_initializers
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.loops.fused_recurrence import resolve_fast_path
from keras_rnnlm.loops.recurrence import lstm_recurrence
from keras_rnnlm.loops.recurrence import lstm_reset_recurrence
from keras_rnnlm.loops.state import state_snapshot
from keras_rnnlm.loops.state import with_static_batch

MINOR_INPUTS = ("embedding", "previous")
#: Seed shift of the Minor branch (mask and initializer seeds).
MINOR_SEED_OFFSET = 10007


def split_units(units, major_proportion):
    """``(major_units, minor_units)`` of a layer of size ``units``.

    ``major_units = round(major_proportion * units)``, rounding halves up
    (so ``0.5 * 1150 = 575``); ``minor_units`` is the rest.
    """
    major = int(math.floor(major_proportion * units + 0.5))
    return major, units - major


def count_params(
    units, major_proportion, input_dim, minor_input_dim=None, num_biases=1
):
    """Parameters of one :class:`MajorMinorLSTM` layer.

    Args:
        units: layer size ``S``.
        major_proportion: ``r``.
        input_dim: size of the previous layer's output (Major input).
        minor_input_dim: size of the Minor input (the embedding size for
            ``minor_input="embedding"``; ``None``: ``input_dim``).
        num_biases: 1 (Keras) or 2 (PyTorch's ``b_ih + b_hh``, how the
            paper's code counts).
    """
    if minor_input_dim is None:
        minor_input_dim = input_dim
    major, minor = split_units(units, major_proportion)

    def lstm(d, h):
        return 4 * h * (d + h) + num_biases * 4 * h if h else 0

    return lstm(input_dim, major) + lstm(minor_input_dim, minor)


def _shifted(initializer, offset):
    """A copy of ``initializer`` whose integer seed is shifted by
    ``offset``; unseeded initializers get a fresh copy (a new seed)."""
    initializer = initializers.get(initializer)
    config = initializer.get_config()
    if isinstance(config.get("seed"), int):
        config["seed"] += offset
    return initializer.__class__.from_config(config)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class MajorMinorLSTM(keras.layers.Layer):
    """Major-Minor LSTM layer (see the module docstring).

    Args:
        units: total output size ``S`` (Major + Minor).
        major_proportion: ``r`` in ``(0, 1]``, the Major share of ``units``
            (the paper's best: 0.9, 0.9, 0.6 for its three layers); 1 gives
            a plain weight-dropped LSTM.
        minor_input: ``"embedding"`` (MMLM-1, default): the layer is called
            on ``[previous_output, embeddings]`` and the Minor LSTM reads
            the embeddings; ``"previous"`` (MMLM-2): the layer is called on
            one tensor, read by both branches.
        weight_dropout: DropConnect rate on both branches' recurrent
            kernels (AWD-LSTM ``wdrop``).
        seed: seed of the Major branch's mask; the Minor branch uses
            ``seed + MINOR_SEED_OFFSET``.
        return_sequences: return the whole output sequence (else the last
            output).
        return_state: also return ``[h_major, c_major, h_minor, c_minor]``.
        stateful: carry the state across calls (fixed batch size).
        kernel_initializer, recurrent_initializer, bias_initializer,
        unit_forget_bias: as in ``keras.layers.LSTM``, for both branches
            (a per-branch scale, e.g. PyTorch's U(+-1/sqrt(H)) with ``H``
            the branch's units, is
            ``VarianceScaling(4 / 3, "fan_out", "uniform")``).
        fuse_branches: run both branches in one fused loop with a
            block-diagonal recurrent matrix (see the module docstring):
            ``True``, ``False`` or ``"auto"`` (default: on JAX).
        **kwargs: base layer arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: ``(batch, time, features)``, or with
            ``minor_input="embedding"`` the pair ``[previous_output,
            embeddings]`` (for a first layer both are the embeddings).
        initial_state: optional list of the states (see ``return_state``).
        training: draw weight-drop masks (``True``) or use the raw kernels.
        reset: optional sentence-level reset mask (batch, time), 1.0 where
            a sentence starts: both branches go back to the zero state
            before reading that step (the carried state too, at ``t = 0``),
            as in :class:`~keras_rnnlm.layers.lstm.LSTM`; the call then runs
            a per-step loop differentiated by autodiff (the branches' or,
            with fused branches, the block-diagonal one), not the fused
            loop with its hand-written backward pass.

    Example:

    >>> layer = MajorMinorLSTM(10, major_proportion=0.8,
    ...                        return_sequences=True)
    >>> x, emb = np.zeros((2, 5, 7), "float32"), np.zeros((2, 5, 3), "float32")
    >>> layer([x, emb]).shape
    (2, 5, 10)
    >>> layer.major.units, layer.minor.units
    (8, 2)
    """

    def __init__(
        self,
        units,
        major_proportion=0.9,
        minor_input="embedding",
        weight_dropout=0.0,
        seed=None,
        return_sequences=False,
        return_state=False,
        stateful=False,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        fuse_branches="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if fuse_branches not in (True, False, "auto"):
            raise ValueError(
                "fuse_branches must be True, False or 'auto', got "
                f"{fuse_branches!r}"
            )
        if not 0.0 < major_proportion <= 1.0:
            raise ValueError(
                f"major_proportion must be in (0, 1], got {major_proportion}"
            )
        if minor_input not in MINOR_INPUTS:
            raise ValueError(
                f"minor_input must be one of {MINOR_INPUTS}, got "
                f"{minor_input!r}"
            )
        major_units, minor_units = split_units(units, major_proportion)
        if major_units < 1:
            raise ValueError(
                f"major_proportion={major_proportion} of units={units} "
                "leaves no Major unit"
            )
        self.units = int(units)
        self.major_proportion = float(major_proportion)
        self.minor_input = minor_input
        self.weight_dropout = float(weight_dropout)
        self.seed = seed
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.stateful = stateful
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.unit_forget_bias = unit_forget_bias
        self.fuse_branches = fuse_branches
        self.major_units, self.minor_units = major_units, minor_units
        self.major = self._branch(major_units, seed, 0, "major")
        self.minor = None
        if minor_units:
            minor_seed = None if seed is None else seed + MINOR_SEED_OFFSET
            self.minor = self._branch(
                minor_units, minor_seed, MINOR_SEED_OFFSET, "minor"
            )

    def _branch(self, units, seed, offset, name):
        return WeightDropLSTM(
            units,
            weight_dropout=self.weight_dropout,
            seed=seed,
            return_sequences=self.return_sequences,
            return_state=True,
            stateful=self.stateful,
            kernel_initializer=_shifted(self.kernel_initializer, offset),
            recurrent_initializer=_shifted(self.recurrent_initializer, offset),
            bias_initializer=_shifted(self.bias_initializer, offset),
            unit_forget_bias=self.unit_forget_bias,
            dtype=self.dtype_policy,
            name=name,
        )

    # -- inputs ---------------------------------------------------------

    def _split(self, inputs):
        """``(major_input, minor_input)`` of a call (tensors or shapes)."""
        items = None
        if isinstance(inputs, (list, tuple)) and not _is_shape(inputs):
            items = list(inputs)
        if self.minor_input == "embedding":
            if items is None or len(items) != 2:
                raise ValueError(
                    "MajorMinorLSTM(minor_input='embedding') is called on "
                    f"[previous_output, embeddings]; got {_describe(items)}"
                )
            return items[0], items[1]
        if items is not None:
            if len(items) != 1:
                raise ValueError(
                    "MajorMinorLSTM(minor_input='previous') is called on "
                    f"one tensor; got {_describe(items)}"
                )
            inputs = items[0]
        return inputs, inputs

    def build(self, input_shape):
        major_shape, minor_shape = self._split(input_shape)
        self.major.build(tuple(major_shape))
        if self.minor is not None:
            self.minor.build(tuple(minor_shape))

    # -- state ----------------------------------------------------------

    @property
    def branches(self):
        """The branch layers, Major first."""
        return [self.major] + ([self.minor] if self.minor is not None else [])

    @property
    def states(self):
        """The carried state variables (``None`` unless stateful and
        built): ``[h_major, c_major, h_minor, c_minor]``."""
        if any(b.states is None for b in self.branches):
            return None
        return [v for b in self.branches for v in b.states]

    @property
    def state_size(self):
        return [n for b in self.branches for n in (b.units, b.units)]

    def get_initial_state(self, batch_size):
        """Zero states ``[h_major, c_major, h_minor, c_minor]``."""
        return [
            s for b in self.branches for s in b.get_initial_state(batch_size)
        ]

    def reset_state(self):
        """Zeroes the carried state of both branches."""
        for branch in self.branches:
            branch.reset_state()

    def reset_states(self):
        # Compatibility alias, as in keras.layers.RNN.
        self.reset_state()

    # -- call -----------------------------------------------------------

    def call(self, inputs, initial_state=None, training=None, reset=None):
        major_in, minor_in = self._split(inputs)
        states = [None, None]
        if initial_state is not None:
            initial_state = list(initial_state)
            if len(initial_state) != len(self.state_size):
                raise ValueError(
                    f"Expected {len(self.state_size)} initial states, got "
                    f"{len(initial_state)}"
                )
            states = [initial_state[:2], initial_state[2:]]
        if self._fused(major_in):
            out, final = self._fused_call(
                major_in, minor_in, states, training, reset
            )
            if self.return_state:
                return [out, *final]
            return out
        # the reset mask only when given: an unmasked call is unchanged
        masked = {} if reset is None else {"reset": reset}
        out, *final = self.major(
            major_in, initial_state=states[0], training=training, **masked
        )
        if self.minor is not None:
            minor_out, *minor_final = self.minor(
                minor_in, initial_state=states[1], training=training, **masked
            )
            out = ops.concatenate([out, minor_out], axis=-1)
            final += minor_final
        if self.return_state:
            return [out, *final]
        return out

    def _fused(self, inputs):
        """Whether this call runs the branches as one loop.

        Without a Minor branch there is nothing to fuse: the Major branch
        is already one fused loop. ``"auto"`` fuses on JAX only; ``True``
        raises if a branch cannot take its fast path (see
        :func:`~keras_rnnlm.loops.fused_recurrence.resolve_fast_path`).
        """
        if self.minor is None:
            return False
        mode = self.fuse_branches
        if mode == "auto":
            mode = keras.backend.backend() == "jax"
        blockers = [
            f"{b.name}: {reason}"
            for b in self.branches
            for reason in b.fast_path_blockers(None)
            + ([] if b.cell.use_bias else ["use_bias=False"])
            + ([] if b.fused is not False else ["fused=False"])
        ]
        return resolve_fast_path(mode, blockers, self, argument="fuse_branches")

    def _fused_call(self, major_in, minor_in, states, training, reset=None):
        """Both branches as one LSTM loop with a block-diagonal recurrent
        kernel; returns ``(output, [h_major, c_major, h_minor, c_minor])``
        and updates the carried state like the branch layers would. With a
        ``reset`` mask the loop is
        :func:`~keras_rnnlm.loops.recurrence.lstm_reset_recurrence`."""
        major, minor = self.major, self.minor
        ha, hi = major.units, minor.units
        carried = states[0] is None and self.stateful
        if carried and major.states is not None:
            batch = major.states[0].shape[0]
            major_in = with_static_batch(major_in, batch)
            minor_in = with_static_batch(minor_in, batch)
        pa = major.input_projection(major_in)
        pi = minor.input_projection(minor_in)
        dtype = pa.dtype
        b, t = ops.shape(pa)[0], ops.shape(pa)[1]
        # gates interleaved per branch: [i_a, i_i, f_a, f_i, c_a, c_i, o_a, o_i]
        proj = ops.concatenate(
            [
                ops.reshape(pa, (b, t, 4, ha)),
                ops.reshape(pi, (b, t, 4, hi)),
            ],
            axis=-1,
        )
        proj = ops.reshape(proj, (b, t, 4 * (ha + hi)))
        ua = ops.reshape(
            major.recurrent_kernel_tensor(training, dtype), (ha, 4, ha)
        )
        ui = ops.reshape(
            minor.recurrent_kernel_tensor(training, dtype), (hi, 4, hi)
        )
        kernel = ops.concatenate(
            [
                ops.concatenate([ua, ops.zeros((ha, 4, hi), dtype)], -1),
                ops.concatenate([ops.zeros((hi, 4, ha), dtype), ui], -1),
            ],
            axis=0,
        )
        kernel = ops.reshape(kernel, (ha + hi, 4 * (ha + hi)))
        if carried and major.states is not None:
            init = [*major.states, *minor.states]
        elif states[0] is None:
            init = self.get_initial_state(b)
        else:
            init = [*states[0], *states[1]]
        init = [state_snapshot(s, dtype) for s in init]
        h0 = ops.concatenate([init[0], init[2]], axis=-1)
        c0 = ops.concatenate([init[1], init[3]], axis=-1)
        if reset is None:
            outputs, h_t, c_t = lstm_recurrence(
                proj, h0, c0, kernel, forward_only=major.forward_only
            )
        else:
            outputs, h_t, c_t = lstm_reset_recurrence(
                proj, h0, c0, kernel, reset
            )
        final = [h_t[:, :ha], c_t[:, :ha], h_t[:, ha:], c_t[:, ha:]]
        if self.stateful and major.states is not None:
            # As keras.layers.RNN: a stateful layer keeps its final state,
            # also after a call with explicit initial states.
            for var, value in zip([*major.states, *minor.states], final):
                var.assign(ops.cast(value, var.dtype))
        return (outputs if self.return_sequences else h_t), final

    def compute_output_shape(self, input_shape):
        major_shape, _ = self._split(input_shape)
        batch, time = major_shape[0], major_shape[1]
        if self.return_sequences:
            out = (batch, time, self.units)
        else:
            out = (batch, self.units)
        if not self.return_state:
            return out
        return [out] + [(batch, n) for n in self.state_size]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "major_proportion": self.major_proportion,
                "minor_input": self.minor_input,
                "weight_dropout": self.weight_dropout,
                "seed": self.seed,
                "return_sequences": self.return_sequences,
                "return_state": self.return_state,
                "stateful": self.stateful,
                **serialized_initializers(
                    self,
                    "kernel_initializer",
                    "recurrent_initializer",
                    "bias_initializer",
                ),
                "unit_forget_bias": self.unit_forget_bias,
                "fuse_branches": self.fuse_branches,
            }
        )
        return config


def _is_shape(x):
    """Whether ``x`` is one shape (a tuple/list of ints or ``None``)."""
    return isinstance(x, (list, tuple)) and all(
        d is None or isinstance(d, int) for d in x
    )


def _describe(items):
    return "one tensor" if items is None else f"a list of {len(items)}"
