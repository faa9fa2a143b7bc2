"""Continuous cache pointer: Grave, Joulin & Usunier, "Improving Neural
Language Models with a Continuous Cache" (ICLR 2017, arXiv:1612.04426).

A trained model's next-token distribution is mixed with a distribution
over the words that followed the most similar recent contexts::

    p(w)       = (1 - lambda) p_vocab(w) + lambda p_cache(w)
    p_cache(w) ∝ sum over i in window with w_{i+1} = w of exp(theta h_t . h_i)

No parameter is trained: the cache is a memory of ``(key, value)`` pairs,
``key = h_i``, the hidden state at position ``i``, and ``value =
w_{i+1}``, the token that followed it, over the ``W`` (``window``)
previous positions of ONE stream (batch 1), carried across segment
boundaries.

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

**Efficiency.** Hidden states are computed a segment at a time by the
stateful batch-1 model; each segment's cache scores are ONE ``(segment x
(W + segment))`` batched matrix product against the memory and the
segment itself, masked to each position's window, and reduced with a
masked log-sum-exp in log space (no loop per token). The memory holds the
last ``W`` keys and values: ``W x d`` floats. Only the target's
probability is needed for perplexity; :func:`cache_log_distribution`
gives the whole distribution (``(W + segment) x vocabulary`` memory, for
tests and small vocabularies).

**Sentence-level models** (``data.state_reset = "sentence"``, see
:mod:`keras_rnnlm.data.sentences`): the model is fed the reset mask of
the stream, as the static :class:`~keras_rnnlm.evaluator.Evaluator`
feeds it, so the recurrent state starts again at every sentence (the
CBOW context, if any, is not reset); the cache is NOT reset: its memory
spans the sentences, like the CBOW context. With ``W = 0`` or ``lambda
= 0`` the result is the Evaluator's at batch 1.

Presets (the paper's published settings as used by awd-lstm-lm): ``ptb``
W 500, theta 1.0, lambda 0.1; ``wt2`` W 3785, theta 0.662, lambda 0.1279.
"""

import csv
import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
from keras import ops

from keras_rnnlm.evaluator import safe_exp
from keras_rnnlm.loops.recurrence import set_forward_only
from keras_rnnlm.metrics import token_nll
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import outer_recurrent_layers
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import load_weights_file
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import open_run
from keras_rnnlm.runs import run_sentence_starts
from keras_rnnlm.runs import run_weights

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


def target_log_probs(logits, targets):
    """ln p_vocab(target) ``(B, T)`` from logits ``(B, T, V)``."""
    return -token_nll(ops.convert_to_tensor(targets, "int32"), logits)


def keyed_model(model):
    """A model with ``model``'s layers and weights (and state) returning
    ``[logits, keys]``: the logits and the last recurrent layer's output
    (the cache keys, see the module docstring)."""
    layers = outer_recurrent_layers(model)
    if not layers:
        raise ValueError(f"Model {model.name!r} has no recurrent layer")
    keys = layers[-1].output
    if isinstance(keys, (list, tuple)):
        keys = keys[0]
    # model.input keeps the inputs' structure (a dict with a reset mask)
    return keras.Model(model.input, [model.outputs[0], keys])


def _log_softmax_at(logits, targets):
    """ln softmax(logits)[target] in float64 (NumPy), ``(B, T)``."""
    logits = np.asarray(logits, np.float64)
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return picked - lse


def _segments(ids, bptt, starts=None):
    """``(inputs, targets, reset)`` of a batch-1 stream in windows of
    ``bptt``; ``reset`` ``(1, T)`` float32 is 1.0 at the inputs where a
    sentence starts (``starts``, a bool array over ``ids``; the stream's
    first input never resets, as in
    :class:`~keras_rnnlm.data.sentences.SentenceResetSequence`), ``None``
    without ``starts``."""
    ids = np.asarray(ids, np.int32)
    if starts is not None:
        starts = np.asarray(starts, bool)
        if starts.shape != ids.shape:
            raise ValueError(
                f"starts has shape {starts.shape}, ids {ids.shape}"
            )
        starts = starts.astype(np.float32)
        starts[:1] = 0.0
    for start in range(0, len(ids) - 1, bptt):
        stop = min(start + bptt, len(ids) - 1)
        reset = None if starts is None else starts[None, start:stop]
        yield ids[start:stop][None], ids[start + 1 : stop + 1][None], reset


