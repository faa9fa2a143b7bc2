"""Validation on a separate evaluation model after every epoch."""

import keras


class Validation(keras.callbacks.Callback):
    """Evaluates the training model's weights on a token stream.

    Uses an :class:`~keras_rnnlm.evaluation.Evaluator` (its own model with
    the evaluation batch size and window; the state is reset before the
    pass and carried through it) and adds ``val_loss`` (mean token NLL),
    ``val_ppl`` and, for character corpora, ``val_bpc`` to the epoch logs,
    so callbacks after it (schedules, checkpoints, loggers) see them.

    Args:
        evaluator_factory: zero-argument callable returning the Evaluator
            (built lazily, on first use, so the callback can be copied).
        ids: the validation token ids.
        prefix: log key prefix.
    """

    def __init__(self, evaluator_factory, ids, prefix="val_"):
        super().__init__()
        self.evaluator_factory = evaluator_factory
        self.ids = ids
        self.prefix = prefix
        self._evaluator = None

    def evaluate(self):
        if self._evaluator is None:
            self._evaluator = self.evaluator_factory()
        return self._evaluator.evaluate(self.ids, weights_from=self.model)

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        result = self.evaluate()
        logs[self.prefix + "loss"] = result["nll"]
        logs[self.prefix + "ppl"] = result["ppl"]
        if "bpc" in result:
            logs[self.prefix + "bpc"] = result["bpc"]
