"""The TF Serving warm-up file of an export.

Stock TF Serving replays ``assets.extra/tf_serving_warmup_requests`` when it
loads a model version, before the version serves (its "SavedModel warmup"):
a TFRecord file of ``tensorflow.serving.PredictionLog`` protos (package
``tensorflow-serving-api``), at most :data:`MAX_RECORDS` of them, each a
``predict_log`` whose ``request`` (a ``PredictRequest``) is run on its
``model_spec.signature_name``. That moves the first-call costs (graph
optimisation, memory pools, and with ``--xla`` one compilation per input
shape) out of the first clients' latency.

:func:`warmup_requests` chooses the requests from the export's time buckets
and limits; :func:`write_warmup_file` writes them and
:func:`read_warmup_file` reads them back (``export_saved_model`` writes the
file unless ``warmup=False``). The requests, shortest first:

* for ``score_text``, ``score_ids`` and ``next_token_logprobs``: one row
  padded to each bucket end up to :data:`DENSE_UP_TO` steps, then to
  doubling lengths (512, 1024, ...) and to the longest bucket end within
  the export's ``max_tokens`` (or ``max_length``); and :data:`BATCH_ROWS`
  rows (at most ``max_batch_size``) at each bucket end up to
  :data:`MULTI_ROW_UP_TO` steps within the token budget (a server merges
  short requests into such batches);
* for ``step``: one row of 1 token and of each of those lengths, and the
  multi-row batches of 1 token and of the short lengths, from the initial
  states; ``step_with_keys`` the same up to :data:`DENSE_UP_TO` steps
  (and 1 token for the multi-row batch);
* ``initial_state`` for one row and for the multi-row batch;
* ``generate``: one row with each sampler (:data:`GENERATE_TOKENS`
  tokens after a one-token prompt), and the multi-row batch with the
  ``random`` one (the loop, and each sampler's branch, instantiated).

Every request is within the export's limits (so it succeeds), and its text
is made of one vocabulary token repeated (tokenised back to itself), so the
padded length is the one chosen.
"""

import dataclasses
import os

import numpy as np

from keras_rnnlm.generation import SAMPLERS
from keras_rnnlm.scoring.scorer import bucket_length

ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
#: TF Serving refuses a warm-up file with more records
#: (``WarmupConsts::kMaxNumRecords``).
MAX_RECORDS = 1000
#: One-row requests at every bucket end up to this length, then doubling.
DENSE_UP_TO = 256
#: The export's default ``warmup_max_length``: every bucket of up to 256
#: steps (sentences, and merged batches of them), so that loading a
#: version takes seconds, not minutes. The file reaching the whole token
#: budget (8,192 steps by default) took over a minute to replay on a
#: Zaremba-medium export (``python -m bench.warmup_replay``); beyond 256 steps
#: the default export pays little on a first call, the ``--xla`` export a
#: compilation per new length (``--warmup-max-length`` raises the cap).
DEFAULT_WARMUP_MAX_LENGTH = DENSE_UP_TO
#: Multi-row requests at every bucket end up to this length.
MULTI_ROW_UP_TO = 16
#: Rows of the multi-row requests (``keras-rnnlm serve``'s and the
#: documented TF Serving batching's ``max_batch_size``).
BATCH_ROWS = 32
#: Tokens each ``generate`` warm-up request generates.
GENERATE_TOKENS = 2


@dataclasses.dataclass(frozen=True)
class WarmupRequest:
    """One ``PredictRequest``: a signature and its inputs (NumPy arrays;
    strings as ``bytes`` in an object array)."""

    signature: str
    inputs: dict


def warmup_path(export_dir):
    """Where TF Serving looks for the warm-up file of ``export_dir``."""
    return os.path.join(export_dir, ASSETS_EXTRA, WARMUP_FILE)


def warmup_lengths(time_buckets, max_length, dense_up_to=DENSE_UP_TO):
    """The padded lengths to warm up: every bucket end up to
    ``dense_up_to``, then doubling lengths (rounded to their bucket), then
    the longest bucket end within ``max_length``; all ``<= max_length``."""
    max_length = int(max_length)
    ends = []
    t = 1
    while t <= max_length:
        end = bucket_length(t, time_buckets)
        if end > max_length:
            break
        ends.append(end)
        t = end + 1
    if not ends:
        return []
    out = [e for e in ends if e <= dense_up_to]
    length = 2 * out[-1] if out else ends[0]
    while bucket_length(length, time_buckets) < ends[-1]:
        end = bucket_length(length, time_buckets)
        if not out or end > out[-1]:
            out.append(end)
        length *= 2
    if not out or out[-1] < ends[-1]:
        out.append(ends[-1])
    return out


def _filler(scorer):
    """``(token, id, separator)``: a vocabulary token that the Scorer's
    tokenisation (the graph's too) reads back as itself, repeated to make
    texts of a known length."""
    vocab, tok = scorer.vocab, scorer.tokenization
    special = {vocab.eos_id, vocab.unk_id, scorer._context_id}
    sep = " " if tok.mode == "whitespace" else ""
    for i, token in enumerate(vocab.tokens):
        if i not in special and tok(token + sep + token) == [token, token]:
            return token, i, sep
    i = vocab.unk_id if vocab.unk_id is not None else 0
    return vocab.tokens[i], i, sep


