"""Warm-up of a loaded version before it is served.

Two parts, both run by :class:`~keras_rnnlm.serving.servables.ModelManager`
before a version is swapped in:

* :func:`replay_warmup_file`: the version's
  ``assets.extra/tf_serving_warmup_requests``, if it has one, replayed as
  stock TF Serving does (a TFRecord file of ``tensorflow.serving.
  PredictionLog`` protos, at most TF Serving's 1,000; each
  ``predict_log`` request is run on its signature). A file that cannot be
  read, a record that is not a ``PredictionLog`` or not a ``predict_log``,
  and a request that fails all raise :class:`WarmupError`: the version
  fails to load, as in TF Serving.
* :func:`warm_up_buckets`: one call of ``score_text`` and
  ``next_token_logprobs`` per time bucket (the padded lengths of
  ``time_buckets`` in the export's ``assets/keras_rnnlm.json``) that a
  one-row request within the limits can reach, shortest first, within a
  time budget; then one call of ``score_ids``, of ``initial_state`` +
  ``step`` and of ``generate`` (one greedy token). With ``--xla`` exports
  each new padded length compiles on its first call; the default export
  instantiates its functions once.
"""

import collections
import dataclasses
import os
import sys
import time

import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow_serving.apis import prediction_log_pb2

from keras_rnnlm.export.generate import NEUTRAL
from keras_rnnlm.export.saved_model import MAX_TOKENS
from keras_rnnlm.export.warmup import ASSETS_EXTRA
from keras_rnnlm.export.warmup import MAX_RECORDS as MAX_WARMUP_RECORDS
from keras_rnnlm.export.warmup import WARMUP_FILE as WARMUP_REQUESTS
from keras_rnnlm.scoring.scorer import TIME_BUCKETS
from keras_rnnlm.scoring.scorer import bucket_length
from keras_rnnlm.scoring.scorer import check_time_buckets
from keras_rnnlm.serving.engine import call_signature
from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.limits import WARMUP_SECONDS
from keras_rnnlm.serving.limits import Limits
from keras_rnnlm.serving.requests import check_inputs
from keras_rnnlm.serving.requests import from_tensor_protos

# Signature checks only (the server's request limits do not apply).
_UNLIMITED = Limits(
    max_body_bytes=sys.maxsize,
    max_rows=sys.maxsize,
    max_sentence_tokens=sys.maxsize,
)
# The scoring signatures padded in time, and their string input.
BUCKETED = (("score_text", "sentences"), ("next_token_logprobs", "prefixes"))


class WarmupError(Exception):
    """A warm-up file that cannot be replayed: the version fails to load."""


def warmup_file(path):
    """Where a version at ``path`` keeps its TF Serving warm-up requests."""
    return os.path.join(path, ASSETS_EXTRA, WARMUP_REQUESTS)


def replay_warmup_file(servable):
    """Runs every request of ``servable``'s warm-up file; returns how many
    (None when it has no such file).

    A record is a serialized ``PredictionLog`` whose ``predict_log.request``
    names a signature (default ``serving_default``) and its inputs; the
    model name and version of its ``model_spec`` are ignored, as TF Serving
    ignores them at warm-up. Its inputs are checked against the signature
    (names, dtypes, ranks) and the export's own limits (in the graph), not
    against the server's per-request limits: the file belongs to the model
    (an export's may warm up lengths up to its ``max_tokens``). Raises
    :class:`WarmupError` naming the file and the record.
    """
    path = warmup_file(servable.path)
    if not os.path.exists(path):
        return None
    where = f"{ASSETS_EXTRA}/{WARMUP_REQUESTS}"
    count = 0
    try:
        for raw in tf.data.TFRecordDataset(path):
            count += 1
            if count > MAX_WARMUP_RECORDS:
                raise WarmupError(
                    f"{where} has more than {MAX_WARMUP_RECORDS} records "
                    "(TF Serving's limit)"
                )
            log = prediction_log_pb2.PredictionLog()
            try:
                log.ParseFromString(raw.numpy())
            except DecodeError as e:
                raise WarmupError(
                    f"{where}: record {count} is not a "
                    f"tensorflow.serving.PredictionLog ({e})"
                ) from None
            kind = log.WhichOneof("log_type")
            if kind != "predict_log":
                raise WarmupError(
                    f"{where}: record {count} is a {kind or 'empty'} log; "
                    "only predict_log records can be replayed (the server "
                    "answers Predict only)"
                )
            _replay(servable, log.predict_log.request)
    except tf.errors.DataLossError as e:
        raise WarmupError(
            f"{where} is not a valid TFRecord file (after {count} good "
            f"records): {e.message.splitlines()[0]}"
        ) from None
    except ServingError as e:
        raise WarmupError(
            f"{where}: request of record {count} failed: {e.message}"
        ) from None
    return count


