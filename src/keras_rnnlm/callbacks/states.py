"""Recurrent-state resets for stateful truncated-BPTT training."""

import keras

from keras_rnnlm.models.state import reset_states


class ResetStates(keras.callbacks.Callback):
    """Zeroes the carried recurrent state at the start of every epoch.

    Within an epoch the state flows from one batch to the next (stream b of
    batch k+1 continues stream b of batch k); gradients never cross a batch
    boundary. Evaluation models are reset by the evaluator itself.
    """

    def on_epoch_begin(self, epoch, logs=None):
        reset_states(self.model)
