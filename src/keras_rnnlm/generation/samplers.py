"""Samplers: how the next token is chosen from a distribution.

Named and parametrised as keras-hub's (``keras_hub.samplers``):

* :class:`GreedySampler`: the most probable token;
* :class:`RandomSampler` ``(temperature=1.0)``: a draw from
  ``softmax(log p / temperature)``;
* :class:`TopKSampler` ``(k=5, temperature=1.0)``: a draw among the ``k``
  most probable tokens;
* :class:`TopPSampler` ``(p=0.1, k=None, temperature=1.0)``: a draw among
  the smallest set of most probable tokens whose probability (after the
  temperature) reaches ``p`` (nucleus sampling; ``k`` first keeps the
  ``k`` most probable only).

:func:`get_sampler` takes a sampler, its string identifier (``"greedy"``,
``"random"``, ``"top_k"``, ``"top_p"``) or its config; ``get_config`` /
``from_config`` round-trip.

**One sampling function.** A sampler is called as ``sampler(log_probs,
seed, step)`` on a ``(batch, vocab)`` tensor of log-probabilities and
returns the ``(batch,)`` int32 token ids. Every path that generates (the
compiled loop of a run directory, and the export's graph) calls it. It
uses ``keras.ops`` only, so it traces into a ``tf.function`` whose ops a
stock TF Serving runs, or a ``jax.jit``.
A sampler's parameters (``temperature``, ``k``, ``p``) may be traced
scalar tensors: the export's ``generate`` signature builds its samplers
from its inputs, which its graph checks (a tensor is not checked here).

**Randomness** is the Gumbel-max trick on stateless noise keyed by
``(seed, step)``: a draw is ``argmax(log p / T + g)`` with ``g =
-log(-log u)`` and ``u`` uniform (:func:`stateless_uniform`), which is a
draw from ``softmax(log p / T)``; the top-k and top-p samplers take the
argmax over their candidate set only. The noise of row ``r`` at step
``t`` depends on ``(seed, t, r)`` alone (not on the batch's other rows or
size), so the same seed gives the same tokens on every path.

The noise is a counter-based hash written in ``keras.ops`` integer
arithmetic (:func:`stateless_uniform`), not a backend's random op:
integer operations give the same bits everywhere, so the same seed gives
the same noise on TensorFlow's kernels, inside an XLA program (whose
Philox does not give the bits of TensorFlow's own kernel for the same
key) and on JAX, and a run directory, its export and the other backend
sample the same tokens (the log-probabilities they perturb agree to
round-off).
"""

import numbers

import numpy as np
from keras import ops

from keras_rnnlm.generation.errors import GenerationError

#: Seeds are integers in ``[0, MAX_SEED]`` (the int32 key of TensorFlow's
#: stateless random ops).
MAX_SEED = 2**31 - 1


def check_seed(seed):
    """``seed`` as an int in ``[0, MAX_SEED]``; a
    :class:`GenerationError` otherwise."""
    if (
        isinstance(seed, bool)
        or not isinstance(seed, numbers.Integral)
        or not 0 <= int(seed) <= MAX_SEED
    ):
        raise GenerationError(
            "seed", f"must be an integer in [0, {MAX_SEED}], got {seed!r}"
        )
    return int(seed)


#: murmur3's 32-bit finaliser's multipliers (:func:`_mix32`).
_MIX = (0x85EBCA6B, 0xC2B2AE35)
#: Constants that set the seed and the step apart in the key (the golden
#: ratio's and a hash multiplier's bits).
_SEED_SALT = 0x9E3779B9
_STEP_SCALE = 0x7FEB352D


def _uint32(value):
    return ops.convert_to_tensor(np.uint32(value), "uint32")


def _mix32(x):
    """murmur3's 32-bit finaliser: every input bit flips about half of
    the output bits (uint32, wrapping arithmetic)."""
    x = ops.bitwise_xor(x, ops.right_shift(x, _uint32(16)))
    x = ops.multiply(x, _uint32(_MIX[0]))
    x = ops.bitwise_xor(x, ops.right_shift(x, _uint32(13)))
    x = ops.multiply(x, _uint32(_MIX[1]))
    return ops.bitwise_xor(x, ops.right_shift(x, _uint32(16)))