def warmup_requests(
    scorer,
    limits,
    max_length=None,
    batch_rows=BATCH_ROWS,
    time_buckets=None,
):
    """The warm-up requests of an export of ``scorer`` (see the module
    docstring).

    Args:
        scorer: the exported :class:`~keras_rnnlm.scoring.Scorer`.
        limits: the export's ``{"max_batch_size", "max_tokens"}``.
        max_length: the longest padded length to warm up (default and
            at most: ``max_tokens``).
        batch_rows: rows of the multi-row requests (at most
            ``max_batch_size``; 1 or less: none).
        time_buckets: default ``scorer.time_buckets``.

    Returns:
        A list of :class:`WarmupRequest`, at most :data:`MAX_RECORDS`.
    """
    max_tokens = int(limits["max_tokens"])
    rows = max(1, min(int(batch_rows), int(limits["max_batch_size"])))
    cap = max_tokens if max_length is None else min(int(max_length), max_tokens)
    buckets = time_buckets or scorer.time_buckets
    lengths = warmup_lengths(buckets, cap)
    short = [
        n for n in lengths if n <= MULTI_ROW_UP_TO and n * rows <= max_tokens
    ]
    token, token_id, sep = _filler(scorer)
    infer = scorer.inference

    def scoring(batch, length):
        # ``length - 1`` words + <eos> (score) or <eos> + ``length - 1``
        # words (next token): ``length`` steps, a bucket end.
        text = sep.join([token] * (length - 1)).encode("utf-8")
        texts = np.array([text] * batch, dtype=object)
        ids = np.full((batch, length - 1), token_id, np.int32)
        return [
            WarmupRequest("score_text", {"sentences": texts}),
            WarmupRequest(
                "score_ids",
                {
                    "token_ids": ids,
                    "lengths": np.full((batch,), length - 1, np.int32),
                },
            ),
            WarmupRequest("next_token_logprobs", {"prefixes": texts}),
        ]

    def generate(batch, sampler):
        params = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
        if sampler == "top_k":
            params["top_k"] = min(5, len(scorer.vocab))
        elif sampler == "top_p":
            params["top_p"] = 0.9
        inputs = {
            "prompts": np.array([token.encode("utf-8")] * batch, object),
            "max_tokens": np.int32(GENERATE_TOKENS),
            "sampler": np.array(sampler.encode("utf-8"), object),
            "temperature": np.float32(params["temperature"]),
            "top_k": np.int32(params["top_k"]),
            "top_p": np.float32(params["top_p"]),
            "seed": np.int64(0),
            "num_samples": np.int32(1),
            "stop_token": np.array(b"", object),
        }
        return WarmupRequest("generate", inputs)

    def step(batch, length, signature="step"):
        states = infer.initial_states(batch)
        inputs = {"token_ids": np.full((batch, length), token_id, np.int32)}
        inputs.update(zip(infer.state_names, states))
        return WarmupRequest(signature, inputs)

    out = [
        WarmupRequest("initial_state", {"batch_size": np.int32(1)}),
        step(1, 1),
        step(1, 1, "step_with_keys"),
    ]
    # generate: the start token, the prompt's token, the new ones
    steps = 2 + GENERATE_TOKENS
    if steps <= max_tokens:
        out += [generate(1, name) for name in SAMPLERS]
    if rows > 1:
        out += [
            WarmupRequest("initial_state", {"batch_size": np.int32(rows)}),
            step(rows, 1),
            step(rows, 1, "step_with_keys"),
        ]
        if rows * steps <= max_tokens:
            out.append(generate(rows, "random"))
    for length in lengths:
        # Sentences of 0 words are <eos> alone, padded to the first bucket.
        if length > 1:
            out += scoring(1, length)
            if length in short and rows > 1:
                out += scoring(rows, length)
        out.append(step(1, length))
        if length <= DENSE_UP_TO:
            out.append(step(1, length, "step_with_keys"))
        if length in short and rows > 1:
            out.append(step(rows, length))
    if len(out) > MAX_RECORDS:
        raise ValueError(
            f"{len(out)} warm-up requests: TF Serving reads at most "
            f"{MAX_RECORDS}; pass a smaller max_length or coarser "
            "time_buckets"
        )
    return out


def _tf():
    import tensorflow as tf  # exports need TensorFlow

    return tf


def write_warmup_file(export_dir, requests):
    """Writes ``requests`` as ``PredictionLog`` records to the warm-up file
    of ``export_dir``; returns its path."""
    tf = _tf()
    from tensorflow_serving.apis import predict_pb2  # imports TF: on use
    from tensorflow_serving.apis import prediction_log_pb2

    path = warmup_path(export_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for r in requests:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = r.signature
            for name, value in r.inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup_file(path):
    """The :class:`WarmupRequest` records of a warm-up file (raises
    ``ValueError`` for a record that is not a ``predict_log``)."""
    tf = _tf()
    from tensorflow_serving.apis import prediction_log_pb2  # TF: on use

    out = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: a record is not a predict_log")
        request = log.predict_log.request
        inputs = {
            name: tf.make_ndarray(proto)
            for name, proto in request.inputs.items()
        }
        out.append(WarmupRequest(request.model_spec.signature_name, inputs))
    return out
