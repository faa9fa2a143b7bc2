"""The CBOW long-term context vector (arXiv:2106.08927).

Reference: *On the long-term learning ability of LSTM LMs*,
arXiv:2106.08927. Eq. (1), over the ``K + 1`` most recent words, ``w_t``
included:

    d_t = sum_{k=0..K} g(k, w_{t-k}) e_{t-k} / sum_{k=0..K} g(k, w_{t-k})

with its own embedding table ``e`` (not the LSTM's input embedding) and
one of three weightings: ``uniform`` (g = 1), ``positional`` (g =
alpha^-k, alpha = 1.05) and ``idf`` (g = IDF(w), a non-trainable weight
vector saved with the model, set with :meth:`CBOWContext.set_idf`). The
paper uses K = 100. ``d_t`` is concatenated to the current word's
embedding before the recurrent layers (the builder does that).

State and numerics
------------------

The window crosses batch boundaries: a stateful layer carries the ids of
the last ``K`` words (float32, ``-1`` for "no word yet", exact for ids
below 2**24), which :func:`~keras_rnnlm.models.state.reset_states` resets
with the recurrent state (at epoch start, before an evaluation). The layer
has the interface of a recurrent layer (``stateful``, ``return_state``,
``get_initial_state``, ``call(x, initial_state=...)``), so the scoring
graph and export carry the ids as one more state tensor.

Nothing else is carried: no floating-point running sum survives a call.
Each call gathers the ``K + T`` embeddings of its window (the ``K``
carried ids and its ``T`` tokens: a gather of ``K / T`` extra rows per
step, not ``K + 1`` per step) and computes every windowed sum

    S_t = sum_{k=0..K} beta^k g(w_{t-k}) e_{t-k},  beta = 1 or 1 / alpha

(and the normaliser, the same sum of ``g``) as a product with a constant
band matrix ``M[i, j] = beta^(i + K - j)`` on ``0 <= i + K - j <= K``:
one ``(T, K + T)`` matrix for a training window (``K + T < 2 (K + 1)``),
and for longer or dynamic-length inputs blocks of ``K + 1`` outputs,
each reading its own and the next input block through one ``(K + 1,
2 (K + 1))`` matrix, so memory stays linear in ``T``. Forward and
backward are GEMMs: on one CPU thread the module's forward and backward
take about 1 ms a training batch of 20 x 35 (binary doubling, the
shifted additions of ``log2(K + 1)`` partial sums, took 14 ms).

Why not a running sum ``S_t = beta S_{t-1} + v_t - beta^(K+1) v_{t-K-1}``
carried across batches: with ``beta = 1`` (uniform, IDF) its float32
rounding errors are never damped and add up along the stream (a random
walk, ``O(sqrt(n))`` ulps after ``n`` tokens, ``O(n)`` in the worst case:
2M tokens an epoch), so it would have to be re-normalised from the ids
anyway; with ``beta = 1 / 1.05`` the error is damped, but a scan over
the time steps of a call costs a sequential loop. Here each ``d_t`` is a
dot product of ``K + 1`` terms scaled by ``beta^j <= 1`` (and zeros): its
relative error is bounded by about ``(K + 1) eps`` of ``sum |g e|``, at
token 10 as at token 10 million (tested against a float64 NumPy
reference across batch boundaries).

An IDF of 0 (a word in every document) is allowed: a window whose weights
all vanish gives ``d_t = 0``.
"""

import keras
import numpy as np
from keras import ops

from keras_rnnlm.layers.rows import gather_rows
from keras_rnnlm.loops.state import with_static_batch

WEIGHTINGS = ("uniform", "positional", "idf")

#: The paper's settings: K = 100 preceding words, alpha = 1.05.
DEFAULT_WINDOW = 100
DEFAULT_ALPHA = 1.05


def _band_matrix(rows, cols, width, decay):
    """``M[i, j] = decay^(i + width - 1 - j)`` where ``0 <= i + width - 1
    - j < width``, else 0 (a constant, float32)."""
    lag = np.arange(rows)[:, None] + (width - 1) - np.arange(cols)[None, :]
    band = (lag >= 0) & (lag < width)
    return np.where(band, float(decay) ** np.clip(lag, 0, None), 0.0).astype(
        "float32"
    )


