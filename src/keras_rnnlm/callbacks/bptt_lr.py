"""AWD-LSTM's variable-BPTT learning-rate scaling."""

import keras

from keras_rnnlm.callbacks.base import sync_model_state


class SequenceLengthLRScale(keras.callbacks.Callback):
    """Scales each step's learning rate by ``seq_len / bptt``.

    With AWD-LSTM's variable windows a long window contributes more tokens
    to the mean loss, so the reference code sets the step's lr to
    ``lr * seq_len / bptt`` (the drawn length) and restores ``lr`` after
    the step. The factor of batch ``i`` is ``stream.lr_scale(i)`` of the
    run's :class:`~keras_rnnlm.data.streams.LMSequence` (batches are served
    in order, ``shuffle=False``). Place it after the LR schedule (which
    sets the epoch's base rate at epoch begin).

    Args:
        stream: the training ``LMSequence``.
    """

    def __init__(self, stream):
        super().__init__()
        self.stream = stream
        self.base_lr = None

    def _lr(self):
        return self.model.optimizer.learning_rate

    def on_epoch_begin(self, epoch, logs=None):
        self.base_lr = float(keras.ops.convert_to_numpy(self._lr()))

    def on_train_batch_begin(self, batch, logs=None):
        sync_model_state(self.model)
        if self.base_lr is None:
            self.on_epoch_begin(None)
        self._lr().assign(self.base_lr * self.stream.lr_scale(batch))

    def on_train_batch_end(self, batch, logs=None):
        sync_model_state(self.model)
        self._lr().assign(self.base_lr)
