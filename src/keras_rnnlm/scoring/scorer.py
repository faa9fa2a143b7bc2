"""Sentence scoring with KenLM's semantics, batched and streaming.

Conventions (those of KenLM's Python module, adapted to an RNN):

* ``score(sentence, bos=True, eos=True)`` is the log10 probability of the
  sentence's tokens followed by the end-of-sentence token.
* **bos.** An RNN has no "null context" to predict the first token from.
  The models are trained on a continuous stream in which every line follows
  an ``<eos>``, so ``bos=True`` conditions the first token on ``<eos>`` fed
  to the zero state: the start of a sentence as the model saw it in
  training (for a vocabulary without ``<eos>``, e.g. text8, the space
  symbol plays that role). With ``bos=False`` the first token is context
  only: it is fed to the zero state and **not scored**, so ``full_scores``
  has one entry fewer (use :meth:`Scorer.begin` / :meth:`Scorer.continue_`
  to score a continuation of earlier text instead).
* ``eos=True`` adds the probability of ``<eos>`` after the last token.
* ``full_scores`` yields ``(log10 prob, is_oov)`` per scored token (the
  ``<eos>`` included); ``sum(p for p, _ in full_scores(s)) == score(s)``.
* ``perplexity(s) = 10 ** (-score(s) / n)`` with ``n`` the number of scored
  tokens (words + 1 for ``<eos>``).
* Out-of-vocabulary tokens are mapped to ``<unk>`` and flagged
  (``is_oov``); the literal token ``<unk>`` of a corpus that contains it is
  in the vocabulary and is not flagged. Without an ``<unk>`` in the
  vocabulary (closed character sets) an OOV token is an error.
* ``natural_log=True`` returns natural logarithms instead.
* Empty or whitespace-only lines are sentences without tokens: their score
  is that of ``<eos>`` after the context. With nothing to score
  (``bos=False, eos=False`` and no token) the score is 0 and ``perplexity``
  raises ``ValueError``.
* **Sentence-level runs** (``data.state_reset = "sentence"``): the
  streaming methods (:meth:`Scorer.continue_`,
  :meth:`Scorer.score_document`) set the recurrent states back to their
  initial values at every sentence start, with the rule of training
  (:mod:`keras_rnnlm.data.sentences`: PTB a line; WikiText also after
  ``.``, ``!``, ``?`` inside a line); the CBOW context's word ids and the
  cache's memory carry on. The batched methods score each line alone
  from the initial state (a WikiText line of several sentences as one).
"""

import dataclasses
import math
import os

import keras
import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import CacheStream
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.errors import UnknownCorpusError
from keras_rnnlm.data.registry import CORPORA
from keras_rnnlm.data.registry import get_corpus_spec
from keras_rnnlm.data.sentences import sentence_rule
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.evaluation.static import load_checked_weights
from keras_rnnlm.inference_model import InferenceModel
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.metrics import token_nll
from keras_rnnlm.models import build_language_model
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import run_weights
from keras_rnnlm.scoring.streaming import MAX_BATCH_TOKENS
from keras_rnnlm.scoring.streaming import TIME_BUCKETS
from keras_rnnlm.scoring.streaming import TokenBudget
from keras_rnnlm.scoring.streaming import UnscoredLine
from keras_rnnlm.scoring.streaming import bucket_length
from keras_rnnlm.scoring.streaming import check_errors
from keras_rnnlm.scoring.streaming import check_time_buckets
from keras_rnnlm.scoring.streaming import padded_count
from keras_rnnlm.scoring.streaming import stream_scores
from keras_rnnlm.scoring.tokenization import Tokenization
from keras_rnnlm.scoring.tokenization import iter_sentence_texts
from keras_rnnlm.scoring.tokenization import tokenization_for_run

LN10 = math.log(10.0)


