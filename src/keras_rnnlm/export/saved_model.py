"""TensorFlow SavedModel export of a scorer, laid out for TF Serving.

``export_saved_model(run_dir, "models/ptb_lm/1")`` writes a SavedModel
through ``keras.export.ExportArchive`` with these **stateless** endpoints
(every input and output a named tensor; see ``export/README.md``):

``score_text`` (also ``serving_default``)
    ``sentences`` (string ``[B]``) -> ``log10_prob``, ``ln_prob`` (float32
    ``[B]``), ``num_tokens`` (scored tokens, ``<eos>`` included),
    ``num_oov``, ``lengths`` (int32 ``[B]``, = ``num_tokens``) and
    ``token_logprobs`` (float32 ``[B, T]``, natural log, zero-padded after
    ``lengths``), ``token_is_oov`` (bool ``[B, T]``) and ``tokens``
    (string ``[B, T]``, ``<eos>`` last). Sentences are scored with
    ``bos=True, eos=True``
    (:mod:`keras_rnnlm.scoring.scorer`). Tokenisation runs in the graph:
    ``tensorflow_text.WhitespaceTokenizer`` for word models, Unicode
    characters for character models, then a vocabulary table read from the
    ``vocab.txt`` asset with OOV tokens mapped to ``<unk>`` and counted.
``score_ids``
    ``token_ids`` (int32 ``[B, T]``, the sentence tokens without
    ``<eos>``, right-padded) and ``lengths`` (int32 ``[B]``) -> the same
    outputs; ``num_oov`` counts ``<unk>`` ids. Ids outside the vocabulary
    are an error.
``next_token_logprobs``
    ``prefixes`` (string ``[B]``) -> ``log_probs`` (float32 ``[B, V]``,
    natural log, of the token after ``<eos>`` + prefix), ``top_k_ids``,
    ``top_k_logprobs``, ``top_k_tokens`` (``[B, k]``).
``initial_state`` / ``step``
    ``initial_state(batch_size)`` -> zero states ``state_{layer}_{k}`` and
    ``bos_ids`` (``[B]``, the token to feed first); ``step(token_ids [B, T],
    state_...)`` -> ``log_probs`` (``[B, T, V]``, the distribution after
    each input token) and the new states. Streaming clients keep the state.
``step_with_keys``
    ``step`` that also returns ``keys`` (float32 ``[B, T, key_dim]``, the
    last recurrent layer's output at each input: the continuous cache's
    keys, kept by the client, :mod:`keras_rnnlm.export.stream_cache`).
    A CBOW context's state (``state_kinds`` ``"token_ids"``: the last K
    word ids, float32, ``-1`` for none) is one of them, checked to hold
    whole numbers in ``[-1, V)``.
``generate``
    ``prompts`` (string ``[B]``) and the sampling parameters ->
    continuations sampled by :mod:`keras_rnnlm.generation`'s loop and
    samplers in the graph (:mod:`keras_rnnlm.export.generate`): the
    text of ``LanguageModel.from_run(...).generate`` for the same seed.

``assets/keras_rnnlm.json`` (``format_version`` 2) lists the endpoints.
The export also writes ``assets.extra/tf_serving_warmup_requests``
(:mod:`keras_rnnlm.export.warmup`), the requests TF Serving replays when it
loads the version: every signature, the time buckets up to the token
budget.

Every endpoint checks its inputs in the graph before tokenising or running
a loop: the rank of each input (``EnsureShape``), a non-empty batch of at
most ``max_batch_size`` rows, and ``rows x padded length <= max_tokens``
(the token budget that bounds the memory of one call); a failed check is
an INVALID_ARGUMENT error, and a wrong dtype is refused by the function
call itself. The default export runs the recurrent layers' generic loop,
with no XLA-must-compile function, so that a stock ``tensorflow_model_server``
runs it; ``xla=True`` exports the fused XLA-compiled loop.

The graph is built from a *stateless* model (the builder with
``stateful=False``, weights copied) through
:func:`~keras_rnnlm.scoring.build_inference_model`: no training ops, no
dropout, no state variables. Export on a CPU-only context so that no
cuDNN-only op is baked in (:func:`export_saved_model` hides GPUs from
TensorFlow when it can and the tests check the graph has no ``CudnnRNN*``
op).
"""

