"""The weights of builder models: copying them between models, counting
them."""

import keras

from keras_rnnlm.models.context import copy_context_data
from keras_rnnlm.models.context import idf_layers
from keras_rnnlm.models.samplers import model_samplers


def copy_weights(source, target):
    """Copies trainable weights between two models built from one config,
    and the IDF weights of their CBOW context layers (data the model
    needs, not trained).

    The models may differ in batch size (their state variables are not
    copied). Raises ValueError if the structures differ.
    """
    src, dst = source.trainable_variables, target.trainable_variables
    if len(src) != len(dst):
        raise ValueError(
            f"Models differ: {len(src)} vs {len(dst)} trainable variables"
        )
    for s, d in zip(src, dst):
        if tuple(s.shape) != tuple(d.shape):
            raise ValueError(
                f"Weight shape mismatch: {s.path} {s.shape} vs "
                f"{d.path} {d.shape}"
            )
        # A copy: on JAX, assigning the array itself would alias the two
        # models' buffers, and a compiled step of one (which donates its
        # variables' buffers) would delete the other's weights.
        d.assign(keras.ops.copy(s.value))
    copy_context_data(source, target)


def load_weights_file(model, path, skip=()):
    """Loads a ``.weights.h5`` saved by a model of ``model``'s config (any
    batch size, compiled or not) into ``model``: its layers' variables
    only; optimizer variables in the file, and ``model``'s own optimizer,
    are skipped without a mismatch warning. Read straight into
    ``model`` (no twin model: the weights are in memory once).

    ``skip``: layers ``model`` has on top of its config's (an analysis's
    own layers, e.g. feature masks), which the file does not hold and
    which keep their own variables."""
    optimizer = getattr(model, "optimizer", None)
    objects = list(skip) + ([optimizer] if optimizer is not None else [])
    model.load_weights(path, objects_to_skip=objects or None)


def model_parameters(model):
    """``model.count_params()`` without the candidate samplers' word
    counts and the CBOW context layers' IDF weights (data, not
    parameters)."""
    data = sum(s.vocab_size for s in model_samplers(model))
    data += sum(layer.vocab_size for layer in idf_layers(model))
    return model.count_params() - data