@dataclasses.dataclass
class SentenceScore:
    """The scores of one sentence (or stream segment).

    Attributes:
        tokens: the scored tokens as strings (``<eos>`` included).
        ln_probs: natural-log probability of each scored token.
        oov: whether each scored token was out of the vocabulary.
        context_oov: OOV tokens that were context only (``bos=False``).
    """

    tokens: list
    ln_probs: np.ndarray
    oov: list
    context_oov: int = 0

    @property
    def log10_probs(self):
        return self.ln_probs / LN10

    @property
    def ln_prob(self):
        return float(np.sum(self.ln_probs, dtype=np.float64))

    @property
    def log10_prob(self):
        return self.ln_prob / LN10

    @property
    def num_tokens(self):
        return len(self.tokens)

    @property
    def num_oov(self):
        return int(sum(self.oov))

    @property
    def perplexity(self):
        if not self.tokens:
            raise ValueError("Nothing was scored: perplexity is undefined")
        return math.exp(-self.ln_prob / len(self.tokens))

    def full_scores(self, natural_log=False):
        probs = self.ln_probs if natural_log else self.log10_probs
        return [(float(p), bool(o)) for p, o in zip(probs, self.oov)]

    def to_dict(self):
        return {
            "log10_prob": self.log10_prob,
            "ln_prob": self.ln_prob,
            "num_tokens": self.num_tokens,
            "num_oov": self.num_oov,
            "perplexity": self.perplexity if self.tokens else None,
            "oov_tokens": [t for t, o in zip(self.tokens, self.oov) if o],
        }


@dataclasses.dataclass
class ScoringState:
    """Where a stream stands: recurrent states and the pending input.

    ``states`` are the recurrent states after every token but the last;
    ``last_token`` is the id of the last token (the input that predicts the
    next one), ``None`` when nothing has been fed yet (``bos=False``).
    Immutable in use: :meth:`Scorer.continue_` returns a new state.
    """

    states: list
    last_token: int | None


def pooled_perplexity(scores):
    """Perplexity over every scored token of several
    :class:`SentenceScore`s (their log-probabilities pooled)."""
    n, ln = 0, 0.0
    for r in scores:  # any iterable, read once
        n += r.num_tokens
        ln += r.ln_prob
    if not n:
        raise ValueError("Nothing was scored: perplexity is undefined")
    return math.exp(-ln / n)


