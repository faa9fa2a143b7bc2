"""What a command (``keras-rnnlm VERB``, a recipe, a tuning recipe) does
to its own process as it starts, before TensorFlow's first op: glibc's
malloc set for the compiled loops (:func:`keras_rnnlm._malloc.tune_malloc`),
XLA's programs kept on disk between runs
(:func:`keras_rnnlm._compile_cache.use_compile_cache`), and the objects of
its imports out of the cyclic collector's walks
(:func:`keras_rnnlm_launcher.collector.freeze_imports`). ``import
keras_rnnlm`` alone does none of these."""

from keras_rnnlm._compile_cache import use_compile_cache
from keras_rnnlm._malloc import tune_malloc
from keras_rnnlm_launcher.collector import freeze_imports


def prepare_process():
    """Sets the process up for a command (see the module doc)."""
    freeze_imports()
    tune_malloc()
    use_compile_cache()


__all__ = ["prepare_process"]
