"""Sentences of a token stream, and the per-position reset mask of
sentence-level training.

Sentence-level training (*On the long-term learning ability of LSTM LMs*,
arXiv:2106.08927, Section 3.1: "the hidden states are reset to zero after
each sentence") needs to know, for each input position of a BPTT window,
whether a new sentence starts there. Our definition of a sentence, on the
id stream (every line ends with ``<eos>``, see
:mod:`keras_rnnlm.data.corpus`):

* **PTB** (``rule="line"``): a line. The distributed files hold one
  sentence a line.
* **WikiText** (``rule="punctuation"``): a line is a paragraph (or a
  heading, or blank), so a sentence also ends after a sentence-final
  token, ``.``, ``!`` or ``?``, as well as at ``<eos>``. WikiText's
  tokenisation keeps a decimal point and a number separator apart
  (``@.@``, ``@,@``) and abbreviations whole (``U.S.``), so a lone ``.``
  token ends a sentence; a heading line is a sentence of its own, and a
  blank line (``<eos>`` alone) a sentence of one token.

:class:`SentenceResetSequence` serves the mask with the windows of
:class:`~keras_rnnlm.data.streams.LMSequence`: ``x = {"tokens": ...,
"reset": ...}`` with ``reset[b, t] = 1.0`` where the input token
``x[b, t]`` ends a sentence, so that a model zeroes its recurrent state
before reading it. That token is the first *input* of the next sentence:
the sentence ``w_1 .. w_n`` (ended by ``</s>``) is read as ``</s>' w_1 ..
w_n`` with ``</s>'`` the end of the previous one, from the zero state,
and its targets are ``w_1 .. w_n </s>``: exactly how the
:class:`~keras_rnnlm.scoring.Scorer` scores a sentence alone (``<eos>``
as its beginning-of-sentence context). So a sentence's scores inside the
stream equal its scores alone, and no target is lost.
"""

import numpy as np

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.data.streams import batchify

#: Tokens after which a WikiText sentence ends (besides ``<eos>``).
SENTENCE_FINAL = (".", "!", "?")
WIKITEXT_CORPORA = ("wikitext2", "wikitext103")


def sentence_rule(corpus_name):
    """``"punctuation"`` for the WikiText corpora, ``"line"`` otherwise."""
    return "punctuation" if corpus_name in WIKITEXT_CORPORA else "line"


def sentence_ends(ids, vocab, rule="line"):
    """Boolean array: ``True`` where a sentence ends (after that token).

    Args:
        ids: 1-D id array.
        vocab: the :class:`~keras_rnnlm.data.vocabulary.Vocabulary`.
        rule: ``"line"`` (at ``<eos>``) or ``"punctuation"`` (also after
            ``.``, ``!``, ``?``).
    """
    if vocab.eos_id is None:
        raise ValueError("sentence boundaries need an <eos> token")
    ids = np.asarray(ids)
    final = [vocab.eos_id]
    if rule == "punctuation":
        final += [vocab.token_to_id(t) for t in SENTENCE_FINAL if t in vocab]
    elif rule != "line":
        raise ValueError(f"rule must be 'line' or 'punctuation': {rule!r}")
    return np.isin(ids, final)


def sentence_starts(ids, vocab, rule="line"):
    """Boolean array: ``True`` where the input sequence of a sentence
    starts, i.e. at the token that ended the previous sentence (its
    beginning-of-sentence context, see the module docstring)."""
    return sentence_ends(ids, vocab, rule)


class SentenceResetSequence(LMSequence):
    """:class:`~keras_rnnlm.data.streams.LMSequence` that also serves the
    reset mask: ``x = {"tokens": (B, T) int32, "reset": (B, T) float32}``.

    Args:
        ids: 1-D id array.
        batch_size, bptt: as :class:`LMSequence`.
        starts: 1-D boolean array, ``len(ids)``: where a sentence starts
            (:func:`sentence_starts`). Each stream's first position is
            never a reset (the stream starts from the reset state).
        **kwargs: the other arguments of :class:`LMSequence`.
    """

    def __init__(self, ids, batch_size, bptt, starts, **kwargs):
        super().__init__(ids, batch_size, bptt, **kwargs)
        starts = np.asarray(starts, bool)
        if starts.shape != np.shape(ids):
            raise ValueError(
                f"starts has shape {starts.shape}, ids {np.shape(ids)}"
            )
        mask = batchify(starts.astype(np.int32), batch_size)
        mask[:, 0] = 0
        self._reset = mask.astype(np.float32)

    def extra_inputs(self, index):
        start, length, _ = self._window(index)
        reset = self._reset[:, start : start + length]
        if self.pad_to is not None and length < self.pad_to:
            reset = np.pad(reset, ((0, 0), (0, self.pad_to - length)))
        return {"reset": reset}


def lm_sequence(ids, batch_size, bptt, starts=None, **kwargs):
    """The windowed stream of ``ids``: an
    :class:`~keras_rnnlm.data.streams.LMSequence`, or with ``starts``
    (sentence starts, as :func:`sentence_starts` gives them) a
    :class:`SentenceResetSequence` whose inputs carry the reset mask.
    ``kwargs`` go to the sequence (``pad_to``, ...)."""
    if starts is None:
        return LMSequence(ids, batch_size, bptt, **kwargs)
    return SentenceResetSequence(ids, batch_size, bptt, starts, **kwargs)
