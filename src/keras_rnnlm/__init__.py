"""keras_rnnlm: recurrent neural language models for Keras 3.

Subpackages: ``data`` (corpora, vocabulary, token streams), ``layers``
(cells, recurrent layers, heads), ``models`` (the builder), ``training``
(the ``model.fit`` trainer and metrics), ``callbacks``, ``evaluation``.

``import keras_rnnlm`` registers every class the package saves in a
``.keras`` file (its layers, losses, metrics and optimizer), so that
``keras.saving.load_model("RUN/model.keras")`` works after it alone.
Registering loads Keras, and so TensorFlow: first TensorFlow is imported
with its C++ start-up lines filtered by ``TF_CPP_MIN_LOG_LEVEL`` (3 unless
the user set it; :mod:`keras_rnnlm._startup`). It does nothing else to the
process: the programs (``keras-rnnlm``, the recipes) set glibc's
allocator for TensorFlow's compiled loops when they start
(:mod:`keras_rnnlm._malloc`).

``keras_rnnlm.LanguageModel`` (a trained model from a run directory or an
export: scoring and text generation) is imported on first use.
"""

from keras_rnnlm._startup import quiet_tensorflow_startup
from keras_rnnlm._version import __version__

quiet_tensorflow_startup()


def _register_serializable_classes():
    """Imports every module that registers a Keras-serializable class:
    each module of :mod:`keras_rnnlm.layers` (found by walking the
    package, so a new layer module is registered too), the losses and
    metrics, and the SGD optimizer."""
    import importlib
    import pkgutil

    import keras_rnnlm.layers
    import keras_rnnlm.metrics  # noqa: F401  (losses and metrics)
    import keras_rnnlm.optimizers  # noqa: F401  (SGD)

    for info in pkgutil.iter_modules(
        keras_rnnlm.layers.__path__, "keras_rnnlm.layers."
    ):
        importlib.import_module(info.name)


_register_serializable_classes()


def __getattr__(name):
    """:class:`~keras_rnnlm.language_model.LanguageModel`, imported on
    first use (importing the package only registers its classes)."""
    if name == "LanguageModel":
        from keras_rnnlm.language_model import LanguageModel  # on first use

        return LanguageModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LanguageModel", "__version__"]
