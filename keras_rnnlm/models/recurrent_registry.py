"""Recurrent layers the builder can stack, by name.

A factory takes ``(units, *, stateful, initializer, **cell_kwargs)`` and
returns a Keras RNN layer with ``return_sequences=True``. Later model
families register theirs with :func:`register_recurrent_layer`; a Keras
RNN cell class or instance can also be passed to the builder directly.
"""

import keras

from keras_rnnlm.layers import stateful as stateful_layers
from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.multicell_lstm import make_multicell_layer
from keras_rnnlm.layers.multiplicative import CELLS as MULTIPLICATIVE_CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN

_REGISTRY = {}


def register_recurrent_layer(name, factory=None):
    """Registers ``factory`` under ``name`` (usable as a decorator)."""

    def _register(f):
        if name in _REGISTRY and _REGISTRY[name] is not f:
            raise ValueError(f"Recurrent layer {name!r} already registered")
        _REGISTRY[name] = f
        return f

    return _register(factory) if factory is not None else _register


def recurrent_layer_names():
    """Sorted names accepted as ``ModelConfig.cell``."""
    return sorted(_REGISTRY)


def _inits(initializer):
    if initializer is None:
        return {}
    return {
        "kernel_initializer": initializer,
        "recurrent_initializer": initializer,
        "bias_initializer": initializer,
    }


def _keras_rnn(layer_cls, **fixed):
    def factory(units, *, stateful, initializer=None, name=None, **kw):
        if initializer is not None and issubclass(layer_cls, keras.layers.LSTM):
            # A uniform init covers the biases too (Zaremba et al.): no
            # forget-gate bias of 1 unless asked for.
            kw.setdefault("unit_forget_bias", False)
        return layer_cls(
            units,
            return_sequences=True,
            stateful=stateful,
            name=name,
            **fixed,
            **_inits(initializer),
            **kw,
        )

    return factory


register_recurrent_layer("lstm", _keras_rnn(LSTM))
# Keras's own layers, with the carried state tracked so that it survives
# the JAX backend's stateless train/test steps (keras_rnnlm.layers.stateful).
register_recurrent_layer("keras_lstm", _keras_rnn(stateful_layers.KerasLSTM))
register_recurrent_layer("gru", _keras_rnn(stateful_layers.GRU))
register_recurrent_layer("simple_rnn", _keras_rnn(stateful_layers.SimpleRNN))
register_recurrent_layer("multicell_lstm", make_multicell_layer)


def _multiplicative(cell_cls):
    def factory(
        units, *, stateful, initializer=None, name=None, fused="auto", **kw
    ):
        inits = _inits(initializer)
        if initializer is not None:
            inits["intermediate_initializer"] = initializer
        return MultiplicativeRNN(
            cell_cls(units, **inits, **kw),
            return_sequences=True,
            stateful=stateful,
            fused=fused,
            name=name,
        )

    return factory


for _name, _cls in MULTIPLICATIVE_CELLS.items():
    register_recurrent_layer(_name, _multiplicative(_cls))


def make_recurrent_layer(
    cell, units, *, stateful, initializer=None, name=None, **cell_kwargs
):
    """Builds one recurrent layer.

    Args:
        cell: a registered name, a Keras RNN cell class (called as
            ``cell(units, **cell_kwargs)``) or a cell instance (``units``
            ignored), or a ``keras.layers.RNN`` instance (used as is).
        units: layer size.
        stateful: carry the state across batches.
        initializer: weight initializer for every weight of the layer.
        name: layer name.
        **cell_kwargs: extra constructor arguments.
    """
    if isinstance(cell, str):
        if cell not in _REGISTRY:
            raise ValueError(
                f"Unknown recurrent layer {cell!r}; known: "
                f"{recurrent_layer_names()} (or pass a Keras RNN cell)"
            )
        return _REGISTRY[cell](
            units,
            stateful=stateful,
            initializer=initializer,
            name=name,
            **cell_kwargs,
        )
    if isinstance(cell, keras.layers.RNN):
        return cell
    if isinstance(cell, type):
        cell = cell(units, **_inits(initializer), **cell_kwargs)
    if not hasattr(cell, "state_size"):
        raise TypeError(
            f"Expected a recurrent layer name, an RNN cell or an RNN layer; "
            f"got {cell!r}"
        )
    return stateful_layers.RNN(
        cell, return_sequences=True, stateful=stateful, name=name
    )
