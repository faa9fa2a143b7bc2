"""The recurrent state of a model: which layers carry it, and resetting it.

:func:`outer_recurrent_layers` is the one answer to "which are the
recurrent layers of this model": :func:`reset_states` zeroes their
states, the scoring graph (:mod:`keras_rnnlm.inference_model`)
gives each its stateless twin.
"""

import keras

from keras_rnnlm.loops.recurrence import step_entries


def is_recurrent_layer(layer):
    """Whether ``layer`` carries recurrent state: an instance of
    ``keras.layers.RNN``, or any layer with ``get_initial_state`` whose
    config has ``return_state`` (e.g. :class:`~keras_rnnlm.layers.
    major_minor_lstm.MajorMinorLSTM`, which holds two LSTMs)."""
    if isinstance(layer, keras.layers.RNN):
        return True
    if not hasattr(layer, "get_initial_state"):
        return False
    try:
        return "return_state" in layer.get_config()
    except NotImplementedError:
        return False


def outer_recurrent_layers(layer):
    """The recurrent layers under ``layer`` (a model), in layer order,
    stateful or not, outermost only: the recurrent layers inside a
    recurrent layer (the two LSTMs of a ``MajorMinorLSTM``) are part of
    it, not listed."""
    found = []
    for sub in layer._flatten_layers(include_self=False, recursive=False):
        if is_recurrent_layer(sub):
            found.append(sub)
        else:
            found.extend(outer_recurrent_layers(sub))
    return found


def largest_step_entries(model):
    """The most weight entries one time step of any recurrent loop in
    ``model`` multiplies each row by (the measure
    :func:`~keras_rnnlm.loops.loop_parts.loop_parts` takes): a cell's
    ``step_weights()`` where it has them (the multiplicative and
    multi-cell cells), else its ``recurrent_kernel`` (``H x 4H`` for an
    LSTM); 0 for a model without recurrent loops."""
    most = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if callable(getattr(layer, "step_weights", None)):
            most = max(most, step_entries(*layer.step_weights()))
        elif isinstance(layer, keras.layers.Layer) and hasattr(
            layer, "recurrent_kernel"
        ):
            most = max(most, step_entries(layer.recurrent_kernel))
    return most


def reset_states(model):
    """Zeroes every carried recurrent state of ``model`` (the states of its
    stateful recurrent layers)."""
    for layer in outer_recurrent_layers(model):
        if getattr(layer, "stateful", False):
            layer.reset_state()
