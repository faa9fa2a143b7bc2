"""One object for a trained language model, from a run directory or an
export: scoring, next-token distributions, text generation, export.

    from keras_rnnlm import LanguageModel

    lm = LanguageModel.from_run("runs/zaremba_ptb_200")
    lm.score("the company said its profit rose")         # log10 p (KenLM)
    lm.next_token_logprobs("the company said")          # ln p, (vocab,)
    lm.generate("the company", max_tokens=20, sampler="top_p", seed=1)
    lm.export("models/ptb_lm/1")

The conventions are keras-hub's ``CausalLM`` where they fit:
constructors named for their source (:meth:`LanguageModel.from_run`,
:meth:`LanguageModel.from_export`, :meth:`LanguageModel.load` for
either), ``generate(prompts, max_tokens, sampler=...)`` with a sampler
object or its name (:mod:`keras_rnnlm.generation.samplers`), a string in
giving a string out and a list a list. Scoring has the KenLM semantics
of :mod:`keras_rnnlm.scoring.scorer` and is the scorer's own
(:class:`~keras_rnnlm.scoring.Scorer` for a run,
:class:`~keras_rnnlm.scoring.SavedModelScorer` for an export).
"""

import math
import os
import secrets

import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import CacheConfig
from keras_rnnlm.export import export_saved_model
from keras_rnnlm.export.generate import generations as export_generations
from keras_rnnlm.generation import GenerationError
from keras_rnnlm.generation import GenerationLoop
from keras_rnnlm.generation import get_sampler
from keras_rnnlm.generation import reset_token_ids
from keras_rnnlm.generation.samplers import MAX_SEED
from keras_rnnlm.generation.samplers import check_seed
from keras_rnnlm.generation.text import DEFAULT_MAX_TOKENS
from keras_rnnlm.generation.text import Generation
from keras_rnnlm.generation.text import check_max_tokens
from keras_rnnlm.generation.text import check_num_samples
from keras_rnnlm.generation.text import detokenize
from keras_rnnlm.scoring.loading import SavedModelScorer
from keras_rnnlm.scoring.loading import load_scorer
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.tokenization import sentence_text
from keras_rnnlm.scoring.tokenization import sentence_texts

#: ``stop_token``'s default: ``<eos>`` for a word-level model, none for a
#: character-level one.
AUTO = "auto"