def _band_product(band, x, axis):
    """``band`` (i, j) applied along ``axis`` (of length j) of ``x``, as
    one 2-D MatMul between transposes (no Einsum nor BatchMatMul in an
    export: ops every TF Serving build has)."""
    rank = len(x.shape)
    perm = [axis] + [a for a in range(rank) if a != axis]
    moved = ops.transpose(x, perm)
    rest = ops.shape(moved)[1:]
    flat = ops.reshape(moved, (band.shape[1], -1))
    band = ops.convert_to_tensor(band, dtype=x.dtype)
    out = ops.reshape(ops.matmul(band, flat), (band.shape[0], *rest))
    return ops.transpose(out, [perm.index(a) for a in range(rank)])


def window_sums(values, width, decay=1.0):
    """Sums over the full windows of ``values``: ``out[:, i] =
    sum_{k=0}^{width-1} decay^k values[:, i + width - 1 - k]`` for ``i``
    in ``[0, time - width + 1)``, as banded matrix products (see the
    module docstring): ``O(width)`` multiply-adds per output and channel,
    memory linear in ``time``.

    Args:
        values: (batch, time, channels), ``time >= width`` (the time
            length may be dynamic).
        width: the window length, >= 1.
        decay: the per-step factor ``beta``.
    """
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    length = values.shape[1]
    if length is not None and length < 2 * width:
        # short and static (a training window): one band matrix
        band = _band_matrix(length - width + 1, length, width, decay)
        return _band_product(band, values, axis=1)
    # long or dynamic: blocks of ``width`` outputs, block n reading the
    # input blocks n and n + 1 (one (width, 2 width) band matrix)
    batch, channels = ops.shape(values)[0], values.shape[2]
    n_out = ops.shape(values)[1] - (width - 1)
    blocks = (n_out + width - 1) // width
    padded = ops.pad(
        values,
        [[0, 0], [0, (blocks + 1) * width - ops.shape(values)[1]], [0, 0]],
    )
    split = ops.reshape(padded, (batch, blocks + 1, width, channels))
    pairs = ops.concatenate([split[:, :-1], split[:, 1:]], axis=2)
    band = _band_matrix(width, 2 * width, width, decay)
    out = _band_product(band, pairs, axis=2)
    return ops.reshape(out, (batch, -1, channels))[:, :n_out]


