"""Keras's own recurrent layers with the package's tracked state.

``keras.layers.LSTM``, ``GRU``, ``SimpleRNN`` and ``RNN`` with their carried
state listed among the layer's variables (so every backend threads it
through its compiled steps) and, for the first three, the package's
sentence-level reset mask (see :mod:`keras_rnnlm.loops.state`). They are
the baselines the registry builds for ``model.cell = "keras_lstm"`` and the
like.
"""

import keras

from keras_rnnlm.loops.state import SentenceResetMixin
from keras_rnnlm.loops.state import TrackedStateMixin


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class KerasLSTM(SentenceResetMixin, TrackedStateMixin, keras.layers.LSTM):
    """``keras.layers.LSTM`` (Keras's own loop) with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class GRU(SentenceResetMixin, TrackedStateMixin, keras.layers.GRU):
    """``keras.layers.GRU`` with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class SimpleRNN(SentenceResetMixin, TrackedStateMixin, keras.layers.SimpleRNN):
    """``keras.layers.SimpleRNN`` with tracked state."""


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class RNN(TrackedStateMixin, keras.layers.RNN):
    """``keras.layers.RNN`` over any cell, with tracked state."""