class LanguageModel:
    """A trained language model: scoring and generation.

    Build one with :meth:`from_run`, :meth:`from_export` or :meth:`load`.

    Args:
        scorer: a :class:`~keras_rnnlm.scoring.Scorer` (a run) or a
            :class:`~keras_rnnlm.scoring.SavedModelScorer` (an export).
        path: where it was loaded from.
        weights: the weights file of a run (``None``: its best weights).
    """

    def __init__(self, scorer, path=None, weights=None):
        if not isinstance(scorer, (Scorer, SavedModelScorer)):
            raise TypeError(
                f"Expected a Scorer or SavedModelScorer, got "
                f"{type(scorer).__name__}"
            )
        self.scorer = scorer
        self.path = None if path is None else os.fspath(path)
        self.weights = weights
        self._loop = None

    # ----------------------------------------------------------- loading
    @classmethod
    def from_run(cls, path, weights=None):
        """The model of a run directory (``config.json``, ``vocab.json``,
        ``best.weights.h5`` or ``weights``)."""
        return cls(Scorer.from_run(path, weights=weights), path, weights)

    @classmethod
    def from_export(cls, path):
        """An exported SavedModel (``keras-rnnlm export``)."""
        return cls(SavedModelScorer(os.fspath(path)), path)

    @classmethod
    def load(cls, path, weights=None):
        """A run directory or an export, whichever ``path`` holds (as
        ``keras-rnnlm score`` reads its MODEL)."""
        return cls(load_scorer(path, weights=weights), path, weights)

    @property
    def is_export(self):
        """Whether the model was loaded from an export."""
        return isinstance(self.scorer, SavedModelScorer)

    @property
    def vocab(self):
        """The :class:`~keras_rnnlm.data.Vocabulary` (a run's)."""
        self._require_run("the vocabulary object")
        return self.scorer.vocab

    @property
    def vocabulary_size(self):
        if self.is_export:
            return int(self.scorer.metadata["vocab_size"])
        return len(self.scorer.vocab)

    def __repr__(self):
        kind = "export" if self.is_export else "run"
        return f"LanguageModel.from_{kind}({self.path!r})"

    # ----------------------------------------------------------- scoring
    def score_sentences(self, sentences, bos=True, eos=True):
        """A :class:`~keras_rnnlm.scoring.SentenceScore` per sentence
        (an export scores with ``bos=True, eos=True`` only)."""
        return self.scorer.score_sentences(sentences, bos, eos)

    def score(self, sentence, bos=True, eos=True, natural_log=False):
        """The log10 (or natural log) probability of a sentence."""
        return self.scorer.score(sentence, bos, eos, natural_log)

    def full_scores(self, sentence, bos=True, eos=True, natural_log=False):
        """``[(log prob, is_oov), ...]``, one per scored token."""
        r = self.score_sentences([sentence], bos, eos)[0]
        return r.full_scores(natural_log)

    def perplexity(self, sentence, bos=True, eos=True):
        """``10 ** (-score / scored tokens)``."""
        return self.scorer.perplexity(sentence, bos, eos)

    def next_token_logprobs(self, prompts):
        """The natural-log distribution of the token after each prompt
        (after the sentence start and the prompt's tokens, as
        ``generate`` continues it): ``(vocab,)`` float32 for one prompt
        (a string), ``(len(prompts), vocab)`` for a list."""
        single = isinstance(prompts, (str, bytes, bytearray))
        texts = [sentence_text(prompts)] if single else sentence_texts(prompts)
        if self.is_export:
            out = self._export_next_token_logprobs(texts)
        else:
            out = np.stack([self._next_log_probs(t) for t in texts])
        return out[0] if single else out

    def _next_log_probs(self, text):
        scorer = self.scorer
        inference = scorer.inference
        state, _ = scorer.continue_(scorer.begin(), text)
        states = state.states
        if state.last_token in set(self._reset_ids()):
            # a sentence-level run: the states restart before a sentence
            initial = inference.initial_states(1)
            states = [
                s if kind == "token_ids" else s0
                for s, s0, kind in zip(states, initial, inference.state_kinds)
            ]
        logits, _ = inference(np.array([[state.last_token]], np.int32), states)
        logits = ops.convert_to_numpy(logits)[0, -1].astype(np.float64)
        top = logits.max()
        log_probs = logits - (top + math.log(np.exp(logits - top).sum()))
        return log_probs.astype(np.float32)

    def _export_next_token_logprobs(self, texts):
        import tensorflow as tf  # an export is a TensorFlow SavedModel

        fn = self.scorer.model.signatures["next_token_logprobs"]
        out = []
        for start in range(0, len(texts), self.scorer.batch_size):
            stop = start + self.scorer.batch_size
            chunk = [t.encode("utf-8") for t in texts[start:stop]]
            r = fn(prefixes=tf.constant(chunk, tf.string))
            out.append(r["log_probs"].numpy())
        width = self.vocabulary_size
        return np.concatenate(out) if out else np.zeros((0, width))

    # -------------------------------------------------------- generation
    def generate(
        self,
        prompts,
        max_tokens=DEFAULT_MAX_TOKENS,
        sampler="greedy",
        seed=None,
        stop_token=AUTO,
        num_samples=1,
        cache=None,
        details=False,
    ):
        """Continues each prompt with up to ``max_tokens`` tokens.

        Each prompt is tokenised as scoring does (out-of-vocabulary words
        are ``<unk>``) and read after the sentence start (``<eos>``): an
        empty prompt starts a sentence. A prompt of any length is read
        whole, its state carried. The recurrent state (and a CBOW
        context's, and the cache's memory) is carried step by step inside
        one compiled loop (:mod:`keras_rnnlm.generation.loop`).

        Args:
            prompts: a string, or a list of strings.
            max_tokens: tokens per continuation at most, in ``[0,
                MAX_TOKENS_LIMIT]`` (0: empty continuations).
            sampler: a :class:`~keras_rnnlm.generation.Sampler` or its
                name (``"greedy"``, ``"random"``, ``"top_k"``,
                ``"top_p"``; :func:`~keras_rnnlm.generation.get_sampler`).
            seed: an int in ``[0, MAX_SEED]``: the same seed gives the
                same continuations (``None``: a fresh seed, reported in
                ``details``).
            stop_token: the token that ends a continuation (``"auto"``:
                ``<eos>`` for a word-level model, none for a
                character-level one; ``None``: none).
            num_samples: continuations per prompt.
            cache: a continuous cache pointer
                (:class:`~keras_rnnlm.cache_pointer.CacheConfig` or its
                text, ``"ptb"``, ``"window=W,theta=T,lambda=L"``) mixed
                into every step's distribution, its memory starting with
                the prompt.
            details: return :class:`~keras_rnnlm.generation.text.
                Generation` objects (tokens, their log-probabilities, why
                each ended) instead of text.

        Returns:
            For a string prompt: its continuation (a list of
            ``num_samples`` of them if ``num_samples > 1``); for a list,
            a list of those.

        Raises:
            GenerationError: a bad argument (its ``argument`` names it).
        """
        single = isinstance(prompts, (str, bytes, bytearray))
        texts = [sentence_text(prompts)] if single else sentence_texts(prompts)
        max_tokens = check_max_tokens(max_tokens)
        num_samples = check_num_samples(num_samples, len(texts))
        sampler = get_sampler(sampler)
        sampler.check_vocabulary(self.vocabulary_size)
        seed = secrets.randbelow(MAX_SEED + 1) if seed is None else seed
        seed = check_seed(seed)
        cache = _cache_config(cache)
        rows, results = [], []
        if self.is_export:
            # the export's generate signature
            results = self._export_generations(
                texts, max_tokens, sampler, seed, stop_token, num_samples, cache
            )
        else:
            stop_id = self._stop_id(stop_token)
            vocab = self.scorer.vocab
            bos = self.scorer.begin().last_token
            for text in texts:
                _, ids, _ = self.scorer.encode(text)
                rows += [[bos, *(int(i) for i in ids)]] * num_samples
        if rows:
            out = self._generation_loop()(
                rows, sampler, max_tokens, seed, stop_id, cache
            )
            for row in range(len(rows)):
                n = int(out["num_tokens"][row])
                ids = [int(i) for i in out["token_ids"][row, :n]]
                tokens = vocab.decode(ids) if ids else []
                results.append(
                    Generation(
                        prompt=texts[row // num_samples],
                        text=detokenize(
                            tokens, self.scorer.tokenization, vocab.eos_token
                        ),
                        tokens=tokens,
                        token_ids=ids,
                        log_probs=np.asarray(out["log_probs"][row, :n]),
                        finish_reason=(
                            "stop" if out["stopped"][row] else "length"
                        ),
                        seed=seed,
                    )
                )
        if not details:
            results = [g.text for g in results]
        if num_samples > 1:
            results = [
                results[i : i + num_samples]
                for i in range(0, len(results), num_samples)
            ]
        return results[0] if single else results

    def _export_generations(self, texts, max_tokens, sampler, seed,
                            stop_token, num_samples, cache):  # fmt: skip
        """The continuations of the export's ``generate`` signature
        (:mod:`keras_rnnlm.export.generate`), the same as the run's for
        the same seed."""
        if cache is not None:
            raise GenerationError(
                "cache",
                "the export's generate signature has no cache; generate "
                "with the cache from the run directory",
            )
        if stop_token is None:
            stop_token = ""
        elif isinstance(stop_token, str) and stop_token == AUTO:
            word_level = self.scorer.tokenization.mode == "whitespace"
            eos = self.scorer.metadata.get("eos_token")
            stop_token = eos if word_level and eos else ""
        elif not isinstance(stop_token, str) or not stop_token:
            raise GenerationError(
                "stop_token",
                f"{stop_token!r} is not a token of the vocabulary "
                f"({self.vocabulary_size} tokens)",
            )
        return export_generations(
            self.scorer.model,
            texts,
            max_tokens,
            sampler,
            seed,
            stop_token,
            num_samples,
        )

    def _stop_id(self, stop_token):
        vocab = self.scorer.vocab
        if stop_token is None:
            return -1
        if isinstance(stop_token, str) and stop_token == AUTO:
            word_level = self.scorer.tokenization.mode == "whitespace"
            if word_level and vocab.eos_id is not None:
                return vocab.eos_id
            return -1
        if not isinstance(stop_token, str) or stop_token not in vocab:
            raise GenerationError(
                "stop_token",
                f"{stop_token!r} is not a token of the vocabulary "
                f"({len(vocab)} tokens)",
            )
        return vocab.token_to_id(stop_token)

    def _reset_ids(self):
        return reset_token_ids(self.scorer.vocab, self.scorer.sentence_reset)

    def _generation_loop(self):
        if self._loop is None:
            # a character-level model's loop runs as one XLA program
            # (GenerationLoop's whole_program, measured there)
            self._loop = GenerationLoop(
                self.scorer.inference,
                self._reset_ids(),
                whole_program=self.scorer.tokenization.mode != "whitespace",
            )
        return self._loop

    # ------------------------------------------------------------ export
    def export(self, path, **kwargs):
        """Exports the run as a SavedModel at ``path`` (``OUT/NAME/
        VERSION``; ``kwargs``: those of
        :func:`~keras_rnnlm.export.export_saved_model`); returns
        ``path``."""
        self._require_run("export")
        if self.path is None:  # built from a Scorer
            return export_saved_model(self.scorer, path, **kwargs)
        return export_saved_model(
            self.path, path, weights=self.weights, **kwargs
        )

    def _require_run(self, what):
        if self.is_export:
            raise ValueError(
                f"{what} needs a run directory; {self.path} is an export"
            )


def _cache_config(cache):
    if cache is None:
        return None
    if not isinstance(cache, CacheConfig):
        try:
            cache = CacheConfig.parse(cache)
        except ValueError as e:
            raise GenerationError("cache", str(e)) from None
    if cache.reference:
        raise GenerationError(
            "cache",
            "reference=1 (awd-lstm-lm's evaluation start) does not apply "
            "to generation, which uses the cache from the second token on",
        )
    return cache