@dataclasses.dataclass
class KeyedSplit:
    """What the cache needs of a split, from one pass of the model:
    ``keys`` ``(N, d)``, ``targets`` ``(N,)`` and ``vocab_log_probs``
    ``(N,)`` of its ``N`` predicted positions, and the segment length."""

    keys: np.ndarray
    targets: np.ndarray
    vocab_log_probs: np.ndarray
    bptt: int

    def segments(self):
        for start in range(0, len(self.targets), self.bptt):
            stop = start + self.bptt
            yield (
                self.keys[None, start:stop],
                self.targets[None, start:stop],
                self.vocab_log_probs[None, start:stop],
            )


def _summary(log_probs, char_level, extra=None):
    log_probs = np.asarray(log_probs, np.float64)
    nll = float(-log_probs.mean()) if len(log_probs) else float("nan")
    result = {
        "nll": nll,
        "ppl": safe_exp(nll),
        "tokens": int(len(log_probs)),
    }
    if char_level:
        result["bpc"] = nll / math.log(2.0)
    result.update(extra or {})
    return result


class CacheEvaluator:
    """Perplexity of a run's model with a continuous cache (one stream,
    batch 1, segments of ``bptt`` tokens, the recurrent state and the
    cache carried from segment to segment).

    Args:
        model_config: the run's :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: vocabulary size.
        bptt: segment length (what the reference calls ``--bptt``).
        char_level: also report bits per character.
        sentence_starts: a sentence-level model (``data.state_reset =
            "sentence"``): ``starts(ids)``, where the sentences of a
            split start (as the
            :class:`~keras_rnnlm.evaluator.Evaluator`'s); the model reads
            the reset mask and its recurrent state starts again there.
            The cache's memory is carried across sentences.
    """

    def __init__(
        self,
        model_config,
        vocab_size,
        bptt,
        char_level=False,
        sentence_starts=None,
    ):
        if int(bptt) < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        self.model_config = model_config
        self.vocab_size = int(vocab_size)
        self.bptt = int(bptt)
        self.char_level = bool(char_level)
        self.sentence_starts = sentence_starts
        self.model = build_language_model(
            model_config,
            vocab_size,
            1,
            name="rnnlm_cache_eval",
            reset_input=sentence_starts is not None,
        )
        set_forward_only(self.model)
        self.keyed = keyed_model(self.model)
        self.dim = int(self.keyed.outputs[1].shape[-1])

    def load_weights(self, path):
        """Loads a ``.weights.h5`` of the run's model (any batch size)."""
        load_weights_file(self.model, self.model_config, self.vocab_size, path)

    def _forward(self, x, y, reset=None):
        """Keys and ln p_vocab(target) of a segment (``reset``: its reset
        mask, sentence-level models); a short last segment is padded to
        ``bptt`` (one traced shape; the state after it is not used)."""
        n = x.shape[1]
        if n < self.bptt:
            pad = ((0, 0), (0, self.bptt - n))
            x = np.pad(x, pad)
            reset = None if reset is None else np.pad(reset, pad)
        if reset is not None:
            x = {"tokens": x, "reset": reset}
        logits, keys = self.keyed.predict_on_batch(x)
        logits, keys = logits[:, :n], np.asarray(keys[:, :n], np.float32)
        return keys, _log_softmax_at(logits, y)

    def _keyed_segments(self, ids, max_tokens=None):
        """``(keys, targets, ln p_vocab(target))`` of each segment of one
        stream over ``ids`` (its first ``max_tokens`` predictions), the
        state carried from the zero state."""
        ids = np.asarray(ids)
        if max_tokens is not None:
            ids = ids[: int(max_tokens) + 1]
        starts = None
        if self.sentence_starts is not None:
            starts = self.sentence_starts(ids)
        reset_states(self.model)
        for x, y, reset in _segments(ids, self.bptt, starts):
            keys, vocab_lp = self._forward(x, y, reset)
            yield keys, y, vocab_lp
        reset_states(self.model)

    def evaluate(self, ids, cache, max_tokens=None):
        """Streams ``ids`` through the model and the cache (memory ``W x
        d``). Returns ``{"nll", "ppl", "tokens", "seconds",
        "tokens_per_s", "cache"(, "bpc")}``."""
        stream = CacheStream(cache, self.dim)
        start = time.perf_counter()
        out = [
            stream.log_probs(keys, y, vocab_lp)[0]
            for keys, y, vocab_lp in self._keyed_segments(ids, max_tokens)
        ]
        seconds = time.perf_counter() - start
        lp = np.concatenate(out) if out else np.zeros(0)
        n = len(lp)
        return _summary(
            lp,
            self.char_level,
            {
                "seconds": seconds,
                "tokens_per_s": n / seconds if seconds > 0 else float("inf"),
                "bptt": self.bptt,
                "cache": cache.to_dict(),
            },
        )

    def keyed_split(self, ids, max_tokens=None):
        """One pass of the model over ``ids``: a :class:`KeyedSplit`
        (``N x d`` keys: for searching cache settings without rerunning
        the model)."""
        keys, targets, lps = [], [], []
        for k, y, lp in self._keyed_segments(ids, max_tokens):
            keys.append(k[0])
            targets.append(y[0])
            lps.append(lp[0])
        return KeyedSplit(
            np.concatenate(keys),
            np.concatenate(targets).astype(np.int32),
            np.concatenate(lps),
            self.bptt,
        )


