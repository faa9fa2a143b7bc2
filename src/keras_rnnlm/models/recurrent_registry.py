"""Every recurrent layer the builder can stack, by name.

The builder makes each of its recurrent layers here, so this registry is
the one list of them (:func:`recurrent_layer_names`):

* ``lstm`` (the package's fused LSTM), ``keras_lstm``, ``gru``,
  ``simple_rnn``: Keras-style layers;
* ``weight_drop_lstm``: the fused LSTM with a DropConnect recurrent kernel
  (AWD-LSTM; arguments ``weight_dropout``, ``seed``), what the builder
  makes for ``cell="lstm"`` with ``weight_dropout > 0``;
* ``mmlstm``: the Major-Minor LSTM (arguments ``major_proportion``,
  ``minor_input``, ``weight_dropout``, ``seed``);
* ``multicell_lstm``: the multi-cell LSTM;
* ``mrnn``, ``mlstm``, ``tmlstm``, ``mgru``, ``tmgru``: multiplicative
  cells (:mod:`keras_rnnlm.layers.multiplicative`).

Every layer above takes a sentence-level reset mask, ``layer(x,
reset=r)`` (:data:`keras_rnnlm.models.builder.RESET_CELLS`); Keras's
``keras_lstm``, ``gru`` and ``simple_rnn`` without ``dropout`` /
``recurrent_dropout`` under a mask.

A factory takes ``(units, *, stateful, initializer, name, **kwargs)`` and
returns a Keras recurrent layer with ``return_sequences=True``; the
initializer goes to every weight (:func:`~keras_rnnlm.models.initializers.
with_initializer`). Later model families register theirs with
:func:`register_recurrent_layer`; a Keras RNN cell class or instance can
also be passed to the builder directly.
"""

import keras

from keras_rnnlm.layers import keras_recurrent as stateful_layers
from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multiplicative import CELLS as MULTIPLICATIVE_CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models.initializers import with_initializer

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


def _layer_factory(layer_cls, lstm=False):
    """Factory of a recurrent layer class taking ``units`` and the Keras
    RNN layer arguments; ``lstm``: see :func:`with_initializer`."""

    def factory(units, *, stateful, initializer=None, name=None, **kw):
        return layer_cls(
            units,
            return_sequences=True,
            stateful=stateful,
            name=name,
            **with_initializer(kw, initializer, lstm=lstm),
        )

    return factory


register_recurrent_layer("lstm", _layer_factory(LSTM, lstm=True))
register_recurrent_layer(
    "weight_drop_lstm", _layer_factory(WeightDropLSTM, lstm=True)
)
register_recurrent_layer("mmlstm", _layer_factory(MajorMinorLSTM, lstm=True))
register_recurrent_layer(
    "multicell_lstm", _layer_factory(MultiCellLSTM, lstm=True)
)
# Keras's own layers, with the carried state tracked so that it survives
# the JAX backend's stateless train/test steps (keras_rnnlm.loops.state).
register_recurrent_layer(
    "keras_lstm", _layer_factory(stateful_layers.KerasLSTM, lstm=True)
)
register_recurrent_layer("gru", _layer_factory(stateful_layers.GRU))
register_recurrent_layer(
    "simple_rnn", _layer_factory(stateful_layers.SimpleRNN)
)


def _multiplicative(cell_cls):
    def factory(
        units, *, stateful, initializer=None, name=None, fused="auto", **kw
    ):
        kw = with_initializer(
            kw, initializer, weights=("intermediate_initializer",)
        )
        return MultiplicativeRNN(
            cell_cls(units, **kw),
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
        cell = cell(units, **with_initializer(cell_kwargs, initializer))
    if not hasattr(cell, "state_size"):
        raise TypeError(
            f"Expected a recurrent layer name, an RNN cell or an RNN layer; "
            f"got {cell!r}"
        )
    return stateful_layers.RNN(
        cell, return_sequences=True, stateful=stateful, name=name
    )
