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

from keras_rnnlm.scoring.inference_model import build_inference_model
from keras_rnnlm.scoring.scorer import Scorer
from keras_rnnlm.scoring.scorer import token_log_probs

ENDPOINTS = (
    "score_text",
    "score_ids",
    "next_token_logprobs",
    "initial_state",
    "step",
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


def _tf():
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "SavedModel export needs the TensorFlow backend "
            "(KERAS_BACKEND=tensorflow)"
        )
    import tensorflow as tf  # exports need TensorFlow; JAX installs may lack it

    return tf


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

    def __init__(self, scorer, vocab_path, top_k):
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

    def score_ragged(self, ids, oov, strings=None):
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
        tokens = self.tokenize(inputs["sentences"])
        ids, oov = self.lookup(tokens)
        return self.score_ragged(ids, oov, tokens)

    def score_ids(self, inputs):
        tf = self.tf
        token_ids = tf.cast(inputs["token_ids"], tf.int32)
        lengths = tf.cast(inputs["lengths"], tf.int32)
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
        return self.score_ragged(ids, oov)

    def next_token_logprobs(self, inputs):
        tf = self.tf
        ids, _ = self.lookup(self.tokenize(inputs["prefixes"]))
        bos, _ = self._bos_eos()
        batch = ids.nrows(out_type=tf.int32)
        col = tf.fill(tf.stack([batch, 1]), bos)
        x = tf.concat([col, ids], axis=1)
        last = tf.cast(x.row_lengths(), tf.int32) - 1
        x = x.to_tensor(0)
        logits, _ = self.inference(x, self.initial_states(batch))
        logits = tf.gather(logits, last, axis=1, batch_dims=1)
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
        batch = tf.cast(inputs["batch_size"], tf.int32)
        out = dict(zip(self.inference.state_names, self.initial_states(batch)))
        bos = self.bos_id if self.bos_id is not None else 0
        out["bos_ids"] = tf.fill(tf.reshape(batch, [1]), bos)
        return out

    def step(self, inputs):
        tf = self.tf
        states = [inputs[n] for n in self.inference.state_names]
        logits, final = self.inference(
            tf.cast(inputs["token_ids"], tf.int32), states
        )
        out = dict(zip(self.inference.state_names, final))
        out["log_probs"] = tf.nn.log_softmax(
            tf.cast(logits, tf.float32), axis=-1
        )
        return out

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
        }


def export_saved_model(
    source,
    path,
    *,
    weights=None,
    top_k=10,
    portable=False,
    overwrite=False,
    verbose=False,
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
        portable: export the recurrent layers' generic (non-XLA) loop
            instead of the fused XLA-compiled one (for serving binaries
            without XLA JIT; same numbers, slower).
        overwrite: replace an existing export at ``path``.
        verbose: let Keras print the exported variables.

    Returns:
        ``path``.
    """
    tf = _tf()
    scorer = (
        source
        if isinstance(source, Scorer)
        else Scorer.from_run(source, weights=weights)
    )
    if portable:
        if scorer.model is None:
            raise ValueError(
                "portable=True needs a Scorer built from a Keras model, not "
                "from an InferenceModel"
            )
        scorer = Scorer(
            build_inference_model(scorer.model, portable=True),
            scorer.vocab,
            scorer.tokenization,
            scorer.batch_size,
            scorer.time_buckets,
        )
    path = os.fspath(path)
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path!r} exists; choose a new version directory or pass "
                "overwrite=True"
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
            json.dump(_metadata(scorer), f, indent=2)
        with tf.device("/CPU:0"):
            graph = _Graph(scorer, vocab_path, top_k)
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _metadata(scorer):
    v = scorer.vocab
    return {
        "format": "keras_rnnlm.saved_model",
        "format_version": 1,
        "endpoints": list(ENDPOINTS),
        "vocab_size": len(v),
        "unk_token": v.unk_token if v.unk_id is not None else None,
        "eos_token": v.eos_token if v.eos_id is not None else None,
        "bos_context_id": scorer._context_id,
        "tokenization": scorer.tokenization.to_dict(),
        "state_names": scorer.inference.state_names,
        "state_shapes": [list(s) for s in scorer.inference.state_shapes],
        "time_buckets": [list(b) for b in scorer.time_buckets],
    }
