"""Stopping a run on Ctrl-C or SIGTERM with its work saved.

:class:`StopOnSignal` turns SIGINT (Ctrl-C) and SIGTERM (what ``timeout``
and job schedulers send) into a request that the callback sees at the
end of the current batch: it writes a mid-epoch checkpoint there (the
run's :class:`~keras_rnnlm.callbacks.checkpoint.TrainingCheckpoint`, the
same one a ``train.checkpoint_every_steps`` checkpoint at that batch
would be) and raises :class:`TrainingInterrupted`, which names the
checkpoint. A signal that arrives during validation or a checkpoint
write lets them finish: the run stops after them, at the epoch's
checkpoint or at the batch just saved. A second signal ends the process
at once (the system's default action, even inside a long TensorFlow op),
without writing anything more; the checkpoints on disk are whole, since
every checkpoint is written under a temporary name and renamed.
"""

import contextlib
import os
import signal
import threading

import keras

#: The signals a run stops on, with its work saved.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving a checkpoint.

    A :class:`KeyboardInterrupt`, so that code which lets Ctrl-C through
    lets this through too.

    Attributes:
        signum: the signal (``signal.SIGINT`` or ``signal.SIGTERM``).
        directory: the run directory.
        checkpoint: the newest checkpoint on disk (its folder: what a
            resume starts from), or ``None`` when there is none yet.
        epoch: the 1-based epoch a resume continues in.
        batch: the batches of that epoch already done (0: a resume
            starts at the beginning of ``epoch``).
        batches: the number of batches of that epoch.
    """

    def __init__(
        self, signum, directory, checkpoint, epoch, batch=0, batches=None
    ):
        self.signum = int(signum)
        self.directory = os.path.abspath(directory)
        self.checkpoint = checkpoint
        self.epoch = int(epoch)
        self.batch = int(batch)
        self.batches = batches
        super().__init__(self.describe())

    @property
    def signal_name(self):
        return signal.Signals(self.signum).name

    @property
    def exit_status(self):
        """The shell's status of a process ended by the signal."""
        return 128 + self.signum

    def where(self):
        """Where a resume starts, in words."""
        if self.checkpoint is None:
            return f"no checkpoint yet in {self.directory}"
        if self.batch:
            of = f"/{self.batches}" if self.batches else ""
            at = f"epoch {self.epoch}, batch {self.batch}{of}"
        else:
            at = f"the start of epoch {self.epoch}"
        return f"checkpoint {self.checkpoint} (resumes at {at})"

    def describe(self):
        return f"{self.signal_name}: {self.where()}"


class StopOnSignal(keras.callbacks.Callback):
    """Stops training on SIGINT or SIGTERM with a checkpoint at the
    current batch (see the module's docstring).

    The signal handlers are installed by :meth:`listening`, around every
    ``fit`` call of a run (the trainer calls ``fit`` once an epoch), in
    the main thread of a single-process run. Place the callback after the
    run's ``TrainingCheckpoint`` (so that a signal during its write or
    during validation is seen after them).

    Args:
        checkpoint: the run's
            :class:`~keras_rnnlm.callbacks.checkpoint.TrainingCheckpoint`
            (``None``: stop without saving).
    """

    def __init__(self, checkpoint):
        super().__init__()
        self.checkpoint = checkpoint
        self.requested = None  # the signal number, once one arrived
        self._epoch = 0

    # -- the handlers ---------------------------------------------------------
    def _handle(self, signum, frame):
        if self.requested is None:
            self.requested = signum
            # The next signal takes the system's default action at once.
            for s in SIGNALS:
                signal.signal(s, signal.SIG_DFL)

    @contextlib.contextmanager
    def listening(self):
        """Installs the handlers for the block (where signals can be
        handled: the main thread of a single-process run), restores the
        previous ones after it, and raises :class:`TrainingInterrupted`
        for a signal that arrived after the last batch's check."""
        if not can_handle_signals():
            yield
            return
        previous = {s: signal.getsignal(s) for s in SIGNALS}
        self.requested = None
        for s in SIGNALS:
            signal.signal(s, self._handle)
        try:
            yield
            if self.requested is not None:
                raise self._interrupted()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    # -- the batch ends -------------------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)

    def on_train_batch_end(self, batch, logs=None):
        if self.requested is None:
            return
        if batch + 1 >= int(self.params.get("steps") or 0):
            return  # the epoch's end (validation, checkpoint) comes next
        if self.checkpoint is not None:
            self.checkpoint.save_batch(batch, logs)
        raise self._interrupted()

    def on_epoch_end(self, epoch, logs=None):
        if self.requested is not None:
            raise self._interrupted()

    def _interrupted(self):
        if self.checkpoint is None:
            return TrainingInterrupted(self.requested, ".", None, 1)
        return interrupted_at(
            self.requested,
            self.checkpoint.run_dir,
            self.checkpoint.progress(),
        )


def interrupted_at(signum, run_dir, progress):
    """The :class:`TrainingInterrupted` of signal ``signum`` in the run
    directory ``run_dir``, whose newest checkpoint stands at ``progress``
    (:func:`~keras_rnnlm.callbacks.checkpoint.saved_progress`)."""
    return TrainingInterrupted(
        signum,
        run_dir,
        progress["checkpoint"],
        progress["epochs_done"] + 1,
        progress["batches_done"],
        progress["epoch_batches"],
    )


def can_handle_signals():
    """Whether this thread can handle signals for a run: the main thread
    of a single-process run (the processes of a multi-process run must
    stop at the same batch, not on a signal that one of them received)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if keras.backend.backend() == "jax":
        import jax  # the JAX backend (checked above)

        return jax.process_count() == 1
    return True
