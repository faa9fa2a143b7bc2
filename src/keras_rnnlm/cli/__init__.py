"""The command line: the verbs of ``keras-rnnlm`` and the recipes' ``main``.

The ``keras-rnnlm`` console script is :func:`keras_rnnlm_launcher.main`:
it parses the command line without importing this package, then runs
the verb here (:func:`keras_rnnlm.cli.main.run_command`). :func:`main`
and :func:`build_parser` are the launcher's, for ``python -m
keras_rnnlm.cli`` and for programs. Recipe files import
:func:`recipe_main` first: importing the package filters TensorFlow's
C++ start-up lines by ``TF_CPP_MIN_LOG_LEVEL`` (3 unless set) before
anything loads Keras.
"""

from keras_rnnlm.cli.main import build_parser
from keras_rnnlm.cli.main import main
from keras_rnnlm.cli.train import recipe_main

__all__ = ["build_parser", "main", "recipe_main"]
