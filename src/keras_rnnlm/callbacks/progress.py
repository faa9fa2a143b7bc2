"""The run's progress bar: the batch within the epoch (also after a
resume) and an estimate of the whole run's remaining time."""

import sys
import time

import keras


def format_duration(seconds):
    """``h:mm:ss``, ``m:ss`` or ``Ns``."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        hours, rest = divmod(seconds, 3600)
        return "%d:%02d:%02d" % (hours, rest // 60, rest % 60)
    if seconds >= 60:
        return "%d:%02d" % (seconds // 60, seconds % 60)
    return f"{seconds}s"


def _format_step(seconds):
    if seconds >= 1:
        return f"{seconds:.2f}s/step"
    return f"{seconds * 1e3:.0f}ms/step"


def _format_value(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{value:.4f}" if abs(value) > 1e-3 else f"{value:.4e}"


class _Durations:
    """Durations measured from marks, and their mean."""

    def __init__(self):
        self.total = 0.0
        self.count = 0

    def add_since(self, mark, now):
        """Adds ``now - mark``; nothing when ``mark`` is ``None`` (not
        set yet)."""
        if mark is not None:
            self.total += now - mark
            self.count += 1

    def mean(self):
        """The mean duration (``None`` before one is added)."""
        return self.total / self.count if self.count else None


class RunProgbar(keras.callbacks.ProgbarLogger):
    """The progress of a run: ``Epoch k/N`` out of the run's epochs, the
    batch within the epoch out of the epoch's batches (a run resumed in
    the middle of an epoch continues the count: ``133/1568``, not
    ``13/1448``), the epoch's time left, the time a step takes, the
    metrics (``loss`` only when it is not the token NLL that ``nll``
    shows: a model with added losses, AR/TAR), and the whole run's time
    left (``run: 1:04:12 left``: the remaining batches of every epoch at
    the mean step time, plus the measured time of an epoch's end --
    validation, checkpoints -- for every epoch end to come).

    The trainer calls ``fit`` once per epoch (variable BPTT windows change
    the number of batches from epoch to epoch); the bar keeps its clock
    across the calls. The first batch of each call (tracing, compiling)
    is left out of the step time.

    ``verbose`` (``train.verbose``): 1 redraws one line on a terminal
    (and writes a line a minute when the output is a file), 2 writes one
    line an epoch, 0 nothing.

    Args:
        total_epochs: the run's number of epochs (``train.epochs``).
        stream: the training stream (its ``start``: the batches of the
            epoch done before this ``fit`` call), or ``None``.
        file: where to write (default ``sys.stdout`` at each write).
    """

    #: seconds between two redraws on a terminal, two lines in a file
    redraw_seconds = 0.1
    file_line_seconds = 60.0

    def __init__(self, total_epochs, stream=None, file=None):
        super().__init__()
        self.total_epochs = int(total_epochs)
        self.stream = stream
        self._file = file
        self._steps = 0
        self._offset = 0
        self._epoch = 0
        self._open_line = False
        self._batches = _Durations()  # the timed batches
        self._epoch_ends = _Durations()  # the measured epoch ends
        self._last_batch_end = None
        self._epoch_ended = None
        self._show_loss = None  # decided at the run's first batch

    @property
    def file(self):
        return self._file or sys.stdout

    def set_params(self, params):
        super().set_params(params)
        self.epochs = self.total_epochs
        self._steps = int(params.get("steps") or 0)

    # -- the clock ------------------------------------------------------------
    def step_seconds(self):
        """The mean time of a batch (``None`` before one is timed)."""
        return self._batches.mean()

    def run_seconds_left(self, current):
        """The estimated time to the end of the run, ``current`` batches
        into the epoch (``None`` before a batch is timed)."""
        step = self.step_seconds()
        if step is None:
            return None
        later = self.total_epochs - self._epoch - 1
        batches = self.target - current + later * self.target
        ends = self._epoch_ends.mean() or 0.0
        return step * batches + ends * (later + 1)

    # -- the callbacks --------------------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        now = time.monotonic()
        # the previous epoch's end, from its last batch: validation,
        # checkpoints, plots
        self._epoch_ends.add_since(self._epoch_ended, now)
        self._epoch_ended = None
        self._epoch = int(epoch)
        self._offset = int(getattr(self.stream, "start", 0) or 0)
        self.target = self._offset + self._steps
        self._epoch_start = now
        self._last_batch_end = None
        self._last_draw = 0.0
        if self.verbose:
            resumed = (
                f" (resumed after batch {self._offset})" if self._offset else ""
            )
            self._write_line(f"Epoch {epoch + 1}/{self.total_epochs}{resumed}")

    def on_train_batch_end(self, batch, logs=None):
        now = time.monotonic()
        self._batches.add_since(self._last_batch_end, now)
        self._last_batch_end = now
        if self._show_loss is None:
            self._show_loss = _adds_to_nll(logs)
        current = self._offset + batch + 1
        self.seen = current
        if self.verbose != 1:
            return
        tty = _is_terminal(self.file)
        wait = self.redraw_seconds if tty else self.file_line_seconds
        if now - self._last_draw < wait and current < self.target:
            return
        self._last_draw = now
        step = self.step_seconds()
        eta = (
            ""
            if step is None
            else format_duration(step * (self.target - current))
        )
        line = self._line(current, eta, step, logs)
        if tty:
            self.file.write("\r" + line + "\x1b[K")
            self.file.flush()
            self._open_line = True
        else:
            self._write_line(line)

    def on_epoch_end(self, epoch, logs=None):
        now = time.monotonic()
        self._epoch_ended = self._last_batch_end or now
        if not self.verbose:
            return
        self.close_line()
        current = max(self.seen, self.target)
        elapsed = format_duration(now - self._epoch_start)
        self._write_line(
            self._line(current, elapsed, self.step_seconds(), logs)
        )

    def on_test_begin(self, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    # -- drawing --------------------------------------------------------------
    def close_line(self):
        """Ends a bar line left open on a terminal (before another
        message, e.g. an interruption's)."""
        if self._open_line:
            self.file.write("\n")
            self.file.flush()
            self._open_line = False

    def _write_line(self, text):
        self.close_line()
        self.file.write(text + "\n")
        self.file.flush()

    def _line(self, current, time_text, step, logs):
        target = max(self.target, current, 1)
        width = 20
        done = int(width * current / target)
        digits = len(str(target))
        parts = [
            f"{current:>{digits}}/{target} [{'=' * done}{'.' * (width - done)}]"
        ]
        if time_text:
            parts[0] += f" {time_text}"
        if step is not None:
            parts[0] += f" {_format_step(step)}"
        for key, value in self._shown(logs):
            parts.append(f"{key}: {_format_value(value)}")
        left = self.run_seconds_left(current)
        if left is not None and self.total_epochs > 1:
            parts.append(f"run: {format_duration(left)} left")
        return " - ".join(parts)

    def _shown(self, logs):
        logs = dict(logs or {})
        if self._show_loss is False:
            logs.pop("loss", None)
        return logs.items()


def _adds_to_nll(logs):
    """Whether a batch's ``loss`` is more than its token NLL (added
    losses: AR/TAR): the first batch's, when both are one batch's mean
    (later, Keras's running ``loss`` weights the batches equally and the
    token NLL by their tokens)."""
    logs = logs or {}
    nll = logs.get("nll", logs.get("sampled_nll"))
    if "loss" not in logs or nll is None:
        return True
    return not _close(logs["loss"], nll)


def _close(a, b):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _is_terminal(file):
    isatty = getattr(file, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False