def stateless_uniform(shape, seed, step):
    """Uniform float32 noise in ``(0, 1)`` of ``(batch, n)`` ``shape``, a
    function of ``(seed, step)`` only (either may be a traced int32
    scalar): entry ``(r, j)`` is the top 24 bits of a hash of the counter
    ``r * n + j`` under a key made from the seed and the step (two rounds
    of :func:`_mix32`), centred in its ``2**-24`` cell. Row ``r`` is the
    same for every ``batch > r``; the bits are the same on every backend,
    compiled or not."""
    batch, n = shape[0], shape[1]
    rows = ops.cast(ops.arange(batch, dtype="int32"), "uint32")
    cols = ops.cast(ops.arange(n, dtype="int32"), "uint32")
    counter = ops.add(
        ops.multiply(ops.expand_dims(rows, 1), ops.cast(n, "uint32")),
        ops.expand_dims(cols, 0),
    )
    salted = ops.bitwise_xor(ops.cast(seed, "uint32"), _uint32(_SEED_SALT))
    stepped = ops.multiply(ops.cast(step, "uint32"), _uint32(_STEP_SCALE))
    key = _mix32(ops.add(_mix32(salted), stepped))
    bits = _mix32(ops.add(_mix32(ops.bitwise_xor(counter, key)), key))
    top = ops.cast(ops.right_shift(bits, _uint32(8)), "float32")
    return (top + 0.5) * (2.0**-24)


def gumbel_noise(shape, seed, step):
    """Standard Gumbel noise ``-log(-log u)`` (see
    :func:`stateless_uniform`)."""
    return -ops.log(-ops.log(stateless_uniform(shape, seed, step)))


def _traced(value):
    """Whether ``value`` is a tensor (a traced parameter, checked by the
    graph that feeds it)."""
    return ops.is_tensor(value)


def _check_positive(name, value):
    if _traced(value):
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not value > 0
        or value == float("inf")
    ):
        raise GenerationError(
            name, f"must be a finite number > 0, got {value!r}"
        )
    return float(value)


def _check_k(k):
    if _traced(k):
        return k
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise GenerationError("k", f"must be an integer >= 1, got {k!r}")
    return int(k)


def _check_p(p):
    if _traced(p):
        return p
    if (
        isinstance(p, bool)
        or not isinstance(p, numbers.Real)
        or not 0.0 < p <= 1.0
    ):
        raise GenerationError("p", f"must be in (0, 1], got {p!r}")
    return float(p)


class Sampler:
    """Chooses the next token of each row of a batch.

    Subclasses implement :meth:`choose`; ``sampler(log_probs, seed,
    step)`` is the one sampling function (see the module docstring).

    Args:
        temperature: the draw is from ``softmax(log p / temperature)``
            (> 0; below 1 sharper, above 1 flatter).
    """

    #: Whether the sampler draws (the greedy one does not).
    random = True

    def __init__(self, temperature=1.0):
        self.temperature = _check_positive("temperature", temperature)

    def check_vocabulary(self, vocab_size):
        """Raises :class:`GenerationError` if the sampler cannot run on a
        vocabulary of ``vocab_size`` tokens (a ``k`` above it)."""

    def __call__(self, log_probs, seed, step):
        """``(batch,)`` int32 token ids drawn from ``log_probs`` ``(batch,
        vocab)`` with the noise of ``(seed, step)``."""
        log_probs = ops.cast(log_probs, "float32")
        noise = None
        if self.random:
            noise = gumbel_noise(ops.shape(log_probs), seed, step)
        return ops.cast(self.choose(self._tempered(log_probs), noise), "int32")

    def _tempered(self, log_probs):
        # (log p - max) / T: the best token at 0 whatever T (no overflow
        # of log p / T for a tiny T).
        top = ops.max(log_probs, axis=-1, keepdims=True)
        return (log_probs - top) / self.temperature

    def choose(self, scores, noise):
        """The token ids from the tempered log-probabilities ``scores``
        and Gumbel ``noise`` (both ``(batch, vocab)``; ``noise`` is
        ``None`` for a sampler that does not draw)."""
        raise NotImplementedError

    def get_config(self):
        return {"temperature": self.temperature}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and (
            self.get_config() == other.get_config()
        )

    def __hash__(self):
        return hash((type(self).__name__, tuple(self.get_config().items())))


class GreedySampler(Sampler):
    """The most probable token (no randomness, no temperature).

    >>> GreedySampler()(log_probs, seed=0, step=0)  # doctest: +SKIP
    """

    random = False

    def __init__(self):
        super().__init__(1.0)

    def choose(self, scores, noise):
        return ops.argmax(scores, axis=-1)

    def get_config(self):
        return {}


class RandomSampler(Sampler):
    """A draw from the whole distribution, ``softmax(log p /
    temperature)``."""

    def choose(self, scores, noise):
        return ops.argmax(scores + noise, axis=-1)


