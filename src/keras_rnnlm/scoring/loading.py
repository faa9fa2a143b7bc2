"""Loading a scorer from a run directory or an exported SavedModel."""

import errno
import json
import os

import numpy as np

from keras_rnnlm.scoring.scorer import LN10
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.scorer import SentenceScore
from keras_rnnlm.scoring.scorer import pooled_perplexity
from keras_rnnlm.scoring.streaming import MAX_BATCH_TOKENS
from keras_rnnlm.scoring.streaming import TIME_BUCKETS
from keras_rnnlm.scoring.streaming import TokenBudget
from keras_rnnlm.scoring.streaming import check_time_buckets
from keras_rnnlm.scoring.streaming import stream_scores
from keras_rnnlm.scoring.tokenization import Tokenization
from keras_rnnlm.scoring.tokenization import iter_sentence_texts


def load_scorer(path, weights=None, **kwargs):
    """A :class:`Scorer` (run directory) or :class:`SavedModelScorer`."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    versions = _export_versions(path)
    if versions:
        raise FileNotFoundError(
            f"{path} is a serving base directory: score one of its versions, "
            f"e.g. {os.path.join(path, versions[-1])}"
        )
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        if weights:
            raise ValueError("weights= applies to run directories only")
        return SavedModelScorer(path, **kwargs)
    return Scorer.from_run(path, weights=weights, **kwargs)


def _export_versions(path):
    """The numeric version folders holding a SavedModel under ``path``
    (a TF Serving base directory), oldest first."""
    if not os.path.isdir(path):
        return []
    names = [
        n
        for n in os.listdir(path)
        if n.isdigit()
        and os.path.exists(os.path.join(path, n, "saved_model.pb"))
    ]
    return sorted(names, key=int)


class SavedModelScorer:
    """The scoring API on an exported SavedModel.

    Supports the sentence methods of :class:`Scorer` with ``bos=True,
    eos=True`` (what the export computes), streaming too
    (:meth:`iter_scores`, in chunks within a token budget,
    :mod:`keras_rnnlm.scoring.streaming`). Sentences are scored by the
    ``score_text`` signature, in batches within the budget; a sentence
    over it is tokenised here (the export's tokenisation and
    vocabulary, from its assets) and scored in windows through the
    ``initial_state`` / ``step`` signatures, the state carried (see
    ``export/README.md``).

    Args:
        path: the export (a version directory).
        batch_size: the most sentences of one call (at most the
            export's ``max_batch_size``).
        max_batch_tokens: the token budget of one call, ``rows x padded
            length`` (default
            :data:`~keras_rnnlm.scoring.streaming.MAX_BATCH_TOKENS`, at
            most the export's ``max_tokens``).
    """

    def __init__(self, path, batch_size=256, max_batch_tokens=None):
        import tensorflow as tf  # SavedModels need TensorFlow
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        self._tf = tf
        self.path = path
        self.model = tf.saved_model.load(path)
        self._fn = self.model.signatures["score_text"]
        self.batch_size = int(batch_size)
        meta = os.path.join(path, "assets", "keras_rnnlm.json")
        self.metadata = {}
        if os.path.exists(meta):
            with open(meta) as f:
                self.metadata = json.load(f)
        limits = self.metadata.get("limits", {})
        if limits.get("max_batch_size"):
            self.batch_size = min(
                self.batch_size, int(limits["max_batch_size"])
            )
        if max_batch_tokens is None:
            max_batch_tokens = MAX_BATCH_TOKENS
        self.max_batch_tokens = int(max_batch_tokens)
        if limits.get("max_tokens"):
            self.max_batch_tokens = min(
                self.max_batch_tokens, int(limits["max_tokens"])
            )
        self.time_buckets = check_time_buckets(
            self.metadata.get("time_buckets") or TIME_BUCKETS
        )
        TokenBudget(self.max_batch_tokens, self.batch_size)  # checks them
        self.tokenization = Tokenization.from_dict(
            self.metadata.get("tokenization") or {}
        )
        self._vocab = None

    @property
    def budget(self):
        """The :class:`~keras_rnnlm.scoring.streaming.TokenBudget` of one
        call."""
        return TokenBudget(
            self.max_batch_tokens, self.batch_size, self.time_buckets
        )

    # ---------------------------------------------------------- streaming
    def iter_scores(
        self,
        sentences,
        bos=True,
        eos=True,
        document=False,
        cache=None,
        errors="raise",
    ):
        """Scores ``sentences`` (any iterable, read lazily) in bounded
        chunks: a :class:`SentenceScore` per sentence, in order (see
        :meth:`Scorer.iter_scores`; ``errors="report"``: a line whose
        call fails is an
        :class:`~keras_rnnlm.scoring.streaming.UnscoredLine`)."""
        self._check(bos, eos)
        if document or cache is not None:
            raise ValueError(
                "An exported model scores sentences independently: "
                "document scoring needs a run directory"
            )
        # the input contract of every scoring path: the graph gets the
        # text the Python scorer tokenises (valid UTF-8, U+FFFD for
        # invalid bytes and lone surrogates)
        return stream_scores(
            iter_sentence_texts(sentences),
            self._sentence_row,
            self._score_rows,
            self._score_long,
            self.budget,
            errors,
            (self._tf.errors.InvalidArgumentError, LineTooLongError),
        )

    def _sentence_row(self, text):
        """``(steps, (text, tokens))``: steps are the tokens + ``<eos>``,
        by the export's tokenisation."""
        tokens = self.tokenization(text)
        return len(tokens) + 1, (text, tokens)

    def _score_rows(self, rows):
        return self._call([text.encode("utf-8") for text, _ in rows])

    def _call(self, chunk):
        """``score_text`` on ``chunk``; a chunk over the export's token
        budget (``max_tokens``) is scored in halves, a sentence over it
        in windows."""
        tf = self._tf
        try:
            r = self._fn(sentences=tf.constant(chunk, tf.string))
        except tf.errors.InvalidArgumentError as e:
            if "(max_tokens)" not in e.message:
                raise
            if len(chunk) == 1:
                text = chunk[0].decode("utf-8")
                return [self._score_long(self._sentence_row(text)[1])]
            half = len(chunk) // 2
            return self._call(chunk[:half]) + self._call(chunk[half:])
        lengths = r["lengths"].numpy()
        tok = r["token_logprobs"].numpy()
        flags = r["token_is_oov"].numpy()
        strings = r["tokens"].numpy()
        return [
            SentenceScore(
                [t.decode("utf-8") for t in strings[i, :n]],
                tok[i, :n].astype(np.float64),
                [bool(f) for f in flags[i, :n]],
            )
            for i, n in enumerate(lengths)
        ]

    def _score_long(self, row):
        """A sentence over the budget: ``<eos>`` then its tokens fed to
        ``step`` in windows of at most :attr:`max_batch_tokens`, the
        states carried from the ``initial_state`` signature on."""
        tf = self._tf
        _, tokens = row
        vocab = self._export_vocab()
        fill = 0 if vocab["unk"] is None else vocab["unk"]  # as the graph
        ids = [vocab["ids"].get(t, fill) for t in tokens]
        oov = [t not in vocab["ids"] for t in tokens]
        start = self.model.signatures["initial_state"](
            batch_size=tf.constant(1, tf.int32)
        )
        states = {k: v for k, v in start.items() if k != "bos_ids"}
        inputs = [int(start["bos_ids"].numpy()[0]), *ids]
        targets = np.asarray([*ids, vocab["eos"]], np.int64)
        step = self.model.signatures["step"]
        budget = self.budget
        ln = []
        for a, b in budget.windows(len(inputs)):
            # the last window padded to its bucket (a bounded set of
            # shapes); its final state is not needed
            x = np.zeros((1, budget.tail_width(b - a)), np.int32)
            x[0, : b - a] = inputs[a:b]
            out = step(token_ids=tf.constant(x), **states)
            log_probs = out["log_probs"].numpy()[0]
            ln.append(log_probs[np.arange(b - a), targets[a:b]])
            states = {k: out[k] for k in states}
        ln = np.concatenate(ln).astype(np.float64)
        if vocab["unk"] is None:  # no <unk>: an unknown token has p = 0
            ln[: len(oov)][np.asarray(oov, bool)] = -np.inf
        return SentenceScore([*tokens, vocab["eos_token"]], ln, [*oov, False])

    def _export_vocab(self):
        """The export's vocabulary (``assets/vocab.txt``) for
        :meth:`_score_long`; a :class:`LineTooLongError` where the export
        lacks what windows need."""
        if self._vocab is not None:
            return self._vocab
        path = os.path.join(self.path, "assets", "vocab.txt")
        meta = self.metadata
        names = set(self.model.signatures.keys())
        if (
            not os.path.exists(path)
            or not meta.get("eos_token")
            or not {"initial_state", "step"} <= names
        ):
            raise LineTooLongError(
                "the sentence is over the export's token budget of "
                f"{self.max_batch_tokens} tokens, and the export has no "
                "streaming signatures (initial_state, step) with a "
                "vocabulary to score it in windows"
            )
        with open(path, encoding="utf-8") as f:
            tokens = f.read().split("\n")[:-1]
        ids = {t: i for i, t in enumerate(tokens)}
        unk = meta.get("unk_token")
        self._vocab = {
            "ids": ids,
            "unk": ids.get(unk) if unk else None,
            "eos": ids[meta["eos_token"]],
            "eos_token": meta["eos_token"],
        }
        return self._vocab

    # ---------------------------------------------------------- sentences
    def _check(self, bos, eos):
        if not (bos and eos):
            raise ValueError(
                "An exported model scores with bos=True, eos=True only"
            )

    def score_sentences(self, sentences, bos=True, eos=True):
        return list(self.iter_scores(sentences, bos, eos))

    def score(self, sentence, bos=True, eos=True, natural_log=False):
        r = self.score_sentences([sentence], bos, eos)[0]
        return r.ln_prob if natural_log else r.log10_prob

    def score_batch(self, sentences, bos=True, eos=True, natural_log=False):
        rs = self.iter_scores(sentences, bos, eos)
        return [r.ln_prob if natural_log else r.log10_prob for r in rs]

    def perplexity(self, sentence, bos=True, eos=True):
        return self.score_sentences([sentence], bos, eos)[0].perplexity

    def corpus_perplexity(self, sentences, bos=True, eos=True):
        return pooled_perplexity(self.iter_scores(sentences, bos, eos))


class LineTooLongError(ValueError):
    """A sentence over an export's token budget that the export cannot
    score in windows."""


__all__ = ["LN10", "LineTooLongError", "SavedModelScorer", "load_scorer"]
