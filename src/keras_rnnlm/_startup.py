"""Quiet start-up: TensorFlow's C++ chatter off unless the user asked.

On a machine without a GPU, importing TensorFlow prints oneDNN and CUDA
probing lines (``Could not find cuda drivers``, ``failed call to cuInit``)
through absl before its own log level is read, so ``TF_CPP_MIN_LOG_LEVEL``
alone does not hide them. When the user has not set
``TF_CPP_MIN_LOG_LEVEL``, ``import keras_rnnlm`` (the first thing a
command that runs, a recipe and any user code do) sets it to 3 and imports
TensorFlow with the process's standard error (file descriptor 2)
redirected to ``/dev/null``; the descriptor is restored afterwards, so
everything later (and any import error) is printed as usual.

This module is the bottom of the package's layers: it runs before
``keras_rnnlm/__init__.py`` imports the layers (which load Keras and so
TensorFlow) to register them.
"""

import os


def quiet_tensorflow_startup():
    """Silences TensorFlow's start-up lines unless ``TF_CPP_MIN_LOG_LEVEL``
    is set. A no-op on the JAX and PyTorch backends."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow  # noqa: F401  (loaded here, once, quietly)
    except ImportError:
        pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