def _among(values, ids, noise):
    """The Gumbel-max draw among candidates: ``values`` ``(batch, n)``
    (``-inf``: not a candidate) of the token ids ``ids``, each with the
    noise of its token id."""
    g = ops.take_along_axis(noise, ids, axis=-1)
    best = ops.argmax(values + g, axis=-1)
    return ops.take_along_axis(ids, ops.expand_dims(best, -1), axis=-1)[:, 0]


class TopKSampler(Sampler):
    """A draw among the ``k`` most probable tokens (their probabilities
    renormalised, after the temperature).

    Args:
        k: the number of candidates (1 <= k <= the vocabulary size).
        temperature: see :class:`Sampler`.
    """

    def __init__(self, k=5, temperature=1.0):
        super().__init__(temperature)
        self.k = _check_k(k)

    def check_vocabulary(self, vocab_size):
        if self.k > vocab_size:
            raise GenerationError(
                "k",
                f"must be at most the vocabulary size {vocab_size}, got "
                f"{self.k}",
            )

    def choose(self, scores, noise):
        values, ids = ops.top_k(scores, self.k)
        return _among(values, ops.cast(ids, "int32"), noise)

    def get_config(self):
        return {"k": self.k, "temperature": self.temperature}


class TopPSampler(Sampler):
    """Nucleus sampling: a draw among the most probable tokens whose
    probabilities (after the temperature) add up to ``p``: sorted by
    probability, a token is a candidate while the mass before it is below
    ``p`` (the most probable always is).

    Args:
        p: the probability mass kept, in ``(0, 1]``.
        k: if set, only the ``k`` most probable tokens are considered
            (faster on a large vocabulary: a top-k instead of a sort).
        temperature: see :class:`Sampler`.
    """

    def __init__(self, p=0.1, k=None, temperature=1.0):
        super().__init__(temperature)
        self.p = _check_p(p)
        self.k = None if k is None else _check_k(k)

    def check_vocabulary(self, vocab_size):
        if self.k is not None and self.k > vocab_size:
            raise GenerationError(
                "k",
                f"must be at most the vocabulary size {vocab_size}, got "
                f"{self.k}",
            )

    def choose(self, scores, noise):
        k = ops.shape(scores)[-1] if self.k is None else self.k
        values, ids = ops.top_k(scores, k)
        # the probabilities of the whole tempered distribution
        norm = ops.logsumexp(scores, axis=-1, keepdims=True)
        probs = ops.exp(values - norm)
        before = ops.cumsum(probs, axis=-1) - probs
        keep = before < self.p
        values = ops.where(keep, values, ops.full_like(values, -float("inf")))
        return _among(values, ops.cast(ids, "int32"), noise)

    def get_config(self):
        return {"p": self.p, "k": self.k, "temperature": self.temperature}


#: The string identifiers of :func:`get_sampler`.
SAMPLERS = {
    "greedy": GreedySampler,
    "random": RandomSampler,
    "top_k": TopKSampler,
    "top_p": TopPSampler,
}
_BY_CLASS_NAME = {cls.__name__: cls for cls in SAMPLERS.values()}


def get_sampler(identifier="greedy", **kwargs):
    """A :class:`Sampler` from ``identifier``: a sampler (returned as is),
    a string identifier (``"greedy"``, ``"random"``, ``"top_k"``,
    ``"top_p"``; ``kwargs`` are its arguments), or a config
    ``{"class_name": "top_k" | "TopKSampler", "config": {...}}``.

    >>> get_sampler("top_p", p=0.9, temperature=0.7)
    TopPSampler(p=0.9, k=None, temperature=0.7)
    """
    if isinstance(identifier, Sampler):
        if kwargs:
            raise GenerationError(
                "sampler", "takes no arguments when it is a Sampler object"
            )
        return identifier
    if isinstance(identifier, dict):
        name = identifier.get("class_name")
        config = {**identifier.get("config", {}), **kwargs}
    else:
        name, config = identifier, kwargs
    cls = SAMPLERS.get(name) if isinstance(name, str) else None
    if cls is None and isinstance(name, str):
        cls = _BY_CLASS_NAME.get(name)
    if cls is None:
        raise GenerationError(
            "sampler",
            f"{name!r} is unknown; choose from {sorted(SAMPLERS)}",
        )
    try:
        return cls.from_config(config)
    except TypeError as e:
        raise GenerationError("sampler", f"{cls.__name__}: {e}") from None
