"""Per-epoch logging of the loss terms other than the cross-entropy."""

import keras
from keras import ops

from keras_rnnlm.callbacks.base import sync_model_state


class RegularizerLogger(keras.callbacks.Callback):
    """Adds the epoch means of AR, TAR and DOC's cv to the logs.

    The model's :class:`~keras_rnnlm.layers.activation_regularization.
    ActivationRegularization` and :class:`~keras_rnnlm.layers.
    direct_output_connection.DirectOutputConnection` layers keep the
    unweighted value of their last training batch in non-trainable
    variables (``ar``, ``tar``, ``cv``); this callback averages them over
    the epoch's batches and writes ``ar``, ``tar``, ``cv`` to the epoch
    logs (the cross-entropy alone is ``nll``/``ppl``; ``loss`` is the
    total). Place it before the loggers.
    """

    state_key = "RegularizerLogger"
    KEYS = ("ar", "tar", "cv")

    def _sources(self):
        out = []
        for layer in self.model._flatten_layers(include_self=False):
            for key in self.KEYS:
                v = getattr(layer, key, None)
                if isinstance(v, keras.Variable):
                    out.append((key, v))
        return out

    def on_epoch_begin(self, epoch, logs=None):
        self._vars = self._sources()
        self._sums = {k: 0.0 for k, _ in self._vars}
        self._n = 0

    def on_train_batch_end(self, batch, logs=None):
        if not self._vars:
            return
        self._n += 1
        sync_model_state(self.model)
        for key, v in self._vars:
            self._sums[key] += float(ops.convert_to_numpy(v.value))

    def get_epoch_progress(self):
        """The sums and batch count of the epoch so far (mid-epoch
        checkpoints)."""
        return {"sums": dict(self._sums), "n": self._n}

    def set_epoch_progress(self, progress):
        self._sums = {k: float(v) for k, v in progress["sums"].items()}
        self._n = int(progress["n"])

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not self._n:
            return
        for key, total in self._sums.items():
            logs[key] = total / self._n
