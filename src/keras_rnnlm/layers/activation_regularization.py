"""Activation (AR) and temporal activation (TAR) regularisation.

Merity, McCann & Socher (2017), used by AWD-LSTM, MoS and DOC on the last
recurrent layer only:

    AR  = alpha * mean(dropped_last_output ** 2)
    TAR = beta  * mean((raw_last_output[:, t + 1] - raw_last_output[:, t]) ** 2)

(means over every element: batch, time and features, as the reference
code's ``.pow(2).mean()``; TAR is 0 for a one-step window, which has no
time differences -- the reference's loop never forms one, ours may serve
the last target of an epoch alone). Both are added to the training loss with
``add_loss`` (never at inference or evaluation); the logged perplexity uses
the cross-entropy alone (the ``nll`` metric). The unweighted values of the
last training batch are kept in the non-trainable variables ``ar`` and
``tar`` so that :class:`keras_rnnlm.callbacks.RegularizerLogger` can log
them separately from the cross-entropy.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class ActivationRegularization(keras.layers.Layer):
    """Identity on the dropped output that adds alpha * AR + beta * TAR.

    Args:
        alpha: AR coefficient (AWD-LSTM: 2).
        beta: TAR coefficient (AWD-LSTM: 1).
        **kwargs: Base ``Layer`` arguments.

    Call arguments:
        inputs: ``[dropped, raw]``, both ``(batch, time, features)``: the
            last layer's output after and before its (locked) dropout.
        training: add the losses.

    Returns:
        ``dropped`` unchanged.

    Example:

    >>> reg = ActivationRegularization(2.0, 1.0)
    >>> h = np.ones((2, 3, 4), "float32")
    >>> reg([h, h]).shape
    (2, 3, 4)
    """

    def __init__(self, alpha=0.0, beta=0.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.ar = self.add_weight(
            name="ar", shape=(), initializer="zeros", trainable=False
        )
        self.tar = self.add_weight(
            name="tar", shape=(), initializer="zeros", trainable=False
        )
        self.built = True

    def call(self, inputs, training=False):
        dropped, raw = inputs
        if not training:
            return dropped
        ar = ops.mean(ops.square(ops.cast(dropped, "float32")))
        raw = ops.cast(raw, "float32")
        # A one-step window (the last window of an epoch may be one token)
        # has no time differences: TAR is 0 there, not the NaN of an empty
        # mean (which would end the run).
        steps = ops.square(raw[:, 1:] - raw[:, :-1])
        count = ops.cast(ops.size(steps), "float32")
        tar = ops.sum(steps) / ops.maximum(count, 1.0)
        self.ar.assign(ar)
        self.tar.assign(tar)
        loss = 0.0
        if self.alpha:
            loss = loss + self.alpha * ar
        if self.beta:
            loss = loss + self.beta * tar
        if self.alpha or self.beta:
            self.add_loss(loss)
        return dropped

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        return {
            **super().get_config(),
            "alpha": self.alpha,
            "beta": self.beta,
        }