def cache_log_probs_of(keyed, cache):
    """ln p(target) of every position of a :class:`KeyedSplit` with the
    cache (the model's segments, the memory carried)."""
    stream = CacheStream(cache, keyed.keys.shape[1])
    out = [stream.log_probs(k, y, lp)[0] for k, y, lp in keyed.segments()]
    return np.concatenate(out) if out else np.zeros(0)


def search_cache(keyed, windows, thetas, lambdas, reference=False):
    """Perplexity of every ``(window, theta, lambda)`` on a
    :class:`KeyedSplit`: one cache pass per ``(window, theta)``, every
    lambda mixed from its ln p_cache. Returns a list of rows
    ``{"window", "theta", "lambda", "nll", "ppl"}``."""
    rows = []
    vocab = np.asarray(keyed.vocab_log_probs, np.float64)
    for window in windows:
        for theta in thetas:
            base = CacheConfig(int(window), float(theta), 0.0, reference)
            stream = CacheStream(base, keyed.keys.shape[1])
            cache_lp = []
            for k, y, lp in keyed.segments():
                _, c, stream.memory = cache_log_probs(
                    k, y, lp, stream.memory, base
                )
                cache_lp.append(c[0])
            cache_lp = np.concatenate(cache_lp).astype(np.float64)
            used = _used_positions(len(cache_lp), base, keyed.bptt)
            for lam in lambdas:
                lp = ops.convert_to_numpy(
                    mix_log_probs(vocab, cache_lp, float(lam), used)
                )
                nll = float(-np.mean(lp))
                rows.append(
                    {
                        "window": int(window),
                        "theta": float(theta),
                        "lambda": float(lam),
                        "nll": nll,
                        "ppl": math.exp(nll) if nll < 709 else float("inf"),
                    }
                )
    return rows


def _used_positions(n, cache, bptt):
    """Which of ``n`` stream positions use the cache (NumPy bool)."""
    a = np.arange(n)
    if cache.window == 0:
        return np.zeros(n, bool)
    if cache.reference:
        return (a > cache.window) & (a % bptt != 0)
    return a > 0


#: Default search grid of ``tune-cache`` (theta x lambda, per window).
DEFAULT_WINDOWS = (100, 500, 2000)
DEFAULT_THETAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DEFAULT_LAMBDAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)


def _run_evaluator(run_dir, bptt=None, weights=None):
    config, corpus = open_run(run_dir)
    d = config.data
    starts = run_sentence_starts(config, corpus)
    ev = CacheEvaluator(
        config.model,
        len(corpus.vocab),
        bptt or d.eval_bptt or d.bptt,
        char_level=corpus.is_char_level,
        sentence_starts=starts,
    )
    weights = run_weights(run_dir, weights)
    ev.load_weights(weights)
    return ev, corpus, weights


