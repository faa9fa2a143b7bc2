"""Evaluation with the continuous cache pointer
(:mod:`keras_rnnlm.cache_pointer`): a run's perplexity with a cache, and
the search of the cache's settings on the validation split.

A :class:`CacheEvaluator` streams a split through the run's model as ONE
stream (batch 1): hidden states are computed a segment of ``bptt`` tokens
at a time by the stateful batch-1 model, the recurrent state and the
cache's memory carried from segment to segment, and each segment's
targets are scored with the cache (:class:`~keras_rnnlm.cache_pointer.
CacheStream`). :func:`tune_cache_run` runs the model once over the
validation split, keeps its keys (:class:`KeyedSplit`), and searches a
grid of ``(window, theta, lambda)`` on them without rerunning the model.

**Sentence-level models** (``data.state_reset = "sentence"``, see
:mod:`keras_rnnlm.data.sentences`): the model is fed the reset mask of
the stream, as the static :class:`~keras_rnnlm.evaluation.static.
Evaluator` feeds it, so the recurrent state starts again at every
sentence (the CBOW context, if any, is not reset); the cache is NOT
reset: its memory spans the sentences, like the CBOW context. With ``W =
0`` or ``lambda = 0`` the result is the Evaluator's at batch 1.
"""

import csv
import dataclasses
import json
import math
import os
import time

import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.cache_pointer import CacheStream
from keras_rnnlm.cache_pointer import cache_log_probs
from keras_rnnlm.cache_pointer import keyed_model
from keras_rnnlm.cache_pointer import mix_log_probs
from keras_rnnlm.evaluation.static import safe_exp
from keras_rnnlm.loops.recurrence import set_forward_only
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import load_weights_file
from keras_rnnlm.runs import CACHE_DIR
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import open_run
from keras_rnnlm.runs import run_sentence_starts
from keras_rnnlm.runs import run_weights

#: The files :func:`tune_cache_run` writes, by kind.
SEARCH_FILES = {
    "json": "cache_search.json",
    "csv": "cache_search.csv",
    "png": "cache_search.png",
}


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
            split start (as the :class:`~keras_rnnlm.evaluation.static.
            Evaluator`'s); the model reads the reset mask and its
            recurrent state starts again there.
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
        load_weights_file(self.model, path)

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
                        "ppl": safe_exp(nll),
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
    out = out or os.path.join(run_dir, CACHE_DIR)
    os.makedirs(out, exist_ok=True)
    paths = {k: os.path.join(out, name) for k, name in SEARCH_FILES.items()}
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
