"""``timing.csv``: when each training batch of a run ended, and its
tokens (``train.timing_log``)."""

import csv
import os
import time

import keras

from keras_rnnlm.runs import is_writer

#: The columns of ``timing.csv``.
TIMING_COLUMNS = ("event", "epoch", "batch", "tokens", "time")


class TimingLog(keras.callbacks.Callback):
    """Appends to ``path`` (CSV, :data:`TIMING_COLUMNS`) one row a
    training batch and one an epoch end.

    A ``batch`` row: the epoch (from 0), the batch within the epoch (from
    0; a run resumed in the middle of an epoch goes on counting), its
    tokens (the stream's rows times the window's length: variable BPTT
    windows counted exactly) and when it ended (``time``: Unix seconds,
    taken after the batch's loss was read back, so the step has run on an
    asynchronous backend too). An ``epoch_end`` row: the epoch, its
    batches and tokens trained in this ``fit`` call, and when its end was
    done (validation, checkpoints and logs included: place the callback
    after them). The differences of ``time`` are what each batch and each
    epoch end took, the callbacks' work included; a batch much slower
    than its neighbours is, e.g., a compilation of a new window length.

    A resumed run appends to the file (its start-up shows as a gap).

    Args:
        path: the CSV file (the trainer: ``timing.csv`` in the run
            directory).
        stream: the training :class:`~keras_rnnlm.data.streams.LMSequence`
            (its windows give each batch's tokens).
    """

    def __init__(self, path, stream):
        super().__init__()
        self.path = path
        self.stream = stream
        self._file = None
        self._writer = None
        self._lengths = []
        self._start = 0
        self._epoch = 0
        self._batches = 0
        self._tokens = 0

    def on_train_begin(self, logs=None):
        if not is_writer():  # process 0 of several writes
            return
        new = not os.path.exists(self.path) or not os.path.getsize(self.path)
        self._file = open(self.path, "a", newline="", buffering=1)
        self._writer = csv.writer(self._file, lineterminator="\n")
        if new:
            self._writer.writerow(TIMING_COLUMNS)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        self._start = int(getattr(self.stream, "start", 0) or 0)
        self._lengths = [w.length for w in self.stream.windows]
        self._batches = self._tokens = 0

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None:
            float(loss)  # waits for the step (JAX dispatches it async)
        now = time.time()
        tokens = self.stream.batch_size * self._lengths[batch]
        self._batches += 1
        self._tokens += tokens
        self._row("batch", self._start + batch, tokens, now)

    def on_epoch_end(self, epoch, logs=None):
        self._row("epoch_end", self._batches, self._tokens, time.time())

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None

    def _row(self, event, batch, tokens, when):
        if self._writer is not None:
            self._writer.writerow(
                [event, self._epoch, batch, tokens, f"{when:.6f}"]
            )


def read_timing_log(path):
    """The complete rows of a ``timing.csv`` (a line a kill cut short is
    left out) as dicts: ``event``, ``epoch``, ``batch``, ``tokens``
    (ints) and ``time`` (a float); ``[]`` when there is no file."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError:
        return []
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    rows = []
    for row in csv.DictReader(lines):
        try:
            rows.append(
                {
                    "event": row["event"],
                    "epoch": int(row["epoch"]),
                    "batch": int(row["batch"]),
                    "tokens": int(row["tokens"]),
                    "time": float(row["time"]),
                }
            )
        except (KeyError, TypeError, ValueError):
            continue
    return rows