def cache_evaluate_run(
    run_dir, cache, split="test", bptt=None, weights=None, max_tokens=None
):
    """Perplexity of a run's best (or given) weights with ``cache`` on
    ``split`` (batch 1; the cache's memory carried across segments of
    ``bptt``, default the run's evaluation window). The plain model is
    ``window=0``."""
    ev, corpus, weights = _run_evaluator(run_dir, bptt, weights)
    result = ev.evaluate(corpus.split(split), cache, max_tokens=max_tokens)
    return {"split": split, "weights": weights, **result}


def tune_cache_run(
    run_dir,
    out=None,
    windows=DEFAULT_WINDOWS,
    thetas=DEFAULT_THETAS,
    lambdas=DEFAULT_LAMBDAS,
    reference=False,
    bptt=None,
    weights=None,
    max_tokens=None,
    test=True,
):
    """Grid search of the cache on the validation split, then test.

    The model runs once over valid (its keys kept: ``N x d`` floats);
    every ``(window, theta)`` is one cache pass and every lambda a mix of
    its ln p_cache. Writes ``cache_search.json`` (every row, the best
    setting, plain and cached valid/test perplexities),
    ``cache_search.csv`` and ``cache_search.png`` (valid perplexity over
    theta x lambda at each window) under ``out`` (default
    ``RUN_DIR/cache``).
    """
    ev, corpus, weights = _run_evaluator(run_dir, bptt, weights)
    keyed = ev.keyed_split(corpus.valid, max_tokens=max_tokens)
    rows = search_cache(keyed, windows, thetas, lambdas, reference)
    best = min(rows, key=lambda r: r["nll"])
    cache = CacheConfig(
        best["window"], best["theta"], best["lambda"], reference
    )
    result = {
        "weights": weights,
        "bptt": ev.bptt,
        "reference": bool(reference),
        "grid": {
            "windows": [int(w) for w in windows],
            "thetas": [float(t) for t in thetas],
            "lambdas": [float(x) for x in lambdas],
        },
        "best": cache.to_dict(),
        "valid": {
            "plain": _summary(keyed.vocab_log_probs, ev.char_level),
            "cache": {k: best[k] for k in ("nll", "ppl")},
        },
        "rows": rows,
    }
    result["valid"]["cache"]["tokens"] = len(keyed.targets)
    if test:
        ids = corpus.test
        result["test"] = {
            "plain": ev.evaluate(ids, CacheConfig(0, 0.0, 0.0), max_tokens),
            "cache": ev.evaluate(ids, cache, max_tokens),
        }
    out = out or os.path.join(run_dir, "cache")
    os.makedirs(out, exist_ok=True)
    paths = {
        "json": os.path.join(out, "cache_search.json"),
        "csv": os.path.join(out, "cache_search.csv"),
        "png": os.path.join(out, "cache_search.png"),
    }
    atomic_write_text(paths["json"], json.dumps(result, indent=2))
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(
            f, fieldnames=["window", "theta", "lambda", "nll", "ppl"]
        )
        writer.writeheader()
        writer.writerows(rows)
    plot_search(rows, paths["png"])
    result["outputs"] = paths
    return result


def plot_search(rows, path):
    """Heat maps of valid perplexity over theta x lambda, one per
    window."""
    import matplotlib  # loaded only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg")

    windows = sorted({r["window"] for r in rows})
    thetas = sorted({r["theta"] for r in rows})
    lambdas = sorted({r["lambda"] for r in rows})
    fig, axes = plt.subplots(
        1, len(windows), figsize=(4.5 * len(windows), 4), squeeze=False
    )
    for ax, window in zip(axes[0], windows):
        grid = np.full((len(thetas), len(lambdas)), np.nan)
        for r in rows:
            if r["window"] == window:
                i, j = thetas.index(r["theta"]), lambdas.index(r["lambda"])
                grid[i, j] = r["ppl"]
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(lambdas)), [f"{x:g}" for x in lambdas])
        ax.set_yticks(range(len(thetas)), [f"{t:g}" for t in thetas])
        ax.set_xlabel("lambda")
        ax.set_ylabel("theta")
        i, j = np.unravel_index(np.nanargmin(grid), grid.shape)
        ax.plot(j, i, "r*", markersize=12)
        ax.set_title(f"W = {window}: best {grid[i, j]:.2f}")
        fig.colorbar(image, ax=ax, label="valid perplexity")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
