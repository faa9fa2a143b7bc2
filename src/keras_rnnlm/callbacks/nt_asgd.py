"""Non-monotonically triggered averaged SGD (NT-ASGD), as a callback.

Merity, Keskar & Socher (2018), Algorithm 1, as the reference code
(salesforce/awd-lstm-lm ``main.py``) does it:

* After each epoch's validation, while plain SGD, with ``history`` the
  validation losses of all previous SGD epochs (the current one not yet
  appended): switch to averaging when ``len(history) > n and val_loss >
  min(history[:-n])`` -- the best of all epochs *except the last n*. (The
  paper's "last n" wording is a typo; the code is right.)
* From the switch on, keep the uniform mean of every iterate produced
  since then (after each optimizer step: ``avg += (w - avg) / k``, which
  is PyTorch ASGD with ``t0=0, lambd=0``). The SGD update itself is
  unchanged (ASGD with ``lambd=0`` takes the same steps at the same lr).
* Validation and the best-model checkpoint see the averaged weights; then
  the raw weights are restored and training continues.

Finetuning (``start_averaging=True, stop_when_triggered=True``) averages
from the first step, appends the averaged validation losses to the history
and stops training when the same condition fires.

The callback is split in two because Keras calls ``on_epoch_end`` in list
order: :attr:`NTASGD.swap_in` must be placed BEFORE the Validation
callback (it puts the averaged weights in), the :class:`NTASGD` itself
after the best-model checkpoint and BEFORE the resumable checkpoint (it
decides on the switch and puts the raw weights back, so the checkpoint's
weights are the raw iterate). Its state (history, switch epoch, number of
averaged iterates and the running average, a file of the checkpoint:
:meth:`NTASGD.get_checkpoint_state`) survives a resume.
"""

import math
import os

import keras
import numpy as np
from keras import ops

from keras_rnnlm.callbacks.base import StatefulCallback
from keras_rnnlm.callbacks.base import sync_model_state
from keras_rnnlm.runs import is_writer

DEFAULT_NONMONO = 5  # the reference code's default interval


def nonmono_interval(configured):
    """The interval a run uses: its configured one (0 included), else
    :data:`DEFAULT_NONMONO`."""
    return DEFAULT_NONMONO if configured is None else int(configured)


def should_trigger(history, val_loss, nonmono):
    """The reference trigger: ``len(h) > n and val_loss > min(h[:-n])``.

    Args:
        history: validation losses of the previous epochs (not including
            ``val_loss``).
        val_loss: this epoch's validation loss.
        nonmono: the non-monotone interval ``n``.
    """
    history = list(history)
    if len(history) <= nonmono:
        return False
    return val_loss > min(history[: len(history) - nonmono])


class _SwapIn(keras.callbacks.Callback):
    def __init__(self, parent):
        super().__init__()
        self.parent = parent

    def on_epoch_end(self, epoch, logs=None):
        self.parent._swap_in()


class NTASGD(StatefulCallback):
    """NT-ASGD weight averaging and switch (see the module docstring).

    Args:
        directory: run directory.
        nonmono: the non-monotone interval ``n`` (AWD/MoS 5, DOC 60).
        start_averaging: average from the first step (finetuning).
        stop_when_triggered: stop training when the condition fires while
            averaging (finetuning's stop rule).
        monitor: the validation-loss log key.

    Attributes:
        swap_in: the companion callback to place before Validation.
    """

    state_attributes = (
        "history",
        "averaging",
        "trigger_epoch",
        "n_averaged",
        "average_file",
        "stopped_epoch",
    )

    def __init__(
        self,
        directory,
        nonmono=DEFAULT_NONMONO,
        start_averaging=False,
        stop_when_triggered=False,
        monitor="val_loss",
    ):
        super().__init__()
        self.directory = directory
        self.nonmono = int(nonmono)
        self.start_averaging = bool(start_averaging)
        self.stop_when_triggered = bool(stop_when_triggered)
        self.monitor = monitor
        self.history = []
        self.averaging = self.start_averaging
        self.trigger_epoch = -1 if self.start_averaging else None
        self.n_averaged = 0
        self.average_file = None
        self.stopped_epoch = None
        self.swap_in = _SwapIn(self)
        self._average = None
        self._raw = None

    # -- averaging --------------------------------------------------------
    def _variables(self):
        return self.model.trainable_variables

    def average_weights(self):
        """The running average as numpy arrays (None before any step)."""
        if self._average is None:
            return None
        return [ops.convert_to_numpy(a) for a in self._average]

    def on_train_batch_end(self, batch, logs=None):
        if not self.averaging:
            return
        sync_model_state(self.model)
        self.n_averaged += 1
        if self._average is None or self.n_averaged == 1:
            self._average = [
                ops.convert_to_tensor(ops.copy(v.value))
                for v in self._variables()
            ]
            return
        k = float(self.n_averaged)
        self._average = [
            a + (ops.cast(v.value, a.dtype) - a) / k
            for a, v in zip(self._average, self._variables())
        ]

    def _swap_in(self):
        if not self.averaging or self._average is None:
            return
        variables = self._variables()
        self._raw = [ops.convert_to_numpy(v.value) for v in variables]
        for v, a in zip(variables, self._average):
            v.assign(a)

    def _swap_out(self):
        if self._raw is None:
            return
        for v, r in zip(self._variables(), self._raw):
            v.assign(r)
        self._raw = None

    # -- switch / stop ----------------------------------------------------
    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        value = logs.get(self.monitor)
        try:
            if value is None or not math.isfinite(float(value)):
                return
            value = float(value)
            if not self.averaging:
                if should_trigger(self.history, value, self.nonmono):
                    self.averaging = True
                    self.trigger_epoch = int(epoch)
                    print(
                        f"NT-ASGD: switching to averaging after epoch "
                        f"{epoch + 1}"
                    )
                self.history.append(value)
            elif self.stop_when_triggered:
                if should_trigger(self.history, value, self.nonmono):
                    self.stopped_epoch = int(epoch)
                    self.model.stop_training = True
                self.history.append(value)
        finally:
            self._swap_out()
            logs["asgd"] = 1.0 if self.averaging else 0.0

    #: The running average's file in a checkpoint folder.
    AVERAGE_FILE = "nt_asgd_average.npz"

    def get_checkpoint_state(self, folder):
        """The state for a checkpoint: the running average so far is
        written to ``folder`` (the checkpoint's, before its manifest) as
        :attr:`AVERAGE_FILE`."""
        state = self.get_state()
        state["average_file"] = None
        if self._average is not None:
            state["average_file"] = self.AVERAGE_FILE
            if is_writer():  # process 0 of several writes
                np.savez(
                    os.path.join(folder, self.AVERAGE_FILE),
                    **{
                        f"w{i}": w for i, w in enumerate(self.average_weights())
                    },
                )
        return state

    def set_checkpoint_state(self, state, folder):
        """Restores :meth:`get_checkpoint_state` (the average from the
        checkpoint ``folder``)."""
        self.set_state(state)
        self._average = None
        if self.average_file and self.n_averaged:
            path = os.path.join(folder, self.average_file)
            with np.load(path) as f:
                self._average = [
                    ops.convert_to_tensor(f[f"w{i}"])
                    for i in range(len(f.files))
                ]

    def get_config(self):
        return {
            "directory": self.directory,
            "nonmono": self.nonmono,
            "start_averaging": self.start_averaging,
            "stop_when_triggered": self.stop_when_triggered,
            "monitor": self.monitor,
        }