import json
import os
import shutil
import tempfile

import keras
import numpy as np

from keras_rnnlm.export.generate import NEUTRAL
from keras_rnnlm.export.generate import GenerateEndpoint
from keras_rnnlm.export.generate import input_specs as generate_specs
from keras_rnnlm.export.tensorflow_only import require_tensorflow
from keras_rnnlm.export.warmup import DEFAULT_WARMUP_MAX_LENGTH
from keras_rnnlm.export.warmup import WARMUP_FILE
from keras_rnnlm.export.warmup import warmup_lengths
from keras_rnnlm.export.warmup import warmup_requests
from keras_rnnlm.export.warmup import write_warmup_file
from keras_rnnlm.generation import SAMPLERS
from keras_rnnlm.generation import reset_token_ids
from keras_rnnlm.generation.samplers import MAX_SEED
from keras_rnnlm.generation.text import MAX_TOKENS_LIMIT
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.scorer import token_log_probs

ENDPOINTS = (
    "score_text",
    "score_ids",
    "next_token_logprobs",
    "initial_state",
    "step",
    "step_with_keys",
    "generate",
)
VOCAB_ASSET = "vocab.txt"
# Python's str.split()/str.isspace() whitespace, as an RE2 class. The text is
# normalised to ASCII spaces with it before tokenising: WhitespaceTokenizer
# does not split on U+001C..U+001F and keeps a stray byte of multi-byte
# spaces (U+00A0, U+2000..) in the token before them.
WHITESPACE_RE = (
    r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+"
)
METADATA_ASSET = "keras_rnnlm.json"
# The default limits of one call of an endpoint (rows, and rows x padded
# length): with a 10k-word vocabulary, 8192 tokens keep the output head's
# float32 logits near 330 MB.
MAX_BATCH_SIZE = 1024
MAX_TOKENS = 8192


def _tf():
    return require_tensorflow("SavedModel export")


def _write_vocab(vocab, path):
    for t in vocab:
        if not t or "\n" in t or "\r" in t:
            raise ValueError(
                f"Vocabulary token {t!r} cannot be written one per line to "
                f"{VOCAB_ASSET}"
            )
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))


