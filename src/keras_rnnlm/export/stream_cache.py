"""The continuous cache pointer on the client side of an export.

Grave, Joulin & Usunier, "Improving Neural Language Models with a
Continuous Cache" (arXiv:1612.04426), as in
:mod:`keras_rnnlm.cache_pointer`: the model's distribution is
mixed with one over the words that followed the most similar recent
positions, the similarity being ``theta h_t . h_i`` between the keys (the
last recurrent layer's outputs). The exported graph is stateless, so the
cache, a memory of the last ``W`` keys and the words that followed them,
is the client's: the export's ``step_with_keys`` signature returns the
keys of each input next to ``log_probs`` and the states, and
:class:`StepCache` keeps the memory across calls:

    cache = StepCache("ptb", key_dim=meta["key_dim"], batch_size=1)
    state = initial_state(batch_size=1); bos = state.pop("bos_ids")
    for piece in pieces:                       # int32 [1, T] token ids
        out = step_with_keys(token_ids=piece, **state)
        ln_p = cache.score(piece, out)         # ln p of the inputs
        state = {k: v for k, v in out.items() if k.startswith("state_")}
    cache.next_log_probs()                     # [1, V] the next token

Feeding ``<eos>`` (``bos_ids``) then a text in any pieces gives the
probabilities :meth:`Scorer.continue_
<keras_rnnlm.scoring.Scorer.continue_>` gives with a
:class:`~keras_rnnlm.cache_pointer.CacheStream` (tested).

Each position's distribution is known when it is fed, but the word that
follows it (its value in the memory, the target it is scored on) comes
with the next input: :class:`StepCache` holds the last position of each
call until then, so :meth:`StepCache.score` returns the probabilities of
the *inputs*, each from the position before it (the first input of a
stream, which has none, is not scored).
"""

import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.cache_pointer import CacheStream
from keras_rnnlm.cache_pointer import cache_log_distribution


class StepCache:
    """The cache memory of ``batch_size`` streams fed through an export's
    ``step_with_keys``.

    Args:
        cache: a :class:`~keras_rnnlm.cache_pointer.CacheConfig`
            or its text (``"ptb"``, ``"window=W,theta=T,lambda=L"``).
        key_dim: the size of a key (``"key_dim"`` in the export's
            ``assets/keras_rnnlm.json``).
        batch_size: the rows of every call (one stream per row).
    """

    def __init__(self, cache, key_dim, batch_size=1):
        if not isinstance(cache, CacheConfig):
            cache = CacheConfig.parse(cache)
        self.cache = cache
        self.key_dim = int(key_dim)
        self.batch_size = int(batch_size)
        self.reset()

    def reset(self):
        """Empties the memory (a new stream)."""
        self.stream = CacheStream(self.cache, self.key_dim, self.batch_size)
        self._last_key = None  # (B, d): the last position fed
        self._last_log_probs = None  # (B, V): its distribution

    def score(self, token_ids, outputs):
        """Adds a call's positions to the cache; returns the mixed ln p of
        the inputs, float32 ``(B, T)`` (``(B, T - 1)`` on the first call
        of a stream: its first input follows no position).

        Args:
            token_ids: the call's int ``[B, T]`` inputs.
            outputs: its ``step_with_keys`` outputs (``log_probs`` ``[B, T,
                V]`` and ``keys`` ``[B, T, key_dim]``; tensors or arrays).
        """
        ids = np.asarray(token_ids, np.int32)
        log_probs = np.asarray(outputs["log_probs"], np.float32)
        keys = np.asarray(outputs["keys"], np.float32)
        if ids.ndim != 2 or ids.shape[0] != self.batch_size:
            raise ValueError(
                f"token_ids must be [{self.batch_size}, T], got {ids.shape}"
            )
        if log_probs.shape[:2] != ids.shape or keys.shape != (
            *ids.shape,
            self.key_dim,
        ):
            raise ValueError(
                f"outputs of another call: log_probs {log_probs.shape}, "
                f"keys {keys.shape} for token_ids {ids.shape}"
            )
        # The positions whose following word is now known: the held one
        # (followed by this call's first input) and all but the last.
        hidden, dists = keys[:, :-1], log_probs[:, :-1]
        targets = ids[:, 1:]
        if self._last_key is not None:
            hidden = np.concatenate([self._last_key[:, None], hidden], 1)
            dists = np.concatenate([self._last_log_probs[:, None], dists], 1)
            targets = ids
        self._last_key = keys[:, -1]
        self._last_log_probs = log_probs[:, -1]
        if not targets.shape[1]:
            return np.zeros(targets.shape, np.float32)
        vocab_lp = np.take_along_axis(dists, targets[..., None], -1)[..., 0]
        return np.asarray(
            self.stream.log_probs(hidden, targets, vocab_lp), np.float32
        )

    def next_log_probs(self):
        """The mixed distribution after the last input fed, ln p ``(B,
        V)`` (the memory is not changed). Builds a ``W x V`` one-hot
        matrix (:func:`~keras_rnnlm.cache_pointer.
        cache_log_distribution`)."""
        if self._last_key is None:
            raise ValueError("feed a call to score() first")
        dummy = np.zeros((self.batch_size, 1), np.int32)
        # log_softmax of log-probabilities is themselves: pass them as
        # the logits.
        mixed = cache_log_distribution(
            self._last_key[:, None],
            self._last_log_probs[:, None],
            dummy,
            self.stream.memory,
            self.cache,
        )
        return np.asarray(ops.convert_to_numpy(mixed), np.float32)[:, 0]
