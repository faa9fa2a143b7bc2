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
with_initializer`). The ``**kwargs`` are ``ModelConfig.cell_kwargs``
(and what the builder adds); :func:`recurrent_layer_arguments` lists the
ones a layer takes, read from its constructors' signatures, so that a
config naming another is refused when it is validated. Later model
families register theirs with :func:`register_recurrent_layer`; a Keras
RNN cell class or instance can also be passed to the builder directly.
"""

import inspect

import keras

from keras_rnnlm.layers import keras_recurrent as stateful_layers
from keras_rnnlm.layers.lstm import LSTM
from keras_rnnlm.layers.major_minor_lstm import MajorMinorLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTM
from keras_rnnlm.layers.multicell_lstm import MultiCellLSTMCell
from keras_rnnlm.layers.multiplicative import CELLS as MULTIPLICATIVE_CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.layers.weight_drop_lstm import WeightDropLSTM
from keras_rnnlm.models.initializers import with_initializer

_REGISTRY = {}
#: name -> the constructors whose keyword arguments a layer's extra
#: arguments (``ModelConfig.cell_kwargs``) go to, plus the names its
#: factory takes itself (:func:`recurrent_layer_arguments`).
_ARGUMENTS = {}
#: What every factory is given by :func:`make_recurrent_layer` (never an
#: extra argument).
SET_BY_BUILDER = ("units", "stateful", "initializer", "name")


def register_recurrent_layer(name, factory=None, *, constructors=(), extra=()):
    """Registers ``factory`` under ``name`` (usable as a decorator).

    Args:
        name: the ``ModelConfig.cell`` name.
        factory: ``factory(units, *, stateful, initializer, name,
            **kwargs)``.
        constructors: the classes the factory passes its ``**kwargs``
            to: the layer's extra arguments are checked against their
            keyword arguments (:func:`recurrent_layer_arguments`); empty:
            not checked.
        extra: further keyword arguments of the factory itself.
    """

    def _register(f):
        if name in _REGISTRY and _REGISTRY[name] is not f:
            raise ValueError(f"Recurrent layer {name!r} already registered")
        _REGISTRY[name] = f
        if constructors:
            _ARGUMENTS[name] = (tuple(constructors), tuple(extra))
        return f

    return _register(factory) if factory is not None else _register


def recurrent_layer_names():
    """Sorted names accepted as ``ModelConfig.cell``."""
    return sorted(_REGISTRY)


def recurrent_layer_arguments(name):
    """The extra arguments (``ModelConfig.cell_kwargs``) layer ``name``
    takes: every keyword argument of its constructors (followed through
    ``**kwargs`` up to ``keras.layers.Layer``'s own), less those its
    factory sets (``return_sequences``, an RNN's ``cell``) and
    :data:`SET_BY_BUILDER`; ``None`` for a layer registered without its
    constructors."""
    if name not in _ARGUMENTS:
        return None
    constructors, extra = _ARGUMENTS[name]
    names = set(extra)
    for cls in constructors:
        names |= _keyword_arguments(cls)
    return names - {*SET_BY_BUILDER, "return_sequences", "cell"}


def _keyword_arguments(cls):
    """The names ``cls(...)`` accepts as keywords: its ``__init__``'s,
    and, while an ``__init__`` takes ``**kwargs``, its bases' up to
    ``keras.layers.Layer``."""
    names = set()
    for base in cls.__mro__:
        if "__init__" not in vars(base):
            continue
        params = list(inspect.signature(base.__init__).parameters.values())
        kinds = (params[0].POSITIONAL_OR_KEYWORD, params[0].KEYWORD_ONLY)
        names |= {p.name for p in params[1:] if p.kind in kinds}
        takes_more = any(p.kind is p.VAR_KEYWORD for p in params)
        if base is keras.layers.Layer or not takes_more:
            break
    return names


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


def _register_layer(name, layer_cls, lstm=False, constructors=()):
    register_recurrent_layer(
        name,
        _layer_factory(layer_cls, lstm=lstm),
        constructors=(layer_cls, *constructors),
    )


_register_layer("lstm", LSTM, lstm=True)
_register_layer("weight_drop_lstm", WeightDropLSTM, lstm=True)
_register_layer("mmlstm", MajorMinorLSTM, lstm=True)
# The multi-cell LSTM hands its cell's arguments on to the cell.
_register_layer(
    "multicell_lstm", MultiCellLSTM, lstm=True, constructors=[MultiCellLSTMCell]
)
# Keras's own layers, with the carried state tracked so that it survives
# the JAX backend's stateless train/test steps (keras_rnnlm.loops.state).
_register_layer("keras_lstm", stateful_layers.KerasLSTM, lstm=True)
_register_layer("gru", stateful_layers.GRU)
_register_layer("simple_rnn", stateful_layers.SimpleRNN)


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
    register_recurrent_layer(
        _name, _multiplicative(_cls), constructors=[_cls], extra=["fused"]
    )


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