class _Graph:
    """The TensorFlow functions behind the endpoints."""

    def __init__(self, scorer, vocab_path, top_k, limits):
        tf = _tf()
        import tensorflow_text as tf_text  # only for word-level exports

        self.tf, self.tf_text = tf, tf_text
        self.inference = scorer.inference
        vocab = scorer.vocab
        self.vocab_size = len(vocab)
        self.unk_id = vocab.unk_id
        self.eos_id = vocab.eos_id
        self.bos_id = scorer._context_id
        self.tokenization = scorer.tokenization
        self.top_k = min(int(top_k), len(vocab))
        self.time_buckets = scorer.time_buckets
        self.max_batch_size = int(limits["max_batch_size"])
        self.max_tokens = int(limits["max_tokens"])
        self.reset_ids = reset_token_ids(vocab, scorer.sentence_reset)
        init = tf.lookup.TextFileInitializer(
            vocab_path,
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        self.table = tf.lookup.StaticHashTable(init, default_value=-1)
        self.tokens = tf.constant(vocab.tokens)
        if self.tokenization.mode == "whitespace":
            self.tokenizer = tf_text.WhitespaceTokenizer()
        self.generate = GenerateEndpoint(self)

    # -------------------------------------------------- input validation
    # Every endpoint checks its inputs before tokenising or running a loop:
    # the signatures are only a promise (a served graph can be fed any
    # shape), and a scalar string reaching the tokenizer crashed the
    # process. A failed check is an INVALID_ARGUMENT error naming the input.
    def _rank(self, x, shape, name):
        """``x`` with its rank checked at run time (``EnsureShape``: "Shape
        of tensor NAME [] is not compatible with expected shape [?]")."""
        return self.tf.ensure_shape(x, [None] * len(shape), name=name)

    def _batch(self, batch, name):
        """Checks 1 <= batch <= max_batch_size; returns the checks."""
        tf = self.tf
        return [
            tf.debugging.assert_positive(
                batch, message=f"empty batch: {name} has no rows"
            ),
            tf.debugging.assert_less_equal(
                batch,
                self.max_batch_size,
                message=(
                    f"too many rows in {name}: the limit is "
                    f"{self.max_batch_size} per request (max_batch_size)"
                ),
            ),
        ]

    def _budget(self, batch, width, name):
        """Checks batch * width <= max_tokens (the token budget that bounds
        the memory of one call); returns the check."""
        tf = self.tf
        return tf.debugging.assert_less_equal(
            tf.cast(batch, tf.int64) * tf.cast(width, tf.int64),
            tf.constant(self.max_tokens, tf.int64),
            message=(
                f"{name}: batch x padded length exceeds the token budget "
                f"of {self.max_tokens} (max_tokens); send fewer or shorter "
                "rows per request"
            ),
        )

    def _after(self, checks, *tensors):
        tf = self.tf
        with tf.control_dependencies(checks):
            out = [tf.identity(t) for t in tensors]
        return out[0] if len(out) == 1 else out

    def _strings(self, x, name):
        x = self._rank(x, ["B"], name)
        batch = self.tf.shape(x)[0]
        return self._after(self._batch(batch, name), x)

    # ------------------------------------------------------- text -> ids
    def tokenize(self, sentences):
        tf = self.tf
        s = tf.strings.unicode_transcode(
            sentences,
            "UTF-8",
            "UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
        )
        s = tf.strings.regex_replace(s, "\n+$", "")
        if self.tokenization.mode == "whitespace":
            s = tf.strings.regex_replace(s, WHITESPACE_RE, " ")
            return self.tokenizer.tokenize(s)
        space = self.tokenization.space_token
        if space is not None:
            s = tf.strings.regex_replace(s, WHITESPACE_RE, " ")
            s = tf.strings.strip(s)
        chars = tf.strings.unicode_split(s, "UTF-8", errors="replace")
        if space is not None:
            chars = tf.ragged.map_flat_values(
                lambda c: tf.where(c == " ", space, c), chars
            )
        return chars

    def lookup(self, tokens):
        """Ragged strings -> (ragged int32 ids, ragged bool oov)."""
        tf = self.tf
        ids = tf.ragged.map_flat_values(
            lambda t: tf.cast(self.table.lookup(t), tf.int32), tokens
        )
        oov = tf.ragged.map_flat_values(lambda i: i < 0, ids)
        fill = self.unk_id if self.unk_id is not None else 0
        ids = tf.ragged.map_flat_values(lambda i: tf.where(i < 0, fill, i), ids)
        return ids, oov

    # ------------------------------------------------------------ scoring
    def _bos_eos(self):
        if self.bos_id is None or self.eos_id is None:
            raise ValueError(
                "score endpoints need <eos> (and a start context) in the "
                "vocabulary"
            )
        return self.bos_id, self.eos_id

    def bucket_length(self, t):
        """In-graph :func:`keras_rnnlm.scoring.scorer.bucket_length`."""
        tf = self.tf
        buckets = self.time_buckets
        step = tf.constant(buckets[-1][1], tf.int32)
        for limit, size in reversed(buckets[:-1]):
            step = tf.where(t <= limit, size, step)
        return (t + step - 1) // step * step

    def initial_states(self, batch):
        """The layers' initial states (zeros except, e.g., a multi-cell
        LSTM's distinct initial cells), tiled to ``batch``."""
        tf = self.tf
        return [
            tf.broadcast_to(
                tf.constant(value[None]),
                tf.concat([[batch], list(value.shape)], 0),
            )
            for value in self.inference.initial_values
        ]

    def score_ragged(self, ids, oov, strings=None, name="sentences"):
        """Scores ragged id rows with bos/eos; returns the output dict."""
        tf = self.tf
        bos, eos = self._bos_eos()
        batch = ids.nrows(out_type=tf.int32)
        lengths = tf.cast(ids.row_lengths(), tf.int32) + 1
        col = tf.fill(tf.stack([batch, 1]), 0)
        inputs = tf.concat([col + bos, ids], axis=1)
        targets = tf.concat([ids, col + eos], axis=1)
        t = tf.reduce_max(tf.concat([lengths, [0]], 0))
        padded_t = self.bucket_length(t)
        shape = tf.stack([batch, padded_t])
        budget = self._budget(batch, padded_t, name)
        inputs, targets = self._after([budget], inputs, targets)
        x = inputs.to_tensor(0, shape=shape)
        y = targets.to_tensor(0, shape=shape)
        # The output head (half of a word model's work per position) runs
        # at the real tokens only, not at the padding.
        real = tf.sequence_mask(lengths, padded_t)
        positions = tf.cast(tf.where(tf.reshape(real, [-1]))[:, 0], tf.int32)
        ln, _ = token_log_probs(
            self.inference, x, y, self.initial_states(batch), positions
        )
        ln = ln[:, :t]
        mask = tf.sequence_mask(lengths, t)
        oov_dense = tf.concat([oov, tf.cast(col, tf.bool)], 1).to_tensor(
            False, shape=tf.stack([batch, t])
        )
        if self.unk_id is None:
            # No <unk>: an unknown token has probability 0 under the model.
            ln = tf.where(oov_dense, -np.inf, ln)
        if strings is None:
            strings = tf.gather(self.tokens, targets.to_tensor(0))
        else:
            eos_col = tf.fill(tf.stack([batch, 1]), self.tokens[eos])
            strings = tf.concat([strings, eos_col], 1).to_tensor("")
        strings = tf.where(mask, strings[:, :t], "")
        ln = tf.where(mask, ln, 0.0)
        total = tf.reduce_sum(tf.cast(ln, tf.float64), axis=1)
        num_oov = tf.reduce_sum(tf.cast(oov, tf.int32), axis=1)
        return {
            "log10_prob": tf.cast(total / np.log(10.0), tf.float32),
            "ln_prob": tf.cast(total, tf.float32),
            "num_tokens": lengths,
            "num_oov": num_oov,
            "lengths": lengths,
            "token_logprobs": ln,
            "token_is_oov": oov_dense,
            "tokens": strings,
        }

    def score_text(self, inputs):
        sentences = self._strings(inputs["sentences"], "sentences")
        tokens = self.tokenize(sentences)
        ids, oov = self.lookup(tokens)
        return self.score_ragged(ids, oov, tokens)

    def score_ids(self, inputs):
        tf = self.tf
        token_ids = self._rank(inputs["token_ids"], ["B", "T"], "token_ids")
        lengths = self._rank(inputs["lengths"], ["B"], "lengths")
        batch = tf.shape(token_ids)[0]
        checks = self._batch(batch, "token_ids") + [
            tf.debugging.assert_equal(
                tf.shape(lengths)[0],
                batch,
                message="lengths must have one entry per token_ids row",
            )
        ]
        token_ids, lengths = self._after(checks, token_ids, lengths)
        checks = [
            tf.debugging.assert_less_equal(
                lengths,
                tf.shape(token_ids)[1],
                message="lengths exceed the token_ids width",
            ),
            tf.debugging.assert_non_negative(
                lengths, message="negative lengths"
            ),
        ]
        with tf.control_dependencies(checks):
            ids = tf.RaggedTensor.from_tensor(token_ids, lengths=lengths)
        checks = [
            tf.debugging.assert_non_negative(
                ids.flat_values, message="negative token id"
            ),
            tf.debugging.assert_less(
                ids.flat_values,
                self.vocab_size,
                message=f"token id >= vocabulary size {self.vocab_size}",
            ),
        ]
        with tf.control_dependencies(checks):
            ids = tf.ragged.map_flat_values(tf.identity, ids)
        unk = -1 if self.unk_id is None else self.unk_id
        oov = tf.ragged.map_flat_values(lambda i: tf.equal(i, unk), ids)
        return self.score_ragged(ids, oov, name="token_ids")

    def next_token_logprobs(self, inputs):
        tf = self.tf
        prefixes = self._strings(inputs["prefixes"], "prefixes")
        ids, _ = self.lookup(self.tokenize(prefixes))
        bos, _ = self._bos_eos()
        batch = ids.nrows(out_type=tf.int32)
        col = tf.fill(tf.stack([batch, 1]), bos)
        x = tf.concat([col, ids], axis=1)
        last = tf.cast(x.row_lengths(), tf.int32) - 1
        width = self.bucket_length(tf.reduce_max(last) + 1)
        x = self._after([self._budget(batch, width, "prefixes")], x)
        x = x.to_tensor(0, shape=tf.stack([batch, width]))
        # The head runs at each row's last position only: [B, V] logits.
        positions = tf.range(batch) * width + last
        logits, _ = self.inference.at_positions(
            x, positions, self.initial_states(batch)
        )
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        top = tf.math.top_k(log_probs, k=self.top_k)
        return {
            "log_probs": log_probs,
            "top_k_ids": top.indices,
            "top_k_logprobs": top.values,
            "top_k_tokens": tf.gather(self.tokens, top.indices),
        }

    def initial_state(self, inputs):
        tf = self.tf
        batch = self._rank(inputs["batch_size"], [], "batch_size")
        batch = self._after(self._batch(batch, "batch_size"), batch)
        out = dict(zip(self.inference.state_names, self.initial_states(batch)))
        bos = self.bos_id if self.bos_id is not None else 0
        out["bos_ids"] = tf.fill(tf.reshape(batch, [1]), bos)
        return out

    def _id_state_checks(self, state, name):
        """A ``token_ids`` state (a CBOW context's last K words): whole
        numbers in ``[-1, vocab_size)``, ``-1`` for "no word yet"."""
        tf = self.tf
        return [
            # A cast round trip (NaN is never equal to it): no new op.
            tf.debugging.assert_equal(
                state,
                tf.cast(tf.cast(state, tf.int32), state.dtype),
                message=f"{name} holds token ids: whole numbers (or -1)",
            ),
            tf.debugging.assert_greater_equal(
                state,
                -1.0,
                message=f"{name} holds token ids: -1 (no word) or more",
            ),
            tf.debugging.assert_less(
                state,
                float(self.vocab_size),
                message=(
                    f"{name} holds token ids: id >= vocabulary size "
                    f"{self.vocab_size}"
                ),
            ),
        ]

    def step(self, inputs):
        tf = self.tf
        token_ids, states = self._step_inputs(inputs)
        logits, final = self.inference(token_ids, states)
        out = dict(zip(self.inference.state_names, final))
        out["log_probs"] = tf.nn.log_softmax(
            tf.cast(logits, tf.float32), axis=-1
        )
        return out

    def step_with_keys(self, inputs):
        """``step`` that also returns the continuous cache's keys (the
        last recurrent layer's output at each input, float32 ``[B, T,
        key_dim]``; :mod:`keras_rnnlm.export.stream_cache`)."""
        tf = self.tf
        token_ids, states = self._step_inputs(inputs)
        logits, keys, final = self.inference.with_keys(token_ids, states)
        out = dict(zip(self.inference.state_names, final))
        out["log_probs"] = tf.nn.log_softmax(
            tf.cast(logits, tf.float32), axis=-1
        )
        out["keys"] = tf.cast(keys, tf.float32)
        return out

    def _step_inputs(self, inputs):
        """``(token_ids, states)`` of a ``step`` call, checked."""
        tf = self.tf
        token_ids = self._rank(inputs["token_ids"], ["B", "T"], "token_ids")
        shape = tf.shape(token_ids)
        checks = self._batch(shape[0], "token_ids")
        checks.append(self._budget(shape[0], shape[1], "token_ids"))
        checks.append(
            tf.debugging.assert_positive(
                shape[1], message="token_ids has no column (T = 0)"
            )
        )
        checks.append(
            tf.debugging.assert_non_negative(
                token_ids, message="negative token id"
            )
        )
        checks.append(
            tf.debugging.assert_less(
                token_ids,
                self.vocab_size,
                message=f"token id >= vocabulary size {self.vocab_size}",
            )
        )
        states = []
        for name, dims, kind in zip(
            self.inference.state_names,
            self.inference.state_shapes,
            self.inference.state_kinds,
        ):
            state = self._rank(
                inputs[name], ["B"] + [str(d) for d in dims], name
            )
            checks.append(
                tf.debugging.assert_equal(
                    tf.shape(state),
                    tf.concat([shape[:1], list(dims)], 0),
                    message=f"{name} must be [B, {', '.join(map(str, dims))}]"
                    " with B the token_ids rows",
                )
            )
            if kind == "token_ids":
                checks.extend(self._id_state_checks(state, name))
            states.append(state)
        token_ids, *states = self._after(checks, token_ids, *states)
        return token_ids, states

    # -------------------------------------------------------- signatures
    def signatures(self):
        tf = self.tf
        state_specs = {
            name: tf.TensorSpec([None, *shape], tf.float32, name=name)
            for name, shape in zip(
                self.inference.state_names, self.inference.state_shapes
            )
        }
        ids = tf.TensorSpec([None, None], tf.int32, name="token_ids")
        return {
            "score_text": {
                "sentences": tf.TensorSpec([None], tf.string, name="sentences")
            },
            "score_ids": {
                "token_ids": ids,
                "lengths": tf.TensorSpec([None], tf.int32, name="lengths"),
            },
            "next_token_logprobs": {
                "prefixes": tf.TensorSpec([None], tf.string, name="prefixes")
            },
            "initial_state": {
                "batch_size": tf.TensorSpec([], tf.int32, name="batch_size")
            },
            "step": {"token_ids": ids, **state_specs},
            "step_with_keys": {"token_ids": ids, **state_specs},
            "generate": generate_specs(tf),
        }


def export_saved_model(
    source,
    path,
    *,
    weights=None,
    top_k=10,
    xla=False,
    portable=None,
    max_batch_size=MAX_BATCH_SIZE,
    max_tokens=MAX_TOKENS,
    overwrite=False,
    verbose=False,
    warmup=True,
    warmup_max_length=None,
):
    """Exports a run (or a :class:`Scorer`) as a servable SavedModel.

    Args:
        source: a run directory (``config.json``, ``vocab.json``,
            ``best.weights.h5``) or a :class:`~keras_rnnlm.scoring.Scorer`.
        path: output directory, e.g. ``models/ptb_lm/1`` (TF Serving wants
            ``MODEL_NAME/VERSION``; the last component should be a
            positive integer).
        weights: weights file of a run (default ``best.weights.h5``).
        top_k: number of candidates of ``next_token_logprobs``.
        xla: export the recurrent layers' fused XLA-compiled loop
            (functions marked ``_XlaMustCompile``: a stock
            ``tensorflow_model_server`` runs them only when started with
            ``--xla_cpu_compilation_enabled``). The default is the generic
            loop, which any TF Serving build runs (same numbers).
        portable: deprecated; ``portable=True`` is ``xla=False`` (the
            default) and ``portable=False`` is ``xla=True``.
        max_batch_size: rows per call of every endpoint (checked in the
            graph: INVALID_ARGUMENT above it).
        max_tokens: the token budget of one call, ``rows x padded
            length`` (checked in the graph before the recurrence): it
            bounds the peak memory of a call, which grows with tokens x
            vocabulary. Larger requests are refused, not chunked; a
            server splits its merged batches to fit (``keras-rnnlm
            serve`` does).
        overwrite: replace an existing export at ``path``.
        verbose: let Keras print the exported variables.
        warmup: write ``assets.extra/tf_serving_warmup_requests``, the
            requests TF Serving replays when it loads the version
            (:mod:`keras_rnnlm.export.warmup`: every signature, the time
            buckets up to the token budget).
        warmup_max_length: the longest padded length the warm-up requests
            reach (default :data:`DEFAULT_WARMUP_MAX_LENGTH`, at most
            ``max_tokens``).

    Returns:
        ``path``.
    """
    tf = _tf()
    scorer = (
        source
        if isinstance(source, Scorer)
        else Scorer.from_run(source, weights=weights)
    )
    if portable is not None:
        xla = not portable
    if int(max_batch_size) < 1 or int(max_tokens) < 1:
        raise ValueError("max_batch_size and max_tokens must be >= 1")
    limits = {
        "max_batch_size": int(max_batch_size),
        "max_tokens": int(max_tokens),
    }
    if xla and scorer.inference.portable:
        raise ValueError(
            "xla=True needs a Scorer whose inference model is not portable"
        )
    if not xla and not scorer.inference.portable:
        if scorer.model is None:
            raise ValueError(
                "the default (non-XLA) export needs a Scorer built from a "
                "Keras model, not from a fused InferenceModel; pass "
                "xla=True to export the fused loop"
            )
        scorer = Scorer(
            build_inference_model(scorer.model, portable=True),
            scorer.vocab,
            scorer.tokenization,
            scorer.batch_size,
            scorer.time_buckets,
            sentence_reset=scorer.sentence_reset,
        )
    requests, warmup_meta = None, None
    if warmup:
        if warmup_max_length is None:
            warmup_max_length = DEFAULT_WARMUP_MAX_LENGTH
        if int(warmup_max_length) < 1:
            raise ValueError("warmup_max_length must be >= 1")
        warmup_max = min(int(warmup_max_length), limits["max_tokens"])
        requests = warmup_requests(scorer, limits, max_length=warmup_max)
        warmup_meta = {
            "file": f"assets.extra/{WARMUP_FILE}",
            "records": len(requests),
            "lengths": warmup_lengths(scorer.time_buckets, warmup_max),
        }
    path = os.fspath(path)
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path} exists: choose a new version directory or replace "
                "it with --overwrite (overwrite=True)"
            )
        shutil.rmtree(path)
    version = os.path.basename(os.path.normpath(path))
    if not version.isdigit():
        print(
            f"keras-rnnlm: note: TF Serving expects MODEL/VERSION; {path!r} "
            "does not end in a version number"
        )
    tmp = tempfile.mkdtemp(prefix="keras_rnnlm_export_")
    try:
        vocab_path = os.path.join(tmp, VOCAB_ASSET)
        _write_vocab(scorer.vocab, vocab_path)
        meta_path = os.path.join(tmp, METADATA_ASSET)
        with open(meta_path, "w") as f:
            meta = _metadata(scorer, xla, limits)
            meta["warmup"] = warmup_meta
            json.dump(meta, f, indent=2)
        with tf.device("/CPU:0"):
            graph = _Graph(scorer, vocab_path, top_k, limits)
            archive = keras.export.ExportArchive()
            archive.track(scorer.inference.model)
            archive.track(graph.table)
            archive._tf_trackable.metadata_asset = tf.saved_model.Asset(
                meta_path
            )
            for name, spec in graph.signatures().items():
                archive.add_endpoint(
                    name, getattr(graph, name), input_signature=[spec]
                )
            archive.write_out(path, verbose=verbose)
        if requests is not None:
            write_warmup_file(path, requests)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _metadata(scorer, xla, limits):
    v = scorer.vocab
    return {
        "format": "keras_rnnlm.saved_model",
        "format_version": 2,
        "xla": bool(xla),
        "limits": dict(limits),
        "endpoints": list(ENDPOINTS),
        "vocab_size": len(v),
        "unk_token": v.unk_token if v.unk_id is not None else None,
        "eos_token": v.eos_token if v.eos_id is not None else None,
        "bos_context_id": scorer._context_id,
        "tokenization": scorer.tokenization.to_dict(),
        "state_names": scorer.inference.state_names,
        "state_shapes": [list(s) for s in scorer.inference.state_shapes],
        "state_kinds": list(scorer.inference.state_kinds),
        "key_dim": scorer.inference.key_dim,
        "time_buckets": [list(b) for b in scorer.time_buckets],
        "sentence_reset": scorer.sentence_reset,
        "generate": {
            "samplers": list(SAMPLERS),
            "max_tokens_limit": MAX_TOKENS_LIMIT,
            "max_seed": MAX_SEED,
            "neutral": dict(NEUTRAL),
        },
    }