class _Untracked:
    """Holds the carried-state variable out of Keras's automatic tracking
    (it is not a weight: its shape depends on the batch size); the layer
    lists it among its variables itself."""

    def __init__(self):
        self.variable = None


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class CBOWContext(keras.layers.Layer):
    """The CBOW context vector ``d_t`` (Eq. 1 of arXiv:2106.08927).

    Args:
        vocab_size: number of token types (rows of the embedding table).
        output_dim: size of the CBOW embeddings (and of ``d_t``).
        weighting: ``"uniform"``, ``"positional"`` or ``"idf"``.
        window: ``K``, the number of preceding words in the window
            (``K + 1`` words with ``w_t``); the paper's 100.
        alpha: the positional weighting's base (``g = alpha^-k``).
        embeddings_initializer: initializer of the CBOW table.
        stateful: carry the last ``K`` ids across calls (fixed batch).
        return_state: also return the new state ``(batch, K)``.

    Call arguments:
        inputs: int32 token ids (batch, time).
        initial_state: optional ``[ids]``, float32 (batch, K), ``-1``
            where there is no word yet; default: the carried state
            (stateful) or an empty window.

    Returns:
        ``d`` (batch, time, output_dim), and with ``return_state`` the
        state after the call.
    """

    def __init__(
        self,
        vocab_size,
        output_dim,
        weighting="uniform",
        window=DEFAULT_WINDOW,
        alpha=DEFAULT_ALPHA,
        embeddings_initializer="uniform",
        stateful=False,
        return_state=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if weighting not in WEIGHTINGS:
            raise ValueError(
                f"weighting must be one of {WEIGHTINGS}, got {weighting!r}"
            )
        if int(window) < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if not float(alpha) >= 1.0:
            raise ValueError(f"alpha must be >= 1, got {alpha}")
        self.vocab_size = int(vocab_size)
        self.output_dim = int(output_dim)
        self.weighting = weighting
        self.window = int(window)
        self.alpha = float(alpha)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )
        self.stateful = bool(stateful)
        self.return_state = bool(return_state)
        self._carried = _Untracked()

    @property
    def decay(self):
        """``beta``: ``1 / alpha`` for the positional weighting, else 1."""
        return 1.0 / self.alpha if self.weighting == "positional" else 1.0

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            shape=(self.vocab_size, self.output_dim),
            initializer=self.embeddings_initializer,
            name="embeddings",
        )
        if self.weighting == "idf":
            self.idf = self.add_weight(
                shape=(self.vocab_size,),
                initializer="ones",
                trainable=False,
                name="idf",
            )
        if self.stateful:
            batch = input_shape[0]
            if batch is None:
                raise ValueError(
                    "A stateful CBOWContext needs a static batch size, got "
                    f"input shape {input_shape}"
                )
            self._carried.variable = keras.Variable(
                self.get_initial_state(batch)[0],
                trainable=False,
                dtype="float32",
                name="cbow_state",
            )

    def set_idf(self, values):
        """Sets the IDF weights (one per token id; ``weighting="idf"``)."""
        if self.weighting != "idf":
            raise ValueError("set_idf needs weighting='idf'")
        if not self.built:
            raise ValueError("build the layer before setting its IDF")
        self.idf.assign(ops.convert_to_tensor(values, dtype=self.idf.dtype))

    # -- the recurrent-layer interface ------------------------------------

    @property
    def states(self):
        """The carried state ``[ids]`` (stateful and built), else None."""
        v = self._carried.variable
        return None if v is None else [v]

    @property
    def state_size(self):
        return [self.window]

    #: What the state holds, for the scoring graph and the export
    #: (:mod:`keras_rnnlm.inference_model`): token ids, not floats.
    state_kinds = ("token_ids",)

    @property
    def variables(self):
        variables = super().variables
        v = self._carried.variable
        if v is not None and all(v is not w for w in variables):
            variables = variables + [v]
        return variables

    def get_initial_state(self, batch_size):
        """The empty window: ``[-1 * ones((batch, K))]``."""
        return [ops.full((batch_size, self.window), -1.0, dtype="float32")]

    def reset_state(self):
        """Empties the carried window."""
        v = self._carried.variable
        if v is not None:
            v.assign(ops.full(v.shape, -1.0, dtype="float32"))

    def reset_states(self):
        # Compatibility alias, as in keras.layers.RNN.
        self.reset_state()

    # -- call ---------------------------------------------------------------

    def call(self, inputs, initial_state=None):
        tokens = ops.cast(inputs, "int32")
        if initial_state is not None:
            history = initial_state[0]
        elif self.stateful:
            history = self._carried.variable.value
            tokens = with_static_batch(tokens, history.shape[0])
        else:
            history = self.get_initial_state(ops.shape(tokens)[0])[0]
        history = ops.cast(history, "int32")
        ids = ops.concatenate([history, tokens], axis=1)  # (B, K + T)
        valid = ops.cast(ops.greater_equal(ids, 0), self.compute_dtype)
        safe = ops.maximum(ids, 0)
        emb = ops.cast(gather_rows(self.embeddings, safe), valid.dtype)
        weight = valid
        if self.weighting == "idf":
            weight = weight * ops.cast(ops.take(self.idf, safe), valid.dtype)
        weight = ops.expand_dims(weight, -1)
        sums = window_sums(
            ops.concatenate([emb * weight, weight], axis=-1),
            self.window + 1,
            self.decay,
        )
        total = sums[..., -1:]
        d = sums[..., :-1] / ops.maximum(total, 1e-30)
        new_state = ops.cast(ids[:, -self.window :], "float32")
        if self.stateful and initial_state is None:
            self._carried.variable.assign(new_state)
        if self.return_state:
            return [d, new_state]
        return d

    def compute_output_shape(self, input_shape):
        out = (*input_shape, self.output_dim)
        if self.return_state:
            return [out, (input_shape[0], self.window)]
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            output_dim=self.output_dim,
            weighting=self.weighting,
            window=self.window,
            alpha=self.alpha,
            embeddings_initializer=keras.initializers.serialize(
                self.embeddings_initializer
            ),
            stateful=self.stateful,
            return_state=self.return_state,
        )
        return config
