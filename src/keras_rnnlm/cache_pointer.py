"""Continuous cache pointer: Grave, Joulin & Usunier, "Improving Neural
Language Models with a Continuous Cache" (ICLR 2017, arXiv:1612.04426).

A trained model's next-token distribution is mixed with a distribution
over the words that followed the most similar recent contexts::

    p(w)       = (1 - lambda) p_vocab(w) + lambda p_cache(w)
    p_cache(w) ∝ sum over i in window with w_{i+1} = w of exp(theta h_t . h_i)

No parameter is trained: the cache is a memory of ``(key, value)`` pairs,
``key = h_i``, the hidden state at position ``i``, and ``value =
w_{i+1}``, the token that followed it, over the ``W`` (``window``)
previous positions of a stream, carried across segment boundaries.

This module is the cache's arithmetic, shared by evaluation
(:mod:`keras_rnnlm.evaluation.cache`: the cache evaluator and the search
of its settings), scoring and export: :class:`CacheConfig`, the memory
(:class:`CacheMemory`, :class:`CacheStream`), the mixed probabilities of
a segment (:func:`cache_log_probs`, :func:`cache_log_distribution`) and
the keys of a model (:func:`cache_keys`, :func:`keyed_model`).

**The keys** are the output of the last recurrent layer, the vector the
output head reads (dropout is off in evaluation), whatever the head:

* softmax / tied heads: the vector multiplied by the decoder (the tied
  embedding matrix), as in awd-lstm-lm's ``pointer.py`` (``rnn_outs[-1]``);
* MoS: the last layer's output, which the mixture's prior and latent
  projections read (not the K latent vectors);
* DOC: the last layer's output (DOC reads every layer's output; only the
  last is the key);
* Major-Minor LSTM: the last MMLSTM layer's output, the concatenation
  ``[h_major, h_minor]`` of its two branches.

**When the cache starts.** By default (``reference=False``, the natural
behaviour) the cache is used from the second token of the stream on, with
whatever history exists (fewer than ``W`` positions at the start); the
first token, with an empty history, gets the plain model's distribution.
``reference=True`` reproduces awd-lstm-lm's ``pointer.py`` exactly: its
history buffer is truncated to ``W`` entries after every segment and the
cache is used at buffer index ``> W`` only, so the plain softmax is used
for the first ``W + 1`` tokens of the stream AND for the first token of
every later segment (segments of the evaluation's ``bptt``; the reference
README evaluates with ``--bptt 5000``, so 1 token in 5000). The
reference then divides the summed NLL by the number of input tokens
(``N``), not the ``N - 1`` predicted ones; that normalisation is not
reproduced (perplexities here are per predicted token, as everywhere in
this package).

**Efficiency.** Each segment's cache scores are ONE ``(segment x (W +
segment))`` batched matrix product against the memory and the segment
itself, masked to each position's window, and reduced with a masked
log-sum-exp in log space (no loop per token). The memory holds the last
``W`` keys and values: ``W x d`` floats. Only the target's probability is
needed for perplexity; :func:`cache_log_distribution` gives the whole
distribution (``(W + segment) x vocabulary`` memory, for tests and small
vocabularies).

Presets (the paper's published settings as used by awd-lstm-lm): ``ptb``
W 500, theta 1.0, lambda 0.1; ``wt2`` W 3785, theta 0.662, lambda 0.1279.
"""

import dataclasses
import math

import keras
import numpy as np
from keras import ops

from keras_rnnlm.models.state import outer_recurrent_layers

PRESETS = {
    "ptb": {"window": 500, "theta": 1.0, "lam": 0.1},
    "wt2": {"window": 3785, "theta": 0.662, "lam": 0.1279},
}

_KEY_NAMES = {
    "window": "window",
    "w": "window",
    "theta": "theta",
    "lambda": "lam",
    "lam": "lam",
    "reference": "reference",
}


