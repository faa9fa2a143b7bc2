"""TensorFlow for the features that only it provides (SavedModel export,
serving), with one clear error where it is not there.

Training, evaluation and scoring run on every Keras backend; an install
of Keras on JAX (a GPU machine, say) may have no TensorFlow at all. There
``keras-rnnlm export`` or ``serve`` says so in one line (a
:class:`~keras_rnnlm.config.ConfigError`, which the CLI prints as a user
error) instead of a traceback.
"""

import keras

from keras_rnnlm.config import ConfigError


def require_tensorflow(feature):
    """The ``tensorflow`` module, for ``feature`` (named in the error).

    Raises:
        ConfigError: Keras runs on another backend, or TensorFlow is not
            installed.
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise ConfigError(
            f"{feature} needs the TensorFlow backend, and Keras runs on "
            f"{backend!r}: set KERAS_BACKEND=tensorflow"
        )
    try:
        import tensorflow as tf  # the point of this module
    except ImportError as e:
        raise ConfigError(
            f"{feature} needs TensorFlow, which is not installed ({e}): "
            "pip install keras-rnnlm (TensorFlow is one of its dependencies)"
        ) from None
    return tf
