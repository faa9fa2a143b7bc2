"""The command line: ``keras-rnnlm COMMAND`` and the recipes' ``main``.

Importing this package first imports :mod:`keras_rnnlm`, which silences
TensorFlow's C++ start-up lines (unless ``TF_CPP_MIN_LOG_LEVEL`` is set)
before anything loads Keras, so recipe files import :func:`recipe_main`
first.
"""

from keras_rnnlm.cli.main import build_parser
from keras_rnnlm.cli.main import main
from keras_rnnlm.cli.train import recipe_main

__all__ = ["build_parser", "main", "recipe_main"]