@dataclasses.dataclass(frozen=True)
class CacheConfig:
    """The cache's hyperparameters.

    Attributes:
        window: ``W``, the number of previous positions in the cache
            (0: no cache).
        theta: the inverse temperature of the cache scores.
        lam: ``lambda``, the weight of the cache distribution.
        reference: awd-lstm-lm's start (see the module docstring).
    """

    window: int
    theta: float
    lam: float
    reference: bool = False

    def __post_init__(self):
        if int(self.window) != self.window or self.window < 0:
            raise ValueError(f"window must be an int >= 0, got {self.window}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lambda must be in [0, 1], got {self.lam}")
        if not math.isfinite(self.theta):
            raise ValueError(f"theta must be finite, got {self.theta}")

    @classmethod
    def parse(cls, text):
        """``"ptb"``, ``"wt2"`` or ``"window=W,theta=T,lambda=L"``; a
        preset may be followed by overrides (``"ptb,lambda=0.2"``), and
        ``reference=1`` turns on the reference's start."""
        fields = {"reference": False}
        parts = [p.strip() for p in str(text).split(",") if p.strip()]
        if parts and "=" not in parts[0]:
            name = parts.pop(0).lower()
            if name not in PRESETS:
                raise ValueError(
                    f"Unknown cache preset {name!r}; choose from "
                    f"{sorted(PRESETS)} or give window=W,theta=T,lambda=L"
                )
            fields.update(PRESETS[name])
        for part in parts:
            key, sep, value = part.partition("=")
            key = _KEY_NAMES.get(key.strip().lower())
            if not sep or key is None:
                raise ValueError(
                    f"Bad cache setting {part!r}: expected window=W, "
                    "theta=T, lambda=L or reference=0|1"
                )
            try:
                if key == "window":
                    fields[key] = int(value)
                elif key == "reference":
                    fields[key] = value.strip().lower() in ("1", "true", "yes")
                else:
                    fields[key] = float(value)
            except ValueError:
                raise ValueError(f"Bad cache setting {part!r}") from None
        missing = {"window", "theta", "lam"} - set(fields)
        if missing:
            names = sorted("lambda" if m == "lam" else m for m in missing)
            raise ValueError(f"Cache setting {text!r} lacks {names}")
        return cls(**fields)

    def to_dict(self):
        return {
            "window": self.window,
            "theta": self.theta,
            "lambda": self.lam,
            "reference": self.reference,
        }


@dataclasses.dataclass
class CacheMemory:
    """The last ``W`` keys and values of each of ``B`` streams.

    ``keys`` ``(B, W, d)`` and ``values`` ``(B, W)`` hold the most recent
    position last; ``seen`` ``(B,)`` counts every position fed so far (the
    last ``min(seen, W)`` slots are filled).
    """

    keys: np.ndarray
    values: np.ndarray
    seen: np.ndarray

    @classmethod
    def empty(cls, batch_size, window, dim):
        return cls(
            np.zeros((batch_size, window, dim), np.float32),
            np.zeros((batch_size, window), np.int32),
            np.zeros((batch_size,), np.int64),
        )


def _masked_logsumexp(x, mask, axis=-1):
    """``log sum_{mask} exp(x)`` along ``axis``; ``-inf`` where the mask
    is empty (computed from the masked maximum: no overflow)."""
    neg = ops.full_like(x, -np.inf)
    top = ops.max(ops.where(mask, x, neg), axis=axis, keepdims=True)
    safe_top = ops.where(ops.isfinite(top), top, ops.zeros_like(top))
    total = ops.sum(
        ops.where(mask, ops.exp(x - safe_top), ops.zeros_like(x)), axis=axis
    )
    return ops.log(total) + ops.squeeze(safe_top, axis)


def _window_mask(seen, window, time, reference):
    """``(B, T, W + T)`` bool: which of the memory's ``W`` slots and the
    segment's ``T`` positions each position of the segment may attend to.

    Slot ``j`` of the concatenation holds absolute position ``seen - W +
    j``; position ``t`` of the segment (absolute ``seen + t``) sees the
    ``W`` positions before it that exist: ``max(t, W - seen) <= j < W +
    t``.
    """
    j = ops.arange(window + time)[None, None, :]
    t = ops.arange(time)[None, :, None]
    seen = ops.cast(ops.convert_to_tensor(seen), "int32")[:, None, None]
    mask = ops.logical_and(j >= ops.maximum(t, window - seen), j < window + t)
    if reference:
        # awd-lstm-lm: buffer index min(seen, W) + t must exceed W.
        active = (ops.minimum(seen, window) + t) > window
        mask = ops.logical_and(mask, active)
    return mask