class Scorer:
    """Scores sentences with a trained language model.

    Args:
        model: a stateless model from ``build_language_model(...,
            stateful=False)`` with trained weights, or an
            :class:`InferenceModel`.
        vocab: the model's :class:`~keras_rnnlm.data.Vocabulary`.
        tokenization: a :class:`Tokenization` (default whitespace).
        batch_size: the most sentences of one forward pass.
        time_buckets: the padded lengths (:data:`TIME_BUCKETS`; finer
            buckets: less padding, more compiled shapes). An exported
            model keeps its scorer's.
        sentence_reset: a sentence-level model: the sentence rule
            (``"line"`` or ``"punctuation"``, see
            :func:`~keras_rnnlm.data.sentences.sentence_ends`) at whose
            sentence starts the streaming methods reset the recurrent
            states; ``None``: the states carry on. :meth:`from_run` sets
            it from the run (:func:`run_sentence_rule`).
        max_batch_tokens: the token budget of one forward pass, ``rows
            x padded length`` (default
            :data:`~keras_rnnlm.scoring.streaming.MAX_BATCH_TOKENS`): it
            bounds the memory of scoring, and a longer sentence is scored
            in windows of at most this many tokens, the state carried
            (:mod:`keras_rnnlm.scoring.streaming`).

    Example:

    >>> scorer = Scorer.from_run("runs/zaremba_small")  # doctest: +SKIP
    >>> scorer.score("the cat sat on the mat .")  # doctest: +SKIP
    -17.3
    """

    def __init__(
        self,
        model,
        vocab,
        tokenization=None,
        batch_size=64,
        time_buckets=TIME_BUCKETS,
        sentence_reset=None,
        max_batch_tokens=None,
    ):
        if sentence_reset not in (None, "line", "punctuation"):
            raise ValueError(
                "sentence_reset must be None, 'line' or 'punctuation'; "
                f"got {sentence_reset!r}"
            )
        self.config = None
        self.model = None if isinstance(model, InferenceModel) else model
        if not isinstance(model, InferenceModel):
            model = build_inference_model(model)
        if model.vocab_size != len(vocab):
            raise ValueError(
                f"The model predicts {model.vocab_size} tokens but the "
                f"vocabulary has {len(vocab)}"
            )
        self.inference = model
        self.vocab = vocab
        self.tokenization = tokenization or Tokenization()
        self.batch_size = int(batch_size)
        self.time_buckets = check_time_buckets(time_buckets)
        if max_batch_tokens is None:
            max_batch_tokens = MAX_BATCH_TOKENS
        self.max_batch_tokens = int(max_batch_tokens)
        TokenBudget(self.max_batch_tokens, self.batch_size)  # checks them
        self.sentence_reset = sentence_reset
        if sentence_reset is not None and vocab.eos_id is None:
            raise ValueError("A sentence reset needs an <eos> token")
        self._context_id = _context_id(vocab, self.tokenization)
        self._fn = _make_scoring_fn(model)

    # ----------------------------------------------------------- loading
    @classmethod
    def from_run(cls, run_dir, weights=None, **kwargs):
        """A scorer for a run directory's best (or given) weights.
        Raises FileNotFoundError where :func:`~keras_rnnlm.runs.load_run`
        or :func:`~keras_rnnlm.runs.run_weights` does."""
        config, vocab = load_run(run_dir)
        weights = run_weights(run_dir, weights)
        policy = keras.config.dtype_policy()
        keras.config.set_dtype_policy("float32")  # score in float32
        try:
            model = build_language_model(
                config.model, len(vocab), None, stateful=False
            )
        finally:
            keras.config.set_dtype_policy(policy)
        load_checked_weights(model, weights, config.model, len(vocab), run_dir)
        kwargs.setdefault("tokenization", tokenization_for_run(config, vocab))
        kwargs.setdefault("sentence_reset", run_sentence_rule(config))
        scorer = cls(model, vocab, **kwargs)
        scorer.config = config
        scorer.model = model  # the stateless builder model (weights)
        return scorer

    # ---------------------------------------------------------- encoding
    def encode(self, sentence):
        """Token strings, ids and OOV flags of one sentence."""
        tokens = self.tokenization(sentence)
        oov = [self.vocab.is_oov(t) for t in tokens]
        if any(oov) and self.vocab.unk_id is None:
            first = tokens[oov.index(True)]
            raise OOVError(
                f"Token {first!r} is not in the vocabulary, which has no "
                f"unknown token: the model gives it probability 0"
            )
        ids = self.vocab.encode(tokens) if tokens else np.zeros(0, np.int32)
        return tokens, ids, oov

    # ----------------------------------------------------------- budget
    @property
    def budget(self):
        """The :class:`~keras_rnnlm.scoring.streaming.TokenBudget` of one
        forward pass (:attr:`max_batch_tokens`, :attr:`batch_size`,
        :attr:`time_buckets`)."""
        return TokenBudget(
            self.max_batch_tokens, self.batch_size, self.time_buckets
        )

    # -------------------------------------------------------- sentences
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
        chunks: yields a :class:`SentenceScore` per sentence, in order
        (:mod:`keras_rnnlm.scoring.streaming`).

        Args:
            sentences: str or bytes items (the input contract of
                :func:`~keras_rnnlm.scoring.tokenization.sentence_text`).
            bos, eos: KenLM's sentence boundaries (module docstring).
            document: the sentences are the lines of ONE document, the
                state (and the cache) carried from line to line, as in
                :meth:`score_document`.
            cache: with ``document``: a
                :class:`~keras_rnnlm.cache_pointer.CacheConfig`.
            errors: ``"raise"``, or ``"report"``: a line with a token the
                vocabulary cannot map (no ``<unk>``) is an
                :class:`~keras_rnnlm.scoring.streaming.UnscoredLine` in
                its place (in a document: skipped, the state unchanged).
        """
        check_errors(errors)
        texts = iter_sentence_texts(sentences)
        if document:
            return self._iter_document(texts, cache, bos, eos, errors)
        if cache is not None:
            raise ValueError("cache= scores a document: add document=True")
        return stream_scores(
            texts,
            lambda text: self._sentence_row(text, bos, eos),
            self._score_rows,
            self._score_long,
            self.budget,
            errors,
            (OOVError,),
        )

    def score_sentences(self, sentences, bos=True, eos=True):
        """:class:`SentenceScore` of each sentence (batched); the input
        contract is :func:`~keras_rnnlm.scoring.tokenization.sentence_text`
        (``TypeError`` for a non-text item or a single string)."""
        return list(self.iter_scores(sentences, bos, eos))

    def score(self, sentence, bos=True, eos=True, natural_log=False):
        """log10 (or ln) probability of one sentence."""
        r = self.score_sentences([sentence], bos, eos)[0]
        return r.ln_prob if natural_log else r.log10_prob

    def full_scores(self, sentence, bos=True, eos=True, natural_log=False):
        """``[(log prob, is_oov), ...]``, one per scored token."""
        r = self.score_sentences([sentence], bos, eos)[0]
        return r.full_scores(natural_log)

    def perplexity(self, sentence, bos=True, eos=True):
        """``10 ** (-score / scored tokens)``."""
        return self.score_sentences([sentence], bos, eos)[0].perplexity

    def score_batch(self, sentences, bos=True, eos=True, natural_log=False):
        """Scores of many sentences (one float each)."""
        rs = self.iter_scores(sentences, bos, eos)
        return [r.ln_prob if natural_log else r.log10_prob for r in rs]

    def full_scores_batch(
        self, sentences, bos=True, eos=True, natural_log=False
    ):
        rs = self.score_sentences(sentences, bos, eos)
        return [r.full_scores(natural_log) for r in rs]

    def corpus_perplexity(self, sentences, bos=True, eos=True):
        """Perplexity over every scored token of every sentence."""
        return pooled_perplexity(self.iter_scores(sentences, bos, eos))

    # -------------------------------------------------------- streaming
    def begin(self, bos=True):
        """The state at the start of a stream (see module docstring)."""
        return ScoringState(
            self.inference.initial_states(1), self._bos_id() if bos else None
        )

    def continue_(self, state, text, eos=False, cache=None):
        """Scores a segment after ``state``; returns ``(new_state, score)``.

        ``text`` is a string (tokenised as usual) or a list of token
        strings; ``eos=True`` ends the segment with ``<eos>``. Scoring a
        document in segments with the carried state gives the same token
        scores as scoring it whole. ``cache``: a
        :class:`~keras_rnnlm.cache_pointer.CacheStream` (see
        :meth:`cache_stream`) whose memory follows the stream: the
        segment is scored with the continuous cache and added to it.
        With :attr:`sentence_reset`, the recurrent states go back to their
        initial values before every input that ends a sentence (the
        previous segment's last token too), as in sentence-level training.
        A segment is run in windows of at most :attr:`max_batch_tokens`
        tokens, the state (and the cache) carried.
        """
        if isinstance(text, (list, tuple)):
            tokens = list(text)
            oov = [self.vocab.is_oov(t) for t in tokens]
            ids = self.vocab.encode(tokens) if tokens else np.zeros(0)
        else:
            tokens, ids, oov = self.encode(text)
        ids = np.asarray(ids, np.int32)
        if eos:
            tokens = [*tokens, self.vocab.eos_token]
            ids = np.append(ids, self._eos_id()).astype(np.int32)
            oov = [*oov, False]
        ctx_oov = 0
        if state.last_token is None and len(ids):
            ctx_oov = int(oov[0])
            state = ScoringState(state.states, int(ids[0]))
            tokens, ids, oov = tokens[1:], ids[1:], oov[1:]
        if not len(ids):
            return state, SentenceScore([], np.zeros(0), [], ctx_oov)
        inputs = np.concatenate([[state.last_token], ids[:-1]])
        inputs = inputs.astype(np.int32)
        run = self._run if cache is None else self._cached_run(cache)
        budget = self.budget
        ln, new_states = [], state.states
        for a, b in self._sentence_pieces(inputs):
            if self.sentence_reset is not None and self._starts(inputs[a]):
                new_states = self._reset_recurrent(new_states)
            for c, d in budget.windows(b, a):
                lp, new_states = run(
                    inputs[None, c:d], ids[None, c:d], new_states
                )
                ln.append(lp[0])
        new = ScoringState(new_states, int(ids[-1]))
        return new, SentenceScore(tokens, np.concatenate(ln), oov, ctx_oov)

    # --------------------------------------------------------- documents
    def cache_stream(self, cache):
        """An empty continuous cache for one stream: ``cache`` a
        :class:`~keras_rnnlm.cache_pointer.CacheConfig`; its
        keys are the last recurrent layer's outputs (see
        :mod:`keras_rnnlm.cache_pointer`)."""
        return CacheStream(cache, self._keyed_graph().outputs[1].shape[-1])

    def score_document(self, lines, cache=None, bos=True, eos=True):
        """Scores the lines of ONE document in order, the recurrent state
        (and, with ``cache``, the continuous cache's memory) carried from
        line to line: a :class:`SentenceScore` per line. A sentence-level
        run (:attr:`sentence_reset`) resets the recurrent states at every
        sentence start (not the CBOW context nor the cache), so that the
        scores are those of its static evaluation (``keras-rnnlm
        evaluate``, ``evaluate --cache``) on the same text.

        KenLM's semantics per line: ``eos=True`` scores an ``<eos>``
        after every line (without it the lines run together); ``bos``
        applies to the document's first line (later lines continue from
        the previous one, as in the training stream, where every line
        follows an ``<eos>``). ``cache``: a
        :class:`~keras_rnnlm.cache_pointer.CacheConfig` (e.g.
        ``CacheConfig.parse("ptb")``); without it the scores are those of
        :meth:`begin` / :meth:`continue_`.
        """
        if isinstance(lines, (str, bytes)):
            raise TypeError("score_document takes a list of lines")
        return list(self.iter_scores(lines, bos, eos, True, cache))

    def _iter_document(self, lines, cache, bos, eos, errors):
        """:meth:`score_document` a line at a time (see
        :meth:`iter_scores`)."""
        memory = None if cache is None else self.cache_stream(cache)
        state = self.begin(bos)
        for line in lines:
            try:
                state, r = self.continue_(state, line, eos=eos, cache=memory)
            except OOVError as e:
                if errors == "raise":
                    raise
                r = UnscoredLine(str(e))
            yield r

    def _keyed_graph(self):
        """The inference graph with the last recurrent layer's output
        sequence as a second output: ``[logits, keys, *states]``."""
        return self.inference.keyed_model

    def _cached_run(self, cache):
        def run(inputs, targets, states):
            positions = ops.arange(inputs.size, dtype="int32")
            states = [ops.convert_to_tensor(s, "float32") for s in states]
            out = self._keyed_graph()(
                [ops.convert_to_tensor(inputs), positions, *states],
                training=False,
            )
            logits = ops.convert_to_numpy(out[0]).astype(np.float64)
            top = logits.max(-1, keepdims=True)
            lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
            vocab_lp = logits[0, np.arange(targets.size), targets[0]] - lse[0]
            keys = ops.convert_to_numpy(out[1])
            ln = cache.log_probs(keys, targets, vocab_lp[None])
            final = [ops.convert_to_numpy(s) for s in out[2:]]
            return np.asarray(ln, np.float64), final

        return run

    # --------------------------------------------------------- internals
    def _starts(self, ids):
        """Where an input starts a sentence (see :attr:`sentence_reset`)."""
        return sentence_starts(ids, self.vocab, self.sentence_reset)

    def _sentence_pieces(self, inputs):
        """``(start, stop)`` of the runs of ``inputs`` between sentence
        starts (the whole of it without :attr:`sentence_reset`)."""
        if self.sentence_reset is None:
            return [(0, len(inputs))]
        cuts = [0, *np.flatnonzero(self._starts(inputs[1:])) + 1]
        return list(zip(cuts, [*cuts[1:], len(inputs)]))

    def _reset_recurrent(self, states):
        """``states`` with the recurrent ones at their initial values (the
        CBOW context's word ids, ``"token_ids"`` states, kept)."""
        initial = self.inference.initial_states(1)
        return [
            s if kind == "token_ids" else s0
            for s, s0, kind in zip(states, initial, self.inference.state_kinds)
        ]

    def _eos_id(self):
        if self.vocab.eos_id is None:
            raise ValueError(
                "The vocabulary has no end-of-sentence token: use eos=False"
            )
        return self.vocab.eos_id

    def _bos_id(self):
        if self._context_id is None:
            raise ValueError(
                "The vocabulary has neither <eos> nor a space symbol to "
                "start a sentence from: use bos=False"
            )
        return self._context_id

    def _run(self, inputs, targets, states):
        """Forward pass from ``states``: (ln probs, final states).

        Not padded: right padding would change the final state.
        """
        ln, final = self._at_positions(
            inputs, targets, states, np.arange(inputs.size)
        )
        return ln[None], [keras.ops.convert_to_numpy(s) for s in final]

    def _at_positions(self, inputs, targets, states, positions):
        """ln probs (float64) at the flat ``positions`` and the final
        states. The head runs at a bucketed number of positions
        (:func:`~keras_rnnlm.scoring.streaming.padded_count`, the first
        one repeated), so that a long input compiles a bounded set of
        shapes (XLA compiles one program per shape)."""
        n = len(positions)
        padded = np.zeros(padded_count(n), np.int32)
        padded[:n] = positions
        ln, final = self._fn(inputs, targets, states, padded)
        ln = keras.ops.convert_to_numpy(ln)[:n].astype(np.float64)
        return ln, final

    def _sentence_row(self, text, bos, eos):
        """``(steps, row)`` of one sentence: ``row`` is ``(tokens,
        inputs, targets, oov, context_oov)``, the scored tokens, the
        model's inputs and the targets they predict."""
        tokens, ids, oov = self.encode(text)
        if eos:
            tokens = [*tokens, self.vocab.eos_token]
            ids = np.append(ids, self._eos_id()).astype(np.int32)
            oov = [*oov, False]
        ids = np.asarray(ids, np.int32)
        if bos:
            inputs = np.concatenate([[self._bos_id()], ids])[: len(ids)]
            row = (tokens, inputs.astype(np.int32), ids, oov, 0)
        else:
            ctx_oov = int(oov[0]) if oov else 0
            row = (tokens[1:], ids[:-1], ids[1:], oov[1:], ctx_oov)
        return len(row[1]), row

    def _score_rows(self, rows):
        """:class:`SentenceScore` of each row of a pass within the budget
        (:meth:`_sentence_row`)."""
        lns = self._padded_pass([r[1] for r in rows], [r[2] for r in rows])
        return [_sentence_score(r, ln) for r, ln in zip(rows, lns)]

    def _padded_pass(self, inputs, targets, states=None, width=None):
        """ln probs of ragged (inputs, targets) rows in one pass, from
        ``states`` (default: the initial ones), right-padded to ``width``
        (default: the longest row's bucket)."""
        lengths = [len(x) for x in inputs]
        if max(lengths) == 0:
            return [np.zeros(0) for _ in inputs]
        width = width or bucket_length(max(lengths), self.time_buckets)
        rows = len(inputs)
        if states is None:  # empty rows up to a bucketed count
            rows = self.budget.padded_rows(rows, width)
            states = self.inference.initial_states(rows)
        x = np.zeros((rows, width), np.int32)
        y = np.zeros((rows, width), np.int32)
        for i, n in enumerate(lengths):
            x[i, :n] = inputs[i]
            y[i, :n] = targets[i]
        # the output head runs at the real tokens only
        positions = real_positions(lengths, width)
        ln, _ = self._at_positions(x, y, states, positions)
        return np.split(ln, np.cumsum(lengths)[:-1])

    def _score_long(self, row):
        """One row over the budget: windows of at most
        :attr:`max_batch_tokens` steps, the states carried; the last
        window padded to its bucket (its final state is not needed)."""
        _, inputs, targets, _, _ = row
        budget = self.budget
        windows = budget.windows(len(inputs))
        states = self.inference.initial_states(1)
        ln = []
        for a, b in windows[:-1]:
            lp, states = self._run(
                inputs[None, a:b], targets[None, a:b], states
            )
            ln.append(lp[0])
        a, b = windows[-1]
        width = budget.tail_width(b - a)
        ln += self._padded_pass([inputs[a:b]], [targets[a:b]], states, width)
        return _sentence_score(row, np.concatenate(ln))


def _sentence_score(row, ln):
    tokens, _, _, oov, ctx_oov = row
    return SentenceScore(list(tokens), ln, list(oov), ctx_oov)


def run_sentence_rule(config):
    """The sentence rule of a sentence-level run (``data.state_reset =
    "sentence"``): its corpus's, as in training
    (:func:`~keras_rnnlm.data.sentences.sentence_rule` of the corpus's
    registry name; a corpus directory is read a line a sentence);
    ``None`` for any other run."""
    if config.data.state_reset != "sentence":
        return None
    name = str(config.data.corpus)
    if name in CORPORA or not os.path.isdir(name):
        try:
            name = get_corpus_spec(name).name
        except UnknownCorpusError:
            pass
    return sentence_rule(name)


def _context_id(vocab, tokenization):
    if vocab.eos_id is not None:
        return vocab.eos_id
    space = tokenization.space_token or " "
    if space in vocab:
        return vocab.token_to_id(space)
    return None


def token_log_probs(inference, inputs, targets, states, positions=None):
    """ln p(targets | inputs, states) per position, and the final states.

    Backend-agnostic (``keras.ops``); shared by the Python scorer and the
    exported SavedModel endpoints.

    Args:
        positions: optional int32 flat indices into ``batch * time`` of
            the positions to score (e.g. the real tokens of a padded
            batch): the output head runs there only, and the other
            positions get 0.
    """
    if positions is None:
        logits, final = inference(inputs, states)
        return -_token_nll(inference, targets, logits), final
    ln, final = position_log_probs(
        inference, inputs, targets, states, positions
    )
    shape = ops.shape(targets)
    ln = ops.scatter(ops.expand_dims(positions, -1), ln, (shape[0] * shape[1],))
    return ops.reshape(ln, shape), final


def position_log_probs(inference, inputs, targets, states, positions):
    """ln p(target) at the flat ``positions`` into ``batch * time`` only
    (``(n,)``, in their order; a position may be repeated), and the final
    states: the output head runs at those positions only."""
    logits, final = inference.at_positions(inputs, positions, states)
    targets_at = ops.take(ops.reshape(targets, (-1,)), positions)
    return -_token_nll(inference, targets_at, logits), final


def _token_nll(inference, targets, logits):
    # token_nll's fused TensorFlow form (the softmax kernel and -log p)
    # unless the graph must stay free of XLA functions.
    fused = not getattr(inference, "portable", False)
    return token_nll(targets, logits, fused=fused)


def real_positions(lengths, width):
    """Flat indices (int32) of the first ``lengths[b]`` steps of each row
    of a ``(len(lengths), width)`` batch (NumPy)."""
    lengths = np.asarray(lengths, np.int64)
    mask = np.arange(width)[None, :] < lengths[:, None]
    return np.flatnonzero(mask).astype(np.int32)


def _make_scoring_fn(inference):
    """``fn(inputs, targets, states, positions)`` ->
    :func:`position_log_probs`, one traced graph on TensorFlow."""

    def fn(inputs, targets, states, positions):
        return position_log_probs(
            inference, inputs, targets, list(states), positions
        )

    if keras.backend.backend() != "tensorflow":
        return fn
    import tensorflow as tf  # TensorFlow backend only

    spec = tf.TensorSpec([None, None], tf.int32)
    state_specs = [
        tf.TensorSpec([None, *s], tf.float32) for s in inference.state_shapes
    ]
    compiled = tf.function(
        fn,
        input_signature=[
            spec,
            spec,
            state_specs,
            tf.TensorSpec([None], tf.int32),
        ],
        autograph=False,
    )

    def call(inputs, targets, states, positions):
        return compiled(
            tf.convert_to_tensor(inputs, tf.int32),
            tf.convert_to_tensor(targets, tf.int32),
            [tf.convert_to_tensor(s, tf.float32) for s in states],
            tf.convert_to_tensor(positions, tf.int32),
        )

    return call
