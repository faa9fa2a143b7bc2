"""The command line: ``keras-rnnlm COMMAND`` and the recipes' ``main``.

Importing this package first silences TensorFlow's C++ start-up lines
(unless ``TF_CPP_MIN_LOG_LEVEL`` is set), so recipe files import
:func:`recipe_main` before anything that loads Keras.
"""

from keras_rnnlm.cli.startup import quiet_tensorflow_startup

quiet_tensorflow_startup()

from keras_rnnlm.cli.main import build_parser  # noqa: E402
from keras_rnnlm.cli.main import main  # noqa: E402
from keras_rnnlm.cli.train import recipe_main  # noqa: E402

__all__ = ["build_parser", "main", "recipe_main"]