def _cache_scores(hidden, memory, cache):
    """``(scores, values, mask)`` of a segment: ``theta h_t . h_j`` for
    every memory slot and segment position ``j``."""
    hidden = ops.cast(hidden, "float32")
    keys = ops.concatenate([ops.convert_to_tensor(memory.keys), hidden], 1)
    scores = cache.theta * ops.einsum("btd,bjd->btj", hidden, keys)
    mask = _window_mask(
        memory.seen, cache.window, hidden.shape[1], cache.reference
    )
    return scores, keys, mask


def _advance(memory, keys, values, window, steps):
    """The memory after ``steps`` more positions (the last ``W`` of the
    concatenated keys and values)."""
    keys = ops.convert_to_numpy(keys)
    total = keys.shape[1]
    return CacheMemory(
        np.asarray(keys[:, total - window :], np.float32),
        np.asarray(values[:, total - window :], np.int32),
        memory.seen + steps,
    )


def cache_log_probs(hidden, targets, vocab_log_probs, memory, cache):
    """ln p(target) under the cache-mixed model, for one segment.

    Args:
        hidden: ``(B, T, d)`` keys of the segment's positions (the last
            recurrent layer's outputs).
        targets: ``(B, T)`` int: the token following each position (the
            value stored with it).
        vocab_log_probs: ``(B, T)``: ln p_vocab(target) of the model.
        memory: the :class:`CacheMemory` before the segment.
        cache: a :class:`CacheConfig`.

    Returns:
        ``(log_probs, cache_log_probs, memory)``: the mixture's ln p of
        each target ``(B, T)`` float32 NumPy, ln p_cache(target) (``-inf``
        where the target is not in the window or the window is empty, as
        used), and the memory after the segment.
    """
    targets = np.asarray(targets, np.int32)
    if cache.window == 0:
        vocab_lp = np.asarray(vocab_log_probs, np.float32)
        steps = targets.shape[1]
        memory = CacheMemory(memory.keys, memory.values, memory.seen + steps)
        none = np.full(targets.shape, -np.inf, np.float32)
        return vocab_lp, none, memory
    hidden = np.asarray(hidden, np.float32)
    values = np.concatenate([memory.values, targets], 1)
    log_probs, cache_lp = _compiled(cache)(
        hidden,
        memory.keys,
        values,
        targets,
        np.asarray(vocab_log_probs, np.float32),
        memory.seen.astype(np.int32),
    )
    keys = np.concatenate([memory.keys, hidden], 1)
    memory = _advance(memory, keys, values, cache.window, targets.shape[1])
    return (
        ops.convert_to_numpy(log_probs),
        ops.convert_to_numpy(cache_lp),
        memory,
    )


def _segment_math(hidden, memory_keys, values, targets, vocab_lp, seen, cache):
    """The tensors of :func:`cache_log_probs`: ``(log_probs,
    cache_log_probs)`` of one segment."""
    hidden = ops.cast(hidden, "float32")
    keys = ops.concatenate([ops.cast(memory_keys, "float32"), hidden], 1)
    scores = cache.theta * ops.einsum("btd,bjd->btj", hidden, keys)
    mask = _window_mask(seen, cache.window, hidden.shape[1], cache.reference)
    match = ops.logical_and(
        mask,
        ops.equal(ops.expand_dims(values, 1), ops.expand_dims(targets, 2)),
    )
    cache_lp = _masked_logsumexp(scores, match) - _masked_logsumexp(
        scores, mask
    )
    used = ops.any(mask, axis=-1)
    cache_lp = ops.where(used, cache_lp, ops.full_like(cache_lp, -np.inf))
    log_probs = mix_log_probs(vocab_lp, cache_lp, cache.lam, used)
    return log_probs, cache_lp


_COMPILED = {}


def _compiled(cache):
    """:func:`_segment_math` for one :class:`CacheConfig`, compiled
    (``tf.function`` / ``jax.jit``; eager on other backends)."""
    fn = _COMPILED.get(cache)
    if fn is not None:
        return fn

    def fn(hidden, memory_keys, values, targets, vocab_lp, seen):
        return _segment_math(
            hidden, memory_keys, values, targets, vocab_lp, seen, cache
        )

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # TensorFlow backend only

        fn = tf.function(fn, autograph=False)
    elif backend == "jax":
        import jax  # JAX backend only

        fn = jax.jit(fn)
    if len(_COMPILED) >= 64:
        _COMPILED.clear()
    _COMPILED[cache] = fn
    return fn


