"""Runs signature calls: directly, or merged into batches.

With batching (TF Serving's ``--enable_batching``), concurrent requests to
the same signature of the same version are queued and merged into one call
of up to ``max_batch_size`` rows, waiting at most ``batch_timeout_s`` for
more; at most ``max_enqueued`` requests wait (more are refused with
UNAVAILABLE). Requests are merged when padding them together is
harmless (see :func:`_padding_key`). Each request gets back exactly its
rows, and outputs padded
in time (``token_logprobs``, ``tokens``...) are cut to the width the
request alone would have got, so a merged call answers as the request's
own call would. A merged call that fails (one request's bad ids) is
retried request by request, so one bad request does not fail the others.

The export refuses a call over its token budget (``rows x padded length
<= max_tokens``, and at most ``max_batch_size`` rows; ``"limits"`` in
``assets/keras_rnnlm.json``). :meth:`Engine.run` splits a request that is
over it into calls that fit (:class:`Budget`) and joins their answers; a
merged batch stays within it too. Only a single row over the budget is
refused, before the graph, with a message that names the limit.
"""

import asyncio
import collections
import concurrent.futures
import threading
import time

import numpy as np
import tensorflow as tf

from keras_rnnlm.scoring.scorer import TIME_BUCKETS
from keras_rnnlm.scoring.scorer import bucket_length
from keras_rnnlm.serving.errors import ServingError
from keras_rnnlm.serving.errors import from_tf_error

# Outputs whose second dimension is time, cut to the request's own width
# (the longest of its rows' ``lengths``).
TIME_OUTPUTS = ("token_logprobs", "token_is_oov", "tokens")


def call_signature(signature, inputs):
    """Runs ``signature`` on NumPy ``inputs``; returns NumPy outputs."""

    tensors = {
        name: tf.constant(value, dtype=signature.inputs[name][0])
        for name, value in inputs.items()
    }
    try:
        out = signature.fn(**tensors)
    except tf.errors.OpError as e:
        raise from_tf_error(e) from None
    return {k: v.numpy() for k, v in out.items()}


class Budget:
    """An export's limits on one call: at most ``max_rows`` rows and
    ``rows x padded length <= max_tokens``, the padded length being the
    time bucket of the longest row (``bucketed``) or its steps (``step``).

    Args:
        max_rows, max_tokens: the export's ``max_batch_size`` and
            ``max_tokens``.
        buckets: the export's ``time_buckets``.
        bucketed: whether the signature pads its rows to a time bucket.
    """

    def __init__(
        self, max_rows, max_tokens, buckets=TIME_BUCKETS, bucketed=True
    ):
        self.max_rows = int(max_rows)
        self.max_tokens = int(max_tokens)
        self.buckets = tuple(tuple(b) for b in buckets)
        self.bucketed = bool(bucketed)

    def padded(self, steps):
        """The padded length of a call whose longest row has ``steps``."""
        steps = max(int(steps), 1)
        return bucket_length(steps, self.buckets) if self.bucketed else steps

    def fits(self, rows, steps):
        return rows <= self.max_rows and (
            rows * self.padded(steps) <= self.max_tokens
        )

    def chunks(self, steps):
        """``[(start, stop)]``: consecutive rows split into calls within
        the budget (greedy, in order). ``steps``: each row's steps."""
        out, start, longest = [], 0, 0
        for i, n in enumerate(steps.tolist()):
            if not self.fits(1, n):
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"row {i} takes {n} steps, padded to {self.padded(n)} > "
                    f"the export's token budget of {self.max_tokens} "
                    "(max_tokens in its assets/keras_rnnlm.json); send "
                    "shorter sentences",
                )
            if i > start and not self.fits(i - start + 1, max(longest, n)):
                out.append((start, i))
                start, longest = i, 0
            longest = max(longest, n)
        out.append((start, len(steps)))
        return out


def _rows(inputs):
    return int(next(iter(inputs.values())).shape[0])


def _concat(parts):
    """Concatenates arrays along the batch dimension, padding later
    dimensions with zeros / empty strings / False (what a call pads its
    own rows with)."""
    ndim = parts[0].ndim
    if ndim > 1:
        width = [max(p.shape[d] for p in parts) for d in range(1, ndim)]
        fill = b"" if parts[0].dtype == object else 0
        padded = []
        for p in parts:
            pad = [(0, 0)] + [(0, w - s) for w, s in zip(width, p.shape[1:])]
            padded.append(np.pad(p, pad, constant_values=fill))
        parts = padded
    return np.concatenate(parts, axis=0)


def _merge(tasks):
    """Concatenates the tasks' inputs along the batch dimension."""
    return {
        name: _concat([t.inputs[name] for t in tasks])
        for name in tasks[0].inputs
    }


def _split(outputs, tasks):
    """The rows of each task, time outputs cut to its own width."""
    start, out = 0, []
    for task in tasks:
        n = _rows(task.inputs)
        mine = {k: v[start : start + n] for k, v in outputs.items()}
        if "lengths" in mine and n:
            width = int(mine["lengths"].max())
            for k in TIME_OUTPUTS:
                if k in mine and mine[k].ndim >= 2:
                    mine[k] = mine[k][:, :width]
        out.append(mine)
        start += n
    return out


class _Task:
    __slots__ = ("signature", "inputs", "future", "key", "steps")

    def __init__(self, signature, inputs, steps):
        self.signature = signature
        self.inputs = inputs
        self.future = concurrent.futures.Future()
        self.key = (id(signature), _padding_key(signature, inputs))
        self.steps = steps  # the longest row's steps (0: no time)


