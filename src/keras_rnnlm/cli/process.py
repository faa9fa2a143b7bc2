"""What a command (``keras-rnnlm VERB``, a recipe, a tuning recipe) does
to its own process as it starts, before TensorFlow's first op: glibc's
malloc set for the compiled loops (:func:`keras_rnnlm._malloc.tune_malloc`)
and XLA's programs kept on disk between runs
(:func:`keras_rnnlm._compile_cache.use_compile_cache`). ``import
keras_rnnlm`` alone does neither."""

from keras_rnnlm._compile_cache import use_compile_cache
from keras_rnnlm._malloc import tune_malloc


def prepare_process():
    """Sets the process up for a command (see the module doc)."""
    tune_malloc()
    use_compile_cache()


__all__ = ["prepare_process"]
