"""The model builder and the registry of recurrent layers."""

from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.builder import copy_weights
from keras_rnnlm.models.builder import reset_states
from keras_rnnlm.models.builder import validate_model_config
from keras_rnnlm.models.recurrent_registry import make_recurrent_layer
from keras_rnnlm.models.recurrent_registry import recurrent_layer_names
from keras_rnnlm.models.recurrent_registry import register_recurrent_layer

__all__ = [
    "build_language_model",
    "copy_weights",
    "make_recurrent_layer",
    "recurrent_layer_names",
    "register_recurrent_layer",
    "reset_states",
    "validate_model_config",
]
