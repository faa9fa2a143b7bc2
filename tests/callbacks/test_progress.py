"""The run's progress bar: the batch within the epoch after a resume, the
whole run's time left, ``loss`` only when it is not the ``nll``."""

import io

import pytest

from keras_rnnlm.callbacks import progress
from keras_rnnlm.callbacks.progress import RunProgbar
from keras_rnnlm.callbacks.progress import format_duration


class _Stream:
    """A training stream resumed after ``start`` of its ``n`` windows."""

    def __init__(self, start, n):
        self.start, self.n = start, n

    def __len__(self):
        return self.n - self.start


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    return clock


def _bar(epochs, stream, verbose=1):
    out = io.StringIO()
    bar = RunProgbar(epochs, stream, file=out)
    bar.file_line_seconds = 0.0  # a line every batch (not a terminal)
    bar.set_params({"verbose": verbose, "epochs": 1, "steps": len(stream)})
    return bar, out


def test_a_resumed_epoch_counts_its_batches_from_the_checkpoint(clock):
    bar, out = _bar(10, _Stream(120, 1568))
    bar.on_epoch_begin(1)
    for batch in range(13):
        clock.now += 0.25
        bar.on_train_batch_end(batch, {"nll": 4.5, "ppl": 90.0})
    lines = out.getvalue().splitlines()
    assert lines[0] == "Epoch 2/10 (resumed after batch 120)"
    assert lines[-1].lstrip().startswith("133/1568 [=")
    assert "13/1448" not in out.getvalue()


def test_the_whole_run_estimate(clock):
    bar, out = _bar(3, _Stream(0, 100))
    bar.on_epoch_begin(0)
    for batch in range(100):
        clock.now += 1.0 if batch else 30.0  # the first batch compiles
        bar.on_train_batch_end(batch, {"nll": 4.5})
    # 0.1 s a batch is not what the first batch took: 1 s a batch,
    # two more epochs of 100 batches
    assert bar.run_seconds_left(100) == pytest.approx(200.0)
    assert "run: 3:20 left" in out.getvalue().splitlines()[-1]
    clock.now += 50.0  # validation and checkpoints
    bar.on_epoch_end(0, {"nll": 4.5, "val_loss": 4.6})
    assert "val_loss: 4.6000" in out.getvalue().splitlines()[-1]
    bar.on_epoch_begin(1)
    # two epochs left, each with its end (50 s)
    assert bar.run_seconds_left(0) == pytest.approx(200.0 + 100.0)


def test_loss_is_shown_only_when_it_differs_from_nll(clock):
    bar, out = _bar(2, _Stream(0, 4))
    bar.on_epoch_begin(0)
    bar.on_train_batch_end(0, {"loss": 4.5, "nll": 4.5, "ppl": 90.0})
    # the epoch means differ a little (a shorter last window): still the nll
    bar.on_epoch_end(0, {"loss": 4.51, "nll": 4.52, "val_loss": 4.6})
    bar.on_epoch_begin(1)
    bar.on_train_batch_end(0, {"loss": 4.4, "nll": 4.4})
    assert "loss" not in out.getvalue().replace("val_loss", "")
    bar, out = _bar(1, _Stream(0, 4))
    bar.on_epoch_begin(0)
    bar.on_train_batch_end(0, {"loss": 4.9, "nll": 4.5})  # AR/TAR added
    assert "loss: 4.9000" in out.getvalue()


def test_a_terminal_redraws_one_line_and_closes_it(clock):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    bar = RunProgbar(1, _Stream(0, 10), file=out)
    bar.set_params({"verbose": 1, "epochs": 1, "steps": 10})
    bar.on_epoch_begin(0)
    for batch in range(3):
        clock.now += 1.0
        bar.on_train_batch_end(batch, {"nll": 4.5})
    assert out.getvalue().count("\n") == 1  # the "Epoch" line
    assert out.getvalue().endswith("\x1b[K")
    bar.close_line()  # before an interruption's message
    assert out.getvalue().endswith("\n")


@pytest.mark.parametrize(
    "seconds, text", [(5, "5s"), (65, "1:05"), (3725, "1:02:05")]
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
