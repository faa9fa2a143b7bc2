"""Weight initializers of builder models.

:func:`uniform` and :func:`fan_uniform` make the initializers the builder
draws weights from; :func:`with_initializer` hands one initializer to every
weight of a recurrent layer, the one rule for all recurrent layers (see
:mod:`keras_rnnlm.models.recurrent_registry`).
"""

import math

import keras

#: The constructor arguments a recurrent layer's weights are drawn by.
RECURRENT_WEIGHTS = (
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
)


def uniform(init_range, seed=None):
    """U(-init_range, init_range), or ``None`` (the layers' own Keras
    defaults) when ``init_range`` is ``None``."""
    if init_range is None:
        return None
    return keras.initializers.RandomUniform(-init_range, init_range, seed=seed)


def fan_uniform(fan, seed=None):
    """PyTorch's default U(-1/sqrt(fan), 1/sqrt(fan))."""
    return uniform(1.0 / math.sqrt(fan), seed)


def lstm_branch_uniform(seed=None):
    """PyTorch's ``nn.LSTM`` default U(+-1/sqrt(H)) for an LSTM whose size
    ``H`` the initializer reads from the weight's shape: fan-out ``4 H``
    (kernel, recurrent kernel and bias alike), ``VarianceScaling(4/3,
    "fan_out", "uniform")`` has the limit ``sqrt(3 * (4/3) / (4 H)) =
    1/sqrt(H)``. For layers holding LSTMs of several sizes (the Major and
    Minor branches of :class:`~keras_rnnlm.layers.major_minor_lstm.
    MajorMinorLSTM`), each drawn with its own ``H``."""
    return keras.initializers.VarianceScaling(
        4.0 / 3.0, "fan_out", "uniform", seed=seed
    )


def with_initializer(kwargs, initializer, lstm=False, weights=()):
    """Constructor arguments ``kwargs`` of a recurrent layer (or cell) plus
    ``initializer`` for each of its weights.

    Args:
        kwargs: the layer's other arguments (e.g. ``ModelConfig.
            cell_kwargs``); an initializer named there wins.
        initializer: a Keras initializer, or ``None`` (``kwargs``
            unchanged: the layer's own defaults).
        lstm: the layer has LSTM gates: a uniform initializer covers the
            biases too (Zaremba et al.), so no forget-gate bias of 1
            (``unit_forget_bias=False``) unless ``kwargs`` asks for it.
        weights: argument names of further weights (e.g. a multiplicative
            cell's ``intermediate_initializer``).

    Returns:
        A new dict.
    """
    kwargs = dict(kwargs)
    if initializer is None:
        return kwargs
    for key in (*RECURRENT_WEIGHTS, *weights):
        kwargs.setdefault(key, initializer)
    if lstm:
        kwargs.setdefault("unit_forget_bias", False)
    return kwargs