def mix_log_probs(vocab_lp, cache_lp, lam, used=None):
    """``ln((1 - lam) exp(vocab_lp) + lam exp(cache_lp))``, and
    ``vocab_lp`` where ``used`` is False (no cache at that position)."""
    vocab_lp = ops.convert_to_tensor(vocab_lp)
    cache_lp = ops.convert_to_tensor(cache_lp)
    if lam <= 0.0:
        return vocab_lp
    a = vocab_lp + (math.log1p(-lam) if lam < 1.0 else -np.inf)
    b = cache_lp + math.log(lam)
    top = ops.maximum(a, b)
    safe = ops.where(ops.isfinite(top), top, ops.zeros_like(top))
    mixed = safe + ops.log(ops.exp(a - safe) + ops.exp(b - safe))
    if used is not None:
        mixed = ops.where(used, mixed, vocab_lp)
    return mixed


def cache_log_distribution(hidden, logits, targets, memory, cache):
    """The whole mixed distribution of a segment: ``(B, T, V)`` ln p.

    ``targets`` are the values stored with the segment's positions (they
    enter the memory of the later positions). Builds a ``(W + T) x V``
    one-hot matrix: for tests and small vocabularies, not for
    evaluation.
    """
    logits = ops.cast(ops.convert_to_tensor(logits), "float32")
    vocab = ops.log_softmax(logits, axis=-1)
    if cache.window == 0 or cache.lam == 0.0:
        return ops.convert_to_numpy(vocab)
    scores, _, mask = _cache_scores(hidden, memory, cache)
    values = np.concatenate([memory.values, np.asarray(targets, np.int32)], 1)
    norm = _masked_logsumexp(scores, mask)
    used = ops.any(mask, axis=-1)
    safe = ops.where(used, norm, ops.zeros_like(norm))
    attn = ops.where(mask, ops.exp(scores - safe[..., None]), 0.0)
    onehot = ops.one_hot(values, logits.shape[-1])
    cache_p = ops.einsum("btj,bjv->btv", attn, onehot)
    mixed = mix_log_probs(
        vocab, ops.log(cache_p), cache.lam, ops.expand_dims(used, -1)
    )
    return ops.convert_to_numpy(mixed)


class CacheStream:
    """The cache of ``batch_size`` streams, fed a segment at a time.

    >>> stream = CacheStream(CacheConfig(500, 1.0, 0.1), dim=400)
    >>> lp = stream.log_probs(h, targets, vocab_lp)  # (1, T) each call
    """

    def __init__(self, cache, dim, batch_size=1):
        self.cache = cache
        self.dim = int(dim)
        self.batch_size = int(batch_size)
        self.reset()

    def reset(self):
        self.memory = CacheMemory.empty(
            self.batch_size, self.cache.window, self.dim
        )

    def log_probs(self, hidden, targets, vocab_log_probs):
        """ln p(target) of the next segment ``(B, T)``; the memory
        advances by ``T`` positions."""
        lp, _, self.memory = cache_log_probs(
            hidden, targets, vocab_log_probs, self.memory, self.cache
        )
        return lp


def cache_keys(model):
    """The cache keys of a functional ``model``: the output tensor of its
    last (outer) recurrent layer, ``(batch, time, d)`` (see the module
    docstring)."""
    layers = outer_recurrent_layers(model)
    if not layers:
        raise ValueError(f"Model {model.name!r} has no recurrent layer")
    keys = layers[-1].output
    if isinstance(keys, (list, tuple)):
        keys = keys[0]
    return keys


def keyed_model(model):
    """A model with ``model``'s layers and weights (and state) returning
    ``[logits, keys]``: the logits and the cache keys
    (:func:`cache_keys`)."""
    keys = cache_keys(model)
    # model.input keeps the inputs' structure (a dict with a reset mask)
    return keras.Model(model.input, [model.outputs[0], keys])