def _padding_key(signature, inputs):
    """What requests must share to be merged: nothing more when padding
    is harmless (vectors, or rows with their ``lengths``); else the shapes
    after the batch dimension (``step``: padding its ``token_ids`` would
    run the recurrence past a row's end and change its final state)."""
    if "lengths" in signature.inputs:
        return None
    return tuple(tuple(v.shape[1:]) for _, v in sorted(inputs.items()))


class Engine:
    """Runs calls on a thread pool, with or without batching.

    Args:
        batching: merge concurrent requests of a batched signature.
        max_batch_size: rows of one merged call.
        batch_timeout_s: how long the first request of a batch waits for
            more.
        max_enqueued: requests waiting for a batch (more: UNAVAILABLE).
        num_threads: threads running calls (unbatched) / batches.
    """

    def __init__(
        self,
        batching=True,
        max_batch_size=32,
        batch_timeout_s=0.002,
        max_enqueued=256,
        num_threads=4,
    ):
        self.batching = bool(batching)
        self.max_batch_size = int(max_batch_size)
        self.batch_timeout_s = float(batch_timeout_s)
        self.max_enqueued = int(max_enqueued)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=int(num_threads), thread_name_prefix="keras-rnnlm-run"
        )
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._workers = []
        if self.batching:
            for i in range(int(num_threads)):
                w = threading.Thread(
                    target=self._work,
                    name=f"keras-rnnlm-batch-{i}",
                    daemon=True,
                )
                w.start()
                self._workers.append(w)
        self.stats = collections.Counter()

    async def run(self, signature, inputs, steps=None, timeout=None):
        """Answers one request: its call (or, over the signature's
        :class:`Budget`, calls that fit, joined), awaited for at most
        ``timeout`` seconds (then DEADLINE_EXCEEDED). ``steps``: each
        row's steps (:func:`~keras_rnnlm.serving.requests.row_steps`)."""
        budget = getattr(signature, "budget", None)
        spans = [None]
        if budget is not None and steps is not None and len(steps):
            spans = budget.chunks(steps)
        if len(spans) > 1:
            self.stats["split_requests"] += 1
        futures = []
        try:
            for span in spans:
                if span is None:
                    part, longest = inputs, 0
                    if steps is not None and len(steps):
                        longest = int(steps.max())
                else:
                    a, b = span
                    part = {k: v[a:b] for k, v in inputs.items()}
                    longest = int(steps[a:b].max())
                futures.append(
                    asyncio.wrap_future(self.submit(signature, part, longest))
                )
            outs = await asyncio.wait_for(asyncio.gather(*futures), timeout)
        except asyncio.TimeoutError:
            raise ServingError(
                "DEADLINE_EXCEEDED",
                f"request not answered in {timeout} s (--request-timeout)",
            ) from None
        finally:
            for f in futures:
                f.cancel()
        if len(outs) == 1:
            return outs[0]
        return {k: _concat([o[k] for o in outs]) for k in outs[0]}

    def submit(self, signature, inputs, steps=0):
        """Schedules a call; returns a ``concurrent.futures.Future`` of the
        outputs (NumPy arrays) or of a :class:`ServingError`."""
        if self._closed:
            raise ServingError("UNAVAILABLE", "server is shutting down")
        if not (self.batching and signature.batched):
            self.stats["direct_calls"] += 1
            return self._pool.submit(call_signature, signature, inputs)
        task = _Task(signature, inputs, steps)
        with self._cond:
            if len(self._queue) >= self.max_enqueued:
                raise ServingError(
                    "UNAVAILABLE",
                    f"server overloaded: {self.max_enqueued} requests "
                    "already wait for a batch (max_enqueued); retry later",
                )
            self._queue.append(task)
            self._cond.notify()
        return task.future

    def _take(self):
        """Waits for a first task, then gathers same-signature tasks up to
        max_batch_size rows or batch_timeout_s; returns the batch."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait(0.5)
            if not self._queue:
                return None
            first = self._queue.popleft()
            batch, rows = [first], _rows(first.inputs)
            steps = first.steps
            budget = getattr(first.signature, "budget", None)

            def fits(t):
                n = rows + _rows(t.inputs)
                if n > self.max_batch_size:
                    return False
                return budget is None or budget.fits(n, max(steps, t.steps))

            deadline = time.monotonic() + self.batch_timeout_s
            while rows < self.max_batch_size:
                match = next(
                    (t for t in self._queue if t.key == first.key and fits(t)),
                    None,
                )
                if match is not None:
                    self._queue.remove(match)
                    batch.append(match)
                    rows += _rows(match.inputs)
                    steps = max(steps, match.steps)
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._cond.wait(left)
            return batch

    def _work(self):
        while True:
            batch = self._take()
            if batch is None:
                return
            self._run(batch)

    def _run(self, batch):
        tasks = [t for t in batch if t.future.set_running_or_notify_cancel()]
        if not tasks:
            return
        signature = tasks[0].signature
        self.stats["batches"] += 1
        self.stats["batched_requests"] += len(tasks)
        if len(tasks) > 1:
            try:
                outputs = call_signature(signature, _merge(tasks))
            except Exception:  # noqa: BLE001  (retry one by one below)
                self.stats["batch_retries"] += 1
            else:
                for task, out in zip(tasks, _split(outputs, tasks)):
                    task.future.set_result(out)
                return
        for task in tasks:
            try:
                task.future.set_result(call_signature(signature, task.inputs))
            except Exception as e:  # noqa: BLE001  (the request's error)
                task.future.set_exception(e)

    def close(self, wait=True):
        """Stops taking requests; with ``wait``, finishes queued ones."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if wait:
            for w in self._workers:
                w.join(timeout=30)
        self._pool.shutdown(wait=wait)