def _replay(servable, request):
    name = request.model_spec.signature_name or "serving_default"
    signature = servable.signatures.get(name)
    if signature is None:
        raise ServingError(
            "INVALID_ARGUMENT",
            f"no signature {name!r} (signatures: "
            f"{sorted(servable.signatures)})",
        )
    arrays = from_tensor_protos(signature, request.inputs)
    check_inputs(signature, arrays, _UNLIMITED, servable)
    call_signature(signature, arrays)


def bucket_plan(time_buckets, max_steps, max_tokens):
    """``[(padded_length, steps)]``: every padded length that a one-row
    call of 1..``max_steps`` steps reaches under ``time_buckets`` and
    within ``max_tokens``, shortest first, each with the most steps that
    reach it."""
    buckets = check_time_buckets(time_buckets)
    plan = {}
    for t in range(1, int(max_steps) + 1):
        padded = bucket_length(t, buckets)
        if padded <= max_tokens:
            plan[padded] = t
    return sorted(plan.items())


@dataclasses.dataclass
class WarmupReport:
    """What :func:`warm_up_buckets` did.

    Attributes:
        planned: the padded lengths it meant to reach.
        reached: ``{signature: [padded length of each call]}``;
            ``score_text``'s from the number of tokens the graph scored.
        calls: calls per signature.
        seconds: wall time.
        complete: whether every planned length was reached in the budget.
    """

    planned: list
    reached: dict
    calls: collections.Counter
    seconds: float
    complete: bool

    def summary(self):
        done = sorted(set(self.reached.get("score_text", [])))
        span = f"{done[0]}..{done[-1]}" if done else "none"
        text = (
            f"{sum(self.calls.values())} calls, time buckets {span} "
            f"({len(done)} of {len(self.planned)}) in {self.seconds:.1f} s"
        )
        if not self.complete:
            rest = [p for p in self.planned if p not in done]
            text += (
                f"; time budget spent: {len(rest)} longer buckets "
                f"({rest[0]}..{rest[-1]}) not warmed up"
            )
        return text


def warm_up_buckets(servable, max_steps, seconds=WARMUP_SECONDS):
    """Calls the bucketed signatures once per time bucket up to
    ``max_steps`` steps (``<eos>`` included) and the export's token
    budget, shortest first, stopping once ``seconds`` are spent; then the
    other signatures once. Returns a :class:`WarmupReport`."""
    t0 = time.monotonic()
    meta = servable.metadata
    buckets = meta.get("time_buckets") or TIME_BUCKETS
    max_tokens = meta.get("limits", {}).get("max_tokens", MAX_TOKENS)
    plan = bucket_plan(buckets, max_steps, max_tokens)
    buckets = check_time_buckets(buckets)
    sigs = servable.signatures
    word = "a " if servable.tokenization == "whitespace" else "a"
    calls = collections.Counter()
    reached = collections.defaultdict(list)
    complete = True
    for _, steps in plan:
        if time.monotonic() - t0 > seconds:
            complete = False
            break
        # steps = tokens + 1 (<eos> scored / the start token fed first).
        text = tf.constant([(word * (steps - 1)).strip()])
        for name, key in BUCKETED:
            if name not in sigs:
                continue
            out = sigs[name].fn(**{key: text})
            calls[name] += 1
            n = int(out["num_tokens"][0]) if name == "score_text" else steps
            reached[name].append(bucket_length(n, buckets))
    if "score_ids" in sigs:
        sigs["score_ids"].fn(
            token_ids=tf.zeros([1, 2], tf.int32),
            lengths=tf.constant([2], tf.int32),
        )
        calls["score_ids"] += 1
    if "initial_state" in sigs and "step" in sigs:
        state = sigs["initial_state"].fn(batch_size=tf.constant(1))
        bos = state.pop("bos_ids")
        sigs["step"].fn(token_ids=tf.reshape(bos, [1, 1]), **state)
        calls["initial_state"] += 1
        calls["step"] += 1
    if "generate" in sigs:
        sigs["generate"].fn(
            prompts=tf.constant([""]),
            max_tokens=tf.constant(1),
            sampler=tf.constant("greedy"),
            temperature=tf.constant(NEUTRAL["temperature"], tf.float32),
            top_k=tf.constant(NEUTRAL["top_k"]),
            top_p=tf.constant(NEUTRAL["top_p"], tf.float32),
            seed=tf.constant(0, tf.int64),
            num_samples=tf.constant(NEUTRAL["num_samples"]),
            stop_token=tf.constant(NEUTRAL["stop_token"]),
        )
        calls["generate"] += 1
    return WarmupReport(
        planned=[p for p, _ in plan],
        reached=dict(reached),
        calls=calls,
        seconds=time.monotonic() - t0,
        complete=complete,
    )
