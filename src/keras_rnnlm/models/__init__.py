"""The model builder, the registry of recurrent layers and the helpers on
built models.

- :mod:`~keras_rnnlm.models.builder`: :func:`build_language_model`.
- :mod:`~keras_rnnlm.models.recurrent_registry`: every recurrent layer.
- :mod:`~keras_rnnlm.models.initializers`: the weight initializers.
- :mod:`~keras_rnnlm.models.state`: the recurrent layers of a model and
  their carried state (:func:`reset_states`).
- :mod:`~keras_rnnlm.models.weights`: :func:`copy_weights`, parameter
  counts of built models.
- :mod:`~keras_rnnlm.models.samplers`: a sampled softmax's samplers.
- :mod:`~keras_rnnlm.models.params`: parameter counts from a config.
"""

from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.builder import validate_model_config
from keras_rnnlm.models.recurrent_registry import make_recurrent_layer
from keras_rnnlm.models.recurrent_registry import recurrent_layer_names
from keras_rnnlm.models.recurrent_registry import register_recurrent_layer
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import copy_weights

__all__ = [
    "build_language_model",
    "copy_weights",
    "make_recurrent_layer",
    "recurrent_layer_names",
    "register_recurrent_layer",
    "reset_states",
    "validate_model_config",
]
