"""Learning-rate schedules as epoch callbacks.

All of them set ``model.optimizer.learning_rate`` and report the value in
the epoch logs as ``lr``; their counters are saved with a resumable
checkpoint (see :class:`~keras_rnnlm.callbacks.base.StatefulCallback`).
The plateau schedules read the validation metric put into the logs by
:class:`~keras_rnnlm.callbacks.validation.Validation`, so they must come
after it in the callback list.
"""

import math

from keras_rnnlm.callbacks.base import StatefulCallback


class LRSchedule(StatefulCallback):
    """Base class: holds ``lr`` (current value) and applies it."""

    state_attributes = ("lr",)

    def __init__(self, initial_lr):
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.lr = float(initial_lr)

    def _apply(self):
        self.model.optimizer.learning_rate.assign(self.lr)

    def on_train_begin(self, logs=None):
        self._apply()

    def on_epoch_begin(self, epoch, logs=None):
        self._apply()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self.lr


class ConstantLR(LRSchedule):
    """A fixed learning rate."""


class ZarembaDecay(LRSchedule):
    """Zaremba et al. (2014): constant, then multiplied by ``decay`` per epoch.

    The learning rate of epoch ``e`` (0-based) is
    ``initial_lr * decay ** max(0, e + 1 - start_epoch)``: the first
    ``start_epoch`` epochs run at ``initial_lr`` (small: 4 epochs at 1.0,
    then halved every epoch).
    """

    def __init__(self, initial_lr, decay, start_epoch):
        super().__init__(initial_lr)
        self.decay = float(decay)
        self.start_epoch = int(start_epoch)

    def on_epoch_begin(self, epoch, logs=None):
        self.lr = self.initial_lr * self.decay ** max(
            0, epoch + 1 - self.start_epoch
        )
        self._apply()


class PlateauAnnealing(LRSchedule):
    """Algorithm 1 of the multi-cell LSTM paper, exactly as written.

    After each epoch, with ``ppl`` the validation perplexity and
    ``previous`` the one of the previous epoch:

        if ppl > previous - min_reduction:
            if given_chances < epochs_to_wait: given_chances += 1
            else: lr = max(min_lr, lr * decay); given_chances = 0
        else: given_chances = 0

    "Previous" is the previous epoch's perplexity (the paper's "previous
    perplexity"), not the best so far. The first epoch only records its
    perplexity. Paper values: decay 0.5, epochs_to_wait 2,
    min_reduction 2 (perplexity points), min_lr 1e-4.
    """

    state_attributes = ("lr", "given_chances", "previous")

    def __init__(
        self,
        initial_lr,
        decay=0.5,
        epochs_to_wait=2,
        min_reduction=2.0,
        min_lr=1e-4,
        monitor="val_ppl",
    ):
        super().__init__(initial_lr)
        self.decay = float(decay)
        self.epochs_to_wait = int(epochs_to_wait)
        self.min_reduction = float(min_reduction)
        self.min_lr = float(min_lr)
        self.monitor = monitor
        self.given_chances = 0
        self.previous = None

    def step(self, ppl):
        """Applies one epoch's update; returns the new learning rate."""
        if self.previous is not None:
            if ppl > self.previous - self.min_reduction:
                if self.given_chances < self.epochs_to_wait:
                    self.given_chances += 1
                else:
                    self.lr = max(self.min_lr, self.lr * self.decay)
                    self.given_chances = 0
            else:
                self.given_chances = 0
        self.previous = float(ppl)
        return self.lr

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["lr"] = self.lr  # the rate this epoch was trained with
        self.step(_require(logs, self.monitor, self))


class DivideOnPlateau(LRSchedule):
    """pytorch/examples word_language_model: ``lr /= factor`` whenever the
    validation loss does not improve on the best so far (factor 4)."""

    state_attributes = ("lr", "best")

    def __init__(self, initial_lr, factor=4.0, monitor="val_loss"):
        super().__init__(initial_lr)
        self.factor = float(factor)
        self.monitor = monitor
        self.best = None

    def step(self, value):
        if self.best is None or value < self.best:
            self.best = float(value)
        else:
            self.lr /= self.factor
        return self.lr

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["lr"] = self.lr
        self.step(_require(logs, self.monitor, self))


def _require(logs, key, cb):
    if key not in logs or not math.isfinite(float(logs[key])):
        raise ValueError(
            f"{type(cb).__name__} needs a finite '{key}' in the epoch logs "
            f"(got {logs.get(key)!r}); put the Validation callback before "
            "it"
        )
    return float(logs[key])


SCHEDULES = {
    "constant": ConstantLR,
    "zaremba": ZarembaDecay,
    "plateau_annealing": PlateauAnnealing,
    "divide_on_plateau": DivideOnPlateau,
}


def make_lr_schedule(spec, initial_lr):
    """Builds a schedule from ``{"name": ..., **params}``."""
    spec = dict(spec or {"name": "constant"})
    name = spec.pop("name", "constant")
    if name not in SCHEDULES:
        raise ValueError(
            f"Unknown lr_schedule {name!r}; known: {sorted(SCHEDULES)}"
        )
    try:
        return SCHEDULES[name](initial_lr, **spec)
    except TypeError as e:
        raise ValueError(f"Bad parameters for lr_schedule {name!r}: {e}") from e
