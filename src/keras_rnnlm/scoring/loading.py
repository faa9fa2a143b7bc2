"""Loading a scorer from a run directory or an exported SavedModel."""

import errno
import json
import os

import numpy as np

from keras_rnnlm.scoring.scorer import LN10
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.scorer import SentenceScore
from keras_rnnlm.scoring.scorer import pooled_perplexity
from keras_rnnlm.scoring.tokenization import sentence_texts


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
    """The scoring API on an exported SavedModel (``score_text``).

    Supports the sentence methods of :class:`Scorer` with ``bos=True,
    eos=True`` (what the endpoint computes); streaming goes through the
    ``initial_state`` / ``step`` endpoints (see ``export/README.md``).
    """

    def __init__(self, path, batch_size=256):
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
        limit = self.metadata.get("limits", {}).get("max_batch_size")
        if limit:
            self.batch_size = min(self.batch_size, int(limit))

    def _call(self, chunk):
        """``score_text`` on ``chunk``; a chunk over the export's token
        budget (``max_tokens``) is scored in halves."""
        tf = self._tf
        try:
            r = self._fn(sentences=tf.constant(chunk, tf.string))
        except tf.errors.InvalidArgumentError as e:
            if "(max_tokens)" not in e.message or len(chunk) < 2:
                raise
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

    def _check(self, bos, eos):
        if not (bos and eos):
            raise ValueError(
                "An exported model scores with bos=True, eos=True only"
            )

    def score_sentences(self, sentences, bos=True, eos=True):
        self._check(bos, eos)
        # the input contract of every scoring path: the graph gets the
        # text the Python scorer tokenises (valid UTF-8, U+FFFD for
        # invalid bytes and lone surrogates)
        texts = sentence_texts(sentences)
        out = []
        for start in range(0, len(texts), self.batch_size):
            chunk = [
                t.encode("utf-8")
                for t in texts[start : start + self.batch_size]
            ]
            out.extend(self._call(chunk))
        return out

    def score(self, sentence, bos=True, eos=True, natural_log=False):
        r = self.score_sentences([sentence], bos, eos)[0]
        return r.ln_prob if natural_log else r.log10_prob

    def score_batch(self, sentences, bos=True, eos=True, natural_log=False):
        rs = self.score_sentences(sentences, bos, eos)
        return [r.ln_prob if natural_log else r.log10_prob for r in rs]

    def perplexity(self, sentence, bos=True, eos=True):
        return self.score_sentences([sentence], bos, eos)[0].perplexity

    def corpus_perplexity(self, sentences, bos=True, eos=True):
        return pooled_perplexity(self.score_sentences(sentences, bos, eos))


__all__ = ["LN10", "SavedModelScorer", "load_scorer"]
