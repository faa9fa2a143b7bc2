"""Callbacks that interrupt a training run at a given batch, as a kill or
a signal would.

Tests import them as ``from interrupting import kill`` (``tests/`` is on
``sys.path``: pytest puts the directory of ``tests/conftest.py`` there);
scripts run with the repository root on ``PYTHONPATH`` as
``from tests.interrupting import kill``.
"""

import keras


class AtBatch(keras.callbacks.Callback):
    """Calls ``action()`` at the end of batch ``batch`` (its index within
    the ``fit`` call) of ``epoch``."""

    def __init__(self, epoch, batch, action):
        super().__init__()
        self.epoch, self.batch, self.action = epoch, batch, action

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self._epoch, batch) == (self.epoch, self.batch):
            self.action()


class Killed(Exception):
    """Raised by :func:`kill`'s callback."""


def kill(epoch, batch):
    """A callback that raises :class:`Killed` at the end of batch
    ``batch`` of ``epoch``: before that batch's checkpoint, like a kill."""

    def action():
        raise Killed(f"killed in epoch {epoch} at batch {batch}")

    return AtBatch(epoch, batch, action)
